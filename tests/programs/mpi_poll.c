/* Busy polling with MPI_Testany and MPI_Iprobe. 2 ranks, ROUNDS times: rank 1 runs
 * produce(W ms) and sends 64 bytes (tag r); rank 0 polls MPI_Testany on the posted
 * MPI_Irecv until it completes. Then rank 1 runs produce(W ms) again and sends (tag 100 +
 * r); rank 0 polls MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG) until a message is there and
 * receives it with MPI_Recv from the source and tag the status names.
 * Known answer: rank 0's polling is waiting: the critical path is 2 * ROUNDS * W, all of
 * it produce's, and 2 * ROUNDS messages are matched. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void produce(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    double w = argc > 2 ? atof(argv[2]) : 30;
    char buf[64] = {0};
    for (int r = 0; r < rounds; r++) {
        if (rank == 1) {
            produce(w);
            MPI_Send(buf, 64, MPI_BYTE, 0, r, MPI_COMM_WORLD);
            produce(w);
            MPI_Send(buf, 64, MPI_BYTE, 0, 100 + r, MPI_COMM_WORLD);
        } else if (rank == 0) {
            MPI_Request req;
            int index = MPI_UNDEFINED, flag = 0;
            MPI_Irecv(buf, 64, MPI_BYTE, 1, r, MPI_COMM_WORLD, &req);
            while (index == MPI_UNDEFINED || !flag)
                MPI_Testany(1, &req, &index, &flag, MPI_STATUS_IGNORE);
            MPI_Status st;
            flag = 0;
            while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
            MPI_Recv(buf, 64, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        }
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
