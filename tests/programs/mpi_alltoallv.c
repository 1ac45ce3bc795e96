/* Load imbalance behind MPI_Alltoallv. ITERS times: rank 1 runs slow_part(A ms), every
 * other rank runs fast_part(B ms), then all exchange with MPI_Alltoallv (rank i sends
 * i + j + 1 ints to rank j).
 * Known answer (A > B): critical path = ITERS * A, all of it slow_part's; zeroing
 * slow_part gains ITERS * (A - B) (the fast ranks are close behind); every rank's
 * Alltoallv exit is a complete collective. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void slow_part(double ms) { spin_ms(ms); }
__attribute__((noinline)) void fast_part(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 4;
    double a = argc > 2 ? atof(argv[2]) : 60, b = argc > 3 ? atof(argv[3]) : 40;
    int *sc = calloc(size, sizeof(int)), *sd = calloc(size, sizeof(int));
    int *rc = calloc(size, sizeof(int)), *rd = calloc(size, sizeof(int));
    int stot = 0, rtot = 0;
    for (int j = 0; j < size; j++) {
        sc[j] = rank + j + 1; sd[j] = stot; stot += sc[j];
        rc[j] = j + rank + 1; rd[j] = rtot; rtot += rc[j];
    }
    int *sbuf = calloc(stot, sizeof(int)), *rbuf = calloc(rtot, sizeof(int));
    for (int i = 0; i < iters; i++) {
        if (rank == 1) slow_part(a); else fast_part(b);
        MPI_Alltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
