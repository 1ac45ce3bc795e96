/* Nonblocking pairs: rank i exchanges with i^1 (an odd last rank sits out). Each round:
 * MPI_Irecv, MPI_Isend (8 doubles, tag = round), MPI_Wait(recv), MPI_Wait(send). Then one
 * round completed with MPI_Waitall, and one receive completed by an MPI_Test loop.
 * Known answer per paired rank: ROUNDS+2 Irecv, ROUNDS+2 Isend, 2*ROUNDS+1 Wait, 1 Waitall,
 * >= 1 Test (the loop count varies); every completion names a request an Isend/Irecv returned. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size;
    double out[8] = {0}, in[8];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    int peer = rank ^ 1;
    if (peer < size) {
        MPI_Request rr, sr, reqs[2];
        for (int r = 0; r < rounds; r++) {
            MPI_Irecv(in, 8, MPI_DOUBLE, peer, r, MPI_COMM_WORLD, &rr);
            MPI_Isend(out, 8, MPI_DOUBLE, peer, r, MPI_COMM_WORLD, &sr);
            MPI_Wait(&rr, MPI_STATUS_IGNORE);
            MPI_Wait(&sr, MPI_STATUS_IGNORE);
        }
        MPI_Irecv(in, 8, MPI_DOUBLE, peer, rounds, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(out, 8, MPI_DOUBLE, peer, rounds, MPI_COMM_WORLD, &reqs[1]);
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        int flag = 0;
        MPI_Irecv(in, 8, MPI_DOUBLE, peer, rounds + 1, MPI_COMM_WORLD, &rr);
        MPI_Isend(out, 8, MPI_DOUBLE, peer, rounds + 1, MPI_COMM_WORLD, &sr);
        while (!flag) MPI_Test(&rr, &flag, MPI_STATUS_IGNORE);
        MPI_Wait(&sr, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
