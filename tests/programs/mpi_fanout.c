/* Fan-out/fan-in through rooted collectives. ITERS times: rank 0 runs prepare(P ms) and
 * broadcasts; every other rank runs work(W ms), the last one work_slow(S ms) instead;
 * then MPI_Reduce to rank 0.
 * Known answer (S > W): critical path = ITERS*(P+S); prepare's share ITERS*P, work_slow's
 * ITERS*S, work's 0; zeroing work_slow gains ITERS*(S-W); zeroing prepare gains ITERS*P
 * (everything waits for it). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void prepare(double ms) { spin_ms(ms); }
__attribute__((noinline)) void work(double ms) { spin_ms(ms); }
__attribute__((noinline)) void work_slow(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int rank, size, data[4] = {0}, x = 1, y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 4;
    double p = argc > 2 ? atof(argv[2]) : 20, w = argc > 3 ? atof(argv[3]) : 30,
           s = argc > 4 ? atof(argv[4]) : 50;
    for (int i = 0; i < iters; i++) {
        if (rank == 0) prepare(p);
        MPI_Bcast(data, 4, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == size - 1) work_slow(s); else if (rank > 0) work(w);
        MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
