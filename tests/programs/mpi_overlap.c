/* Nonblocking overlap between two ranks. ROUNDS times: rank 0 posts MPI_Irecv, runs
 * overlap(A ms) while the message is on its way, then MPI_Wait; rank 1 runs produce(B
 * ms) and sends. Then rank 0 sends a 1-int ack back (MPI_Isend + MPI_Wait), which rank 1
 * waits for, so every round starts together.
 * Known answer (B > A): critical path = ROUNDS*B, all produce; overlap is off the path
 * (its work is hidden behind the wait); zeroing overlap gains 0, zeroing produce gains
 * ROUNDS*(B-A). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void overlap(double ms) { spin_ms(ms); }
__attribute__((noinline)) void produce(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int rank, v = 0, ack = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    double a = argc > 2 ? atof(argv[2]) : 30, b = argc > 3 ? atof(argv[3]) : 50;
    for (int r = 0; r < rounds; r++) {
        MPI_Request req;
        if (rank == 0) {
            MPI_Irecv(&v, 1, MPI_INT, 1, r, MPI_COMM_WORLD, &req);
            overlap(a);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            MPI_Isend(&ack, 1, MPI_INT, 1, 1000 + r, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            produce(b);
            MPI_Send(&v, 1, MPI_INT, 0, r, MPI_COMM_WORLD);
            MPI_Recv(&ack, 1, MPI_INT, 0, 1000 + r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
