/* Wildcard receives: every rank i>0 sends ROUNDS messages of 4 ints to rank 0 with tag
 * 100+i; rank 0 receives ROUNDS*(N-1) of them with MPI_ANY_SOURCE/MPI_ANY_TAG.
 * Known answer: rank 0's receives report source i exactly ROUNDS times, each with tag 100+i. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, data[4] = {1, 2, 3, 4};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    if (rank == 0) {
        for (int i = 0; i < rounds * (size - 1); i++) {
            MPI_Status st;
            MPI_Recv(data, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            if (st.MPI_TAG != 100 + st.MPI_SOURCE) { fprintf(stderr, "bad status\n"); return 1; }
        }
    } else {
        for (int r = 0; r < rounds; r++) MPI_Send(data, 4, MPI_INT, 0, 100 + rank, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
