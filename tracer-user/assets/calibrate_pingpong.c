/* MPI ping-pong between ranks 0 and 1, compiled and run by `tracer calibrate`.
 *
 * usage: pingpong SIZES MAX_ITERATIONS SECONDS_PER_SIZE WARMUPS
 *   SIZES: comma-separated message sizes in bytes, e.g. 0,8,64,4096
 *
 * For each size: WARMUPS untimed round trips, then n timed round trips, where n is
 * MAX_ITERATIONS or fewer when the warm-ups say that many would take longer than
 * SECONDS_PER_SIZE at the fastest warm-up's pace (but at least 5, or MAX_ITERATIONS when that is smaller). Rank 0
 * decides n and tells rank 1. Each round trip is timed on its own (CLOCK_MONOTONIC);
 * the reported latency is half the median round trip, robust to the odd preemption.
 *
 * Rank 0 prints one machine-readable line per size on standard output:
 *   tracer-pingpong ranks=N
 *   tracer-pingpong bytes=B iterations=I median_ns=M mean_ns=A min_ns=L max_ns=H
 * (all latencies one-way: half a round trip). Other ranks than 0 and 1 only wait. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TAG_DATA 7
#define TAG_COUNT 8
#define MIN_ITERATIONS 5

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One round trip as rank 0 (send first) or rank 1 (echo). */
static void round_trip(int rank, char *buf, int bytes)
{
    if (rank == 0) {
        MPI_Send(buf, bytes, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(buf, bytes, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(buf, bytes, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, bytes, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 5) {
        if (rank == 0)
            fprintf(stderr, "usage: %s SIZES MAX_ITERATIONS SECONDS_PER_SIZE WARMUPS\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (rank == 0) {
        printf("tracer-pingpong ranks=%d\n", nprocs);
        fflush(stdout);
    }
    if (nprocs < 2) {
        MPI_Finalize();
        return 0;
    }

    /* Parse the sizes; find the largest for the buffer. */
    int nsizes = 1;
    for (const char *p = argv[1]; *p; p++)
        nsizes += *p == ',';
    long long *sizes = malloc(sizeof *sizes * nsizes);
    long long largest = 0;
    char *list = strdup(argv[1]), *save = NULL;
    nsizes = 0;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long long s = strtoll(tok, NULL, 10);
        if (s < 0 || s > 0x7fffffff) {
            if (rank == 0)
                fprintf(stderr, "pingpong: size %s out of range\n", tok);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        sizes[nsizes++] = s;
        if (s > largest)
            largest = s;
    }
    int max_iterations = atoi(argv[2]);
    double seconds = atof(argv[3]);
    int warmups = atoi(argv[4]);
    if (max_iterations < 1)
        max_iterations = 1;

    char *buf = malloc(largest > 0 ? (size_t)largest : 1);
    memset(buf, 0x5a, largest > 0 ? (size_t)largest : 1);
    uint64_t *rtt = malloc(sizeof *rtt * (size_t)max_iterations);

    for (int s = 0; s < nsizes; s++) {
        int bytes = (int)sizes[s];
        if (rank > 1) {
            continue;
        }
        /* The fastest warm-up estimates a round trip (the first may set up a connection). */
        uint64_t fastest = UINT64_MAX;
        for (int w = 0; w < warmups; w++) {
            uint64_t a = now_ns();
            round_trip(rank, buf, bytes);
            uint64_t t = now_ns() - a;
            if (t < fastest)
                fastest = t;
        }
        int n = max_iterations;
        if (rank == 0) {
            if (warmups > 0) {
                double per = (double)fastest;
                double fit = seconds * 1e9 / (per > 1 ? per : 1);
                if (fit < n)
                    n = fit < MIN_ITERATIONS ? MIN_ITERATIONS : (int)fit;
                if (n > max_iterations)
                    n = max_iterations;
            }
            MPI_Send(&n, 1, MPI_INT, 1, TAG_COUNT, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&n, 1, MPI_INT, 0, TAG_COUNT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        for (int i = 0; i < n; i++) {
            uint64_t a = now_ns();
            round_trip(rank, buf, bytes);
            rtt[i] = now_ns() - a;
        }
        if (rank == 0) {
            uint64_t sum = 0;
            for (int i = 0; i < n; i++)
                sum += rtt[i];
            qsort(rtt, (size_t)n, sizeof *rtt, cmp_u64);
            uint64_t median = n % 2 ? rtt[n / 2] : (rtt[n / 2 - 1] + rtt[n / 2]) / 2;
            printf("tracer-pingpong bytes=%d iterations=%d median_ns=%llu mean_ns=%llu "
                   "min_ns=%llu max_ns=%llu\n",
                   bytes, n, (unsigned long long)(median / 2),
                   (unsigned long long)(sum / (uint64_t)n / 2),
                   (unsigned long long)(rtt[0] / 2), (unsigned long long)(rtt[n - 1] / 2));
            fflush(stdout);
        }
    }
    free(rtt);
    free(buf);
    free(list);
    free(sizes);
    MPI_Finalize();
    return 0;
}
