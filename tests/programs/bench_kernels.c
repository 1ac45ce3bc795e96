/* Programs shaped like the codes users run, for `cargo xtask bench --only real`: the
 * communication pattern and the compute grain of NAS kernels and OSU tests, with their
 * own timers, so that the slowdown under the tracer is what the program sees.
 *
 *   bench_kernels stencil ITERS N     2-D Jacobi sweeps on N x N points per rank, the ranks
 *                                     a ring of row blocks; two halo exchanges (Irecv,
 *                                     Isend, Waitall of N doubles each way) per iteration,
 *                                     each followed by half a sweep (NAS MG/LU/SP's shape)
 *   bench_kernels cg ITERS N          a tridiagonal matrix-vector product on N points per
 *                                     rank with a halo of one point each way, then two
 *                                     dot products through MPI_Allreduce of one double
 *                                     (NAS CG's shape)
 *   bench_kernels transpose ITERS N   N doubles per rank updated, then MPI_Alltoall of all
 *                                     of them (NAS FT/IS's transpose)
 *   bench_kernels latency ITERS BYTES ping-pong between ranks 2k and 2k+1 (OSU latency)
 *   bench_kernels allreduce ITERS BYTES  MPI_Allreduce of BYTES in a loop (OSU collective)
 *
 * N is per rank at 2 ranks: stencil, cg and transpose keep the total the same at any number
 * of ranks (each rank takes 2N/size of it), so more ranks share the same problem.
 *
 * Every rank times its loop with MPI_Wtime between two barriers; rank 0 prints the
 * slowest rank's time and its own CPU time over the loop:
 *   secs=<s> per_iter_us=<us> cpu_secs=<s> check=<a checksum, so no work is dead>
 * For latency, per_iter_us is the one-way latency: half a round trip.               */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int rank, size;

/* A rank's part of a problem of 2n (n at 2 ranks). */
static int share(int n) {
    int part = (int)(2L * n / size);
    return part > 2 ? part : 2;
}

/* The ring neighbours of a row-block decomposition. */
static int up(void) { return (rank + size - 1) % size; }
static int down(void) { return (rank + 1) % size; }

/* Exchanges the first and last interior rows of `g` (rows+2 rows of n) with the
 * neighbours' halos. */
