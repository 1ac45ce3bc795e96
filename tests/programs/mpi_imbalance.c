/* Load imbalance behind a collective. ITERS times: rank 0 runs heavy(A ms), every other
 * rank runs light(B ms), then all meet in MPI_Allreduce.
 * Known answer (A > B): critical path = ITERS*A; heavy's share ITERS*A; light's share 0
 * although its CPU time (N-1)*ITERS*B can be larger; zeroing heavy gains only
 * ITERS*(A-B) because the light ranks are close behind; zeroing light gains 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void heavy(double ms) { spin_ms(ms); }
__attribute__((noinline)) void light(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int rank, x = 1, y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = argc > 1 ? atoi(argv[1]) : 4;
    double a = argc > 2 ? atof(argv[2]) : 60, b = argc > 3 ? atof(argv[3]) : 50;
    for (int i = 0; i < iters; i++) {
        if (rank == 0) heavy(a); else light(b);
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
