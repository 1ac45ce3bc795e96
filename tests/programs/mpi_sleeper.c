/* A long-running job to attach to by PID: ranks loop (1 ms compute, a ring exchange, a
 * Bcast of rank 0's stop flag) until SECONDS of wall time have passed on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    int rank, size, stop = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    double start = now_s(CLOCK_MONOTONIC);
    char b = 0;
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    while (!stop) {
        double end = now_s(CLOCK_THREAD_CPUTIME_ID) + 0.001;
        while (now_s(CLOCK_THREAD_CPUTIME_ID) < end) { }
        if (rank == 0) {
            MPI_Send(&b, 1, MPI_BYTE, next, 1, MPI_COMM_WORLD);
            MPI_Recv(&b, 1, MPI_BYTE, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            stop = now_s(CLOCK_MONOTONIC) - start >= seconds;
        } else {
            MPI_Recv(&b, 1, MPI_BYTE, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&b, 1, MPI_BYTE, next, 1, MPI_COMM_WORLD);
        }
        MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