static void halo(double *g, int rows, int n, int tag) {
    MPI_Request req[4];
    MPI_Irecv(g, n, MPI_DOUBLE, up(), tag, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(g + (size_t)(rows + 1) * n, n, MPI_DOUBLE, down(), tag, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(g + (size_t)n, n, MPI_DOUBLE, up(), tag, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(g + (size_t)rows * n, n, MPI_DOUBLE, down(), tag, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
}

/* Half a Jacobi sweep: rows [first, last) of `dst` from `src`. */
static void sweep(double *dst, const double *src, int first, int last, int n) {
    for (int i = first; i < last; i++)
        for (int j = 1; j < n - 1; j++)
            dst[(size_t)i * n + j] = 0.25 * (src[(size_t)(i - 1) * n + j] + src[(size_t)(i + 1) * n + j] +
                                             src[(size_t)i * n + j - 1] + src[(size_t)i * n + j + 1]);
}

static double stencil(long iters, int n) {
    int rows = share(n);
    size_t cells = (size_t)(rows + 2) * n;
    double *a = calloc(cells, sizeof(double)), *b = calloc(cells, sizeof(double));
    for (size_t k = 0; k < cells; k++) a[k] = b[k] = (double)((k * 7 + rank) % 13);
    for (long it = 0; it < iters; it++) {
        halo(a, rows, n, 1);
        sweep(b, a, 1, rows / 2 + 1, n);
        halo(b, rows, n, 2);
        sweep(a, b, rows / 2 + 1, rows + 1, n);
    }
    double sum = a[(size_t)n + n / 2] + b[(size_t)rows * n + n / 2];
    free(a);
    free(b);
    return sum;
}

static double cg(long iters, int n) {
    n = share(n);
    double *p = calloc(n + 2, sizeof(double)), *q = calloc(n + 2, sizeof(double));
    double *r = calloc(n + 2, sizeof(double));
    for (int i = 1; i <= n; i++) p[i] = r[i] = 1.0 + (i + rank) % 5;
    double rho = 0;
    for (long it = 0; it < iters; it++) {
        MPI_Request req[4];
        MPI_Irecv(&p[0], 1, MPI_DOUBLE, up(), 3, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(&p[n + 1], 1, MPI_DOUBLE, down(), 3, MPI_COMM_WORLD, &req[1]);
        MPI_Isend(&p[1], 1, MPI_DOUBLE, up(), 3, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(&p[n], 1, MPI_DOUBLE, down(), 3, MPI_COMM_WORLD, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        double local[2] = {0, 0}, global[2];
        for (int i = 1; i <= n; i++) {
            q[i] = 4.0 * p[i] - p[i - 1] - p[i + 1];
            local[0] += p[i] * q[i];
        }
        MPI_Allreduce(&local[0], &global[0], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double alpha = global[0] != 0 ? 1e-3 / global[0] : 0;
        for (int i = 1; i <= n; i++) {
            r[i] -= alpha * q[i];
            local[1] += r[i] * r[i];
        }
        MPI_Allreduce(&local[1], &global[1], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        rho = global[1];
        for (int i = 1; i <= n; i++) p[i] = r[i] + 1e-3 * p[i];
    }
    free(p);
    free(q);
    free(r);
    return rho;
}

static double transpose(long iters, int n) {
    int block = share(n) / size;
    if (block < 1) block = 1;
    double *in = malloc(sizeof(double) * block * size), *out = malloc(sizeof(double) * block * size);
    for (int i = 0; i < block * size; i++) in[i] = (i + rank) % 17;
    for (long it = 0; it < iters; it++) {
        /* A few passes over the data, as an FFT's butterflies make. */
        for (int pass = 0; pass < 8; pass++)
            for (int i = 0; i < block * size; i++) in[i] = in[i] * 0.999 + 0.5 * (i & 7);
        MPI_Alltoall(in, block, MPI_DOUBLE, out, block, MPI_DOUBLE, MPI_COMM_WORLD);
        double *t = in;
        in = out;
        out = t;
    }
    double sum = in[0] + in[block * size - 1];
    free(in);
    free(out);
    return sum;
}

static double latency(long iters, int bytes) {
    char *buf = calloc(bytes > 0 ? bytes : 1, 1);
    int peer = rank ^ 1;
    if (peer >= size) return 0; /* an odd rank out waits at the barriers */
    for (long it = 0; it < iters; it++) {
        if (rank % 2 == 0) {
            MPI_Send(buf, bytes, MPI_CHAR, peer, 4, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_CHAR, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_CHAR, peer, 4, MPI_COMM_WORLD);
        }
    }
    double sum = buf[0];
    free(buf);
    return sum;
}

static double allreduce(long iters, int bytes) {
    int n = bytes / (int)sizeof(double);
    if (n < 1) n = 1;
    double *in = calloc(n, sizeof(double)), *out = calloc(n, sizeof(double));
    in[0] = rank;
    for (long it = 0; it < iters; it++)
        MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double sum = out[0];
    free(in);
    free(out);
    return sum;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: %s stencil|cg|transpose|latency|allreduce ITERS N\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const char *kernel = argv[1];
    long iters = atol(argv[2]);
    int n = atoi(argv[3]);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), c0 = cpu_s(), check;
    if (!strcmp(kernel, "stencil")) check = stencil(iters, n);
    else if (!strcmp(kernel, "cg")) check = cg(iters, n);
    else if (!strcmp(kernel, "transpose")) check = transpose(iters, n);
    else if (!strcmp(kernel, "latency")) check = latency(iters, n);
    else if (!strcmp(kernel, "allreduce")) check = allreduce(iters, n);
    else {
        if (rank == 0) fprintf(stderr, "unknown kernel %s\n", kernel);
        MPI_Finalize();
        return 2;
    }
    double secs = MPI_Wtime() - t0, cpu = cpu_s() - c0, slowest;
    MPI_Reduce(&secs, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        double per = slowest / iters * 1e6;
        if (!strcmp(kernel, "latency")) per /= 2;
        printf("secs=%.6f per_iter_us=%.3f cpu_secs=%.6f check=%g\n", slowest, per, cpu, check);
    }
    MPI_Finalize();
    return 0;
}
