/* Compute and exchange between two ranks: ROUNDS times, rank 0 works A ms and sends
 * BYTES to rank 1; rank 1 receives, works B ms and sends BYTES back; rank 0 receives.
 * Known answer: the parallel section takes ROUNDS * (A + B + 2 * L), where L is the
 * one-way latency of a BYTES message: the network's share grows with BYTES. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void work_a(double ms) { spin_ms(ms); }
__attribute__((noinline)) void work_b(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 10, bytes = argc > 2 ? atoi(argv[2]) : 65536;
    double a = argc > 3 ? atof(argv[3]) : 20, b = argc > 4 ? atof(argv[4]) : 20;
    char *buf = calloc(bytes > 0 ? bytes : 1, 1);
    for (int i = 0; i < rounds; i++) {
        if (rank == 0) {
            work_a(a);
            MPI_Send(buf, bytes, MPI_BYTE, 1, i, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            work_b(b);
            MPI_Send(buf, bytes, MPI_BYTE, 0, i, MPI_COMM_WORLD);
        }
    }
    free(buf);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
