/* Collectives: each round every rank calls Barrier, Bcast, Reduce, Allreduce, Gather,
 * Scatter, Allgather, Alltoall on MPI_COMM_WORLD (root 0). Once at start: Comm_dup and
 * Comm_split (color rank%2, key rank), a Barrier on each, and a ping 0->1 (tag 7) on the
 * duplicate. Known answer: every rank makes each collective call exactly ROUNDS times. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    MPI_Comm dup, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Barrier(dup);
    MPI_Barrier(half);
    int token = 42;
    if (rank == 0) MPI_Send(&token, 1, MPI_INT, 1, 7, dup);
    if (rank == 1) MPI_Recv(&token, 1, MPI_INT, 0, 7, dup, MPI_STATUS_IGNORE);
    int *a = calloc(16 * size, sizeof(int)), *b = calloc(16 * size, sizeof(int));
    for (int r = 0; r < rounds; r++) {
        int x = rank, y = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Bcast(a, 16, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Gather(&x, 1, MPI_INT, a, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Scatter(a, 1, MPI_INT, &y, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Allgather(&x, 1, MPI_INT, a, 1, MPI_INT, MPI_COMM_WORLD);
        MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD);
    }
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    free(a); free(b);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
