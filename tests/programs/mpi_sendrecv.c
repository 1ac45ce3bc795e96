/* Ring shift with MPI_Sendrecv: ROUNDS times every rank r sends 32 bytes to (r+1)%N and
 * receives 32 bytes from (r-1+N)%N, both tag 11. Known answer: exactly ROUNDS Sendrecv
 * calls per rank, each dest (r+1)%N, source (r-1+N)%N, 32 MPI_BYTEs, tags 11/11. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, size;
    char out[32], in[32];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    for (int r = 0; r < rounds; r++) {
        MPI_Status st;
        memset(out, rank + r, sizeof out);
        MPI_Sendrecv(out, 32, MPI_BYTE, next, 11, in, 32, MPI_BYTE, prev, 11, MPI_COMM_WORLD, &st);
        int n;
        MPI_Get_count(&st, MPI_BYTE, &n);
        if (n != 32 || st.MPI_SOURCE != prev || in[0] != (char)(prev + r)) {
            fprintf(stderr, "rank %d: bad message in round %d\n", rank, r);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
