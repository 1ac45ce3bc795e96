/* Manager/worker with wildcard receives. ROUNDS times the manager (rank 0) sends one
 * task to every worker and collects the results with MPI_ANY_SOURCE; worker w runs
 * task(T ms), except the last worker, which runs slow_task(2*T ms).
 * Known answer: critical path = ROUNDS*2*T, all in slow_task; task is on the path 0 ms
 * although it has (N-2)*ROUNDS*T ms of CPU; zeroing slow_task gains ROUNDS*T (the
 * other workers then define the path). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void task(double ms) { spin_ms(ms); }
__attribute__((noinline)) void slow_task(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int rank, size, v = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    double t = argc > 2 ? atof(argv[2]) : 30;
    for (int r = 0; r < rounds; r++) {
        if (rank == 0) {
            for (int w = 1; w < size; w++) MPI_Send(&v, 1, MPI_INT, w, 1, MPI_COMM_WORLD);
            for (int w = 1; w < size; w++) {
                MPI_Status st;
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &st);
            }
        } else {
            MPI_Recv(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (rank == size - 1) slow_task(2 * t); else task(t);
            MPI_Send(&v, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
        }
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
