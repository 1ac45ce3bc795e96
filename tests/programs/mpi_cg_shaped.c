/* An MPI program shaped like NAS CG (NPB 3.x, cg.f) with 4 ranks, for what-if tests on a
 * real code's communication pattern (NPB itself is not on the test machines).
 *
 *   mpi_cg_shaped [OUTER [INNER [ROWS [NZ]]]]      defaults 15 25 3500 36
 *
 * Construction, after NPB CG class W on 4 processes (NA = 7000, NONZER = 8, NITER = 15,
 * 25 CG iterations each; the processes form a 2 x 2 grid and each holds a 3500 x 3500
 * block of the sparse matrix, about 127,000 nonzeros):
 * - every rank holds a ROWS x ROWS sparse block with NZ nonzeros per row at
 *   pseudo-random columns (compressed rows: values and column indices, 12 bytes a
 *   nonzero, 1.5 MB a rank with the defaults), built before the timed section;
 * - OUTER times (NPB's NITER), INNER CG iterations (NPB's cgitmax), each:
 *   1. q = A.p over the block: real memory-bound work (a stream through the matrix,
 *      gathers from p), as NPB's sparse matrix-vector product;
 *   2. the row reduction: the partial q is summed with the rank's row partner
 *      (rank ^ 1) by MPI_Sendrecv of half the block's rows (ROWS / 2 doubles, 14 KB),
 *      as NPB's reduce_exch_proc exchange;
 *   3. the transpose exchange: the rank's transpose partner on the 2 x 2 grid (rank
 *      row * 2 + col gets col * 2 + row: 1 <-> 2, and 0 and 3 are their own partners,
 *      which NPB's exchange sends to all the same) gets ROWS / 2 doubles by MPI_Irecv +
 *      MPI_Isend + MPI_Waitall;
 *   4. two dot products (p.q and r.r), each a local sum then MPI_Allreduce of one
 *      double (NPB reduces these within the process row by messages; the allreduce
 *      is the same dependency over all ranks);
 *   5. the vector updates (z, r, p: a few streams over ROWS doubles);
 * - after each OUTER step, the residual norm: one more product and an allreduce.
 * Which rank depends on which is fixed by construction; how long the compute takes is
 * not (it is real work, slower when caches and memory are shared), which is the point:
 * a what-if model must reproduce it from what the recording shows.
 * Prints "ok" and the final norm (the same for a given size on any placement). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned long long rng_state = 314159265;
static unsigned rnd(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng_state >> 33);
}

/* q = A.p over the rank's block: the memory-bound phase. */
__attribute__((noinline)) void spmv(int rows, int nz, const int *col, const double *val,
                                    const double *p, double *q) {
    for (int i = 0; i < rows; i++) {
        double s = 0;
        for (int k = i * nz; k < (i + 1) * nz; k++) s += val[k] * p[col[k]];
        q[i] = s;
    }
}

__attribute__((noinline)) double dot(int n, const double *a, const double *b) {
    double s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

__attribute__((noinline)) void update(int n, double alpha, double beta, double *z,
                                      double *r, double *p, const double *q) {
    for (int i = 0; i < n; i++) {
        z[i] += alpha * p[i];
        r[i] -= alpha * q[i];
        p[i] = r[i] + beta * p[i];
    }
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int outer = argc > 1 ? atoi(argv[1]) : 15, inner = argc > 2 ? atoi(argv[2]) : 25;
    int rows = argc > 3 ? atoi(argv[3]) : 3500, nz = argc > 4 ? atoi(argv[4]) : 36;
    int half = rows / 2;
    /* Partners on the 2 x 2 grid; with another rank count, the nearest that exists. */
    int row_partner = (rank ^ 1) < size ? rank ^ 1 : rank;
    int transpose = (rank % 2) * 2 + rank / 2 < size ? (rank % 2) * 2 + rank / 2 : rank;

    int *col = malloc(sizeof(int) * rows * nz);
    double *val = malloc(sizeof(double) * rows * nz);
    double *p = malloc(sizeof(double) * rows), *q = malloc(sizeof(double) * rows);
    double *r = malloc(sizeof(double) * rows), *z = malloc(sizeof(double) * rows);
    double *in = malloc(sizeof(double) * half), *tr = malloc(sizeof(double) * half);
    rng_state += rank;
    for (int k = 0; k < rows * nz; k++) {
        col[k] = rnd() % rows;
        val[k] = (rnd() % 1000) / 1000.0 / nz;
    }
    for (int i = 0; i < rows; i++) p[i] = r[i] = 1.0, z[i] = 0;

    double norm = 0;
    for (int it = 0; it < outer; it++) {
        for (int cg = 0; cg < inner; cg++) {
            spmv(rows, nz, col, val, p, q);
            /* Row reduction: the partner's half of the rows it summed. */
            MPI_Sendrecv(q + (rank & 1 ? 0 : half), half, MPI_DOUBLE, row_partner, 1, in,
                         half, MPI_DOUBLE, row_partner, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            double *mine = q + (rank & 1 ? half : 0);
            for (int i = 0; i < half; i++) mine[i] += in[i];
            /* Transpose exchange. */
            MPI_Request req[2];
            MPI_Irecv(tr, half, MPI_DOUBLE, transpose, 2, MPI_COMM_WORLD, &req[0]);
            MPI_Isend(mine, half, MPI_DOUBLE, transpose, 2, MPI_COMM_WORLD, &req[1]);
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
            for (int i = 0; i < half; i++) q[i] = q[half + i] = tr[i];
            double d = dot(rows, p, q), rho = 0, rho_new = 0, sum;
            MPI_Allreduce(&d, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            rho = dot(rows, r, r);
            double alpha = sum != 0 ? 0.5 * rho / (sum + rho) : 0;
            update(rows, alpha, 0, z, r, p, q);
            d = dot(rows, r, r);
            MPI_Allreduce(&d, &rho_new, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            double beta = rho_new / (rho_new + rho + 1e-30);
            update(rows, 0, beta, z, r, p, q);
        }
        /* Residual norm of the outer step. */
        spmv(rows, nz, col, val, z, q);
        double d = dot(rows, q, q);
        MPI_Allreduce(&d, &norm, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < rows; i++) p[i] = r[i] = 1.0 / (1.0 + norm), z[i] = 0;
    }
    free(col), free(val), free(p), free(q), free(r), free(z), free(in), free(tr);
    MPI_Finalize();
    if (rank == 0) printf("ok %.6e\n", norm);
    return 0;
}
