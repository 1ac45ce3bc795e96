/* Ring: ROUNDS rounds over N ranks, BYTES bytes per message (MPI_BYTE), tag = round.
 * Known answer: exactly ROUNDS*N MPI_Send and ROUNDS*N MPI_Recv calls; rank i sends to
 * (i+1)%N and receives from (i-1+N)%N. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    int bytes = argc > 2 ? atoi(argv[2]) : 64;
    char *buf = calloc(bytes > 0 ? bytes : 1, 1);
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    for (int r = 0; r < rounds; r++) {
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_BYTE, next, r, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, prev, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_BYTE, prev, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, next, r, MPI_COMM_WORLD);
        }
    }
    free(buf);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
