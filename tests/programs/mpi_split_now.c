/* Communicators used the moment they exist. MPI_Comm_split(WORLD, 0, size - rank)
 * reverses the ranks (new rank = size - 1 - world rank) and MPI_Comm_split(WORLD,
 * rank % 2, size - rank) makes two halves, each reversed; no barrier or sleep follows.
 * Then ROUNDS times: a ring on the reversed communicator (new rank r sends to r + 1,
 * tag = round), an exchange with the other member of each half (tag 5), an Allreduce on
 * both and a Bcast from new rank 0 on the reversed one.
 * Known answer (4 ranks): world rank w sends ROUNDS messages to w - 1 (mod 4) and ROUNDS
 * to w + 2 (mod 4), 32 bytes each; nothing else is sent point to point. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    MPI_Comm rev, half;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
    int r, n, h, hn;
    MPI_Comm_rank(rev, &r);
    MPI_Comm_size(rev, &n);
    MPI_Comm_rank(half, &h);
    MPI_Comm_size(half, &hn);
    if (r != size - 1 - rank || hn != 2) MPI_Abort(MPI_COMM_WORLD, 1);
    int out[8] = {0}, in[8];
    for (int i = 0; i < rounds; i++) {
        MPI_Sendrecv(out, 8, MPI_INT, (r + 1) % n, i, in, 8, MPI_INT, (r + n - 1) % n, i, rev,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(out, 8, MPI_INT, 1 - h, 5, in, 8, MPI_INT, 1 - h, 5, half,
                     MPI_STATUS_IGNORE);
        int x = rank, y;
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, rev);
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, half);
        MPI_Bcast(in, 8, MPI_INT, 0, rev);
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
