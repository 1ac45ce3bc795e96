/* Application slowdown, for `cargo xtask bench --only slowdown`: every rank repeats
 *   compute (a fixed number of work units) ; call bproc_00 .. bproc_31 once each ;
 *   MPI_Isend 8 bytes to its partner (rank ^ 1, itself when alone) ; MPI_Recv 8 bytes
 *   from it ; MPI_Wait
 * ITERS times. The work per iteration sets the rate (messages per second per rank);
 * `--func` selects 0, 1, 8 or 32 of the procedures. Rank 0 prints the loop's wall time
 * (MPI_Wtime after a barrier: start-up, attach and detach are not in it) and its own CPU
 * time over the loop (CLOCK_PROCESS_CPUTIME_ID):
 *   secs=<s> cpu_secs=<s> msgs_per_s=<per rank>
 * `bench_slowdown calibrate` (no MPI) prints work units per microsecond: units_per_us=<x>
 * `bench_slowdown calls N` (one rank, for `--only floor`) times N calls of MPI_Comm_rank in
 * the process's CPU time (a probed call with nearly no work of its own) and prints
 *   ns_per_op=<cpu ns per call> wall_ns_per_op=<x>                                       */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;
static volatile int counter;

static void work(long units) {
    unsigned long x = sink;
    for (long i = 0; i < units; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
}

#define P(n) __attribute__((noinline)) void bproc_##n(void) { counter++; }
P(00) P(01) P(02) P(03) P(04) P(05) P(06) P(07) P(08) P(09) P(10) P(11) P(12) P(13) P(14) P(15)
P(16) P(17) P(18) P(19) P(20) P(21) P(22) P(23) P(24) P(25) P(26) P(27) P(28) P(29) P(30) P(31)

static void procedures(void) {
    bproc_00(); bproc_01(); bproc_02(); bproc_03(); bproc_04(); bproc_05(); bproc_06(); bproc_07();
    bproc_08(); bproc_09(); bproc_10(); bproc_11(); bproc_12(); bproc_13(); bproc_14(); bproc_15();
    bproc_16(); bproc_17(); bproc_18(); bproc_19(); bproc_20(); bproc_21(); bproc_22(); bproc_23();
    bproc_24(); bproc_25(); bproc_26(); bproc_27(); bproc_28(); bproc_29(); bproc_30(); bproc_31();
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "calibrate")) {
        long units = 50000000;
        double best = 1e9;
        for (int r = 0; r < 5; r++) {
            double t0 = now_s();
            work(units);
            double t = now_s() - t0;
            if (t < best) best = t;
        }
        printf("units_per_us=%.3f\n", units / (best * 1e6));
        return 0;
    }
    if (argc > 2 && !strcmp(argv[1], "calls")) {
        long n = atol(argv[2]);
        /* Which call: MPI_Comm_rank by default; MPI_Wait, MPI_Waitall and MPI_Test on a
           null request (calls that return at once, whose probes' placement differs:
           docs/benchmarks.md, "Overhead on real codes", round 3). */
        const char *which = argc > 3 ? argv[3] : "rank";
        int call = !strcmp(which, "wait") ? 1 : !strcmp(which, "waitall") ? 2
                 : !strcmp(which, "test") ? 3 : 0;
        if (call == 0 && strcmp(which, "rank")) {
            fprintf(stderr, "usage: %s calls N [rank|wait|waitall|test]\n", argv[0]);
            return 2;
        }
        int rank, flag;
        MPI_Request request = MPI_REQUEST_NULL;
        MPI_Status statuses[1];
        MPI_Init(&argc, &argv);
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        double t0 = now_s();
        for (long i = 0; i < n; i++) {
            switch (call) {
            case 0: MPI_Comm_rank(MPI_COMM_WORLD, &rank); break;
            case 1: MPI_Wait(&request, MPI_STATUS_IGNORE); break;
            case 2: MPI_Waitall(1, &request, statuses); break;
            default: MPI_Test(&request, &flag, MPI_STATUS_IGNORE); break;
            }
        }
        double t = now_s() - t0;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        double c = (c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec);
        printf("ns_per_op=%.1f wall_ns_per_op=%.1f\n", c / n, t * 1e9 / n);
        MPI_Finalize();
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s ITERS UNITS_PER_ITER | calibrate\n", argv[0]);
        return 2;
    }
    long iters = atol(argv[1]), units = atol(argv[2]);
    int rank, size;
    char sbuf[8] = {0}, rbuf[8];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int partner = rank ^ 1;
    if (partner >= size) partner = rank;
    MPI_Barrier(MPI_COMM_WORLD);
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        MPI_Request r;
        work(units);
        procedures();
        MPI_Isend(sbuf, 8, MPI_BYTE, partner, 1, MPI_COMM_WORLD, &r);
        MPI_Recv(rbuf, 8, MPI_BYTE, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    double t = MPI_Wtime() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) / 1e9;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("secs=%.6f cpu_secs=%.6f msgs_per_s=%.1f\n", t, cpu, iters / t);
    MPI_Finalize();
    return 0;
}
