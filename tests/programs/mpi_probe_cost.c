/* Per-call cost of MPI calls, for `cargo xtask bench`: one rank times N calls of
 * MPI_Comm_rank (nearly free untraced, so traced it shows the probe cost) and N
 * MPI_Send+MPI_Recv pairs to itself (a buffered 8-byte message), and prints ns per call:
 *   comm_rank_ns=<x> send_recv_ns=<y>   */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    int rank, n = argc > 1 ? atoi(argv[1]) : 100000;
    char sbuf[8] = {0}, rbuf[8];
    MPI_Init(&argc, &argv);
    double t0 = now_ns();
    for (int i = 0; i < n; i++) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double t1 = now_ns();
    for (int i = 0; i < n; i++) {
        MPI_Request r;
        MPI_Isend(sbuf, 8, MPI_BYTE, rank, 1, MPI_COMM_WORLD, &r);
        MPI_Recv(rbuf, 8, MPI_BYTE, rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    double t2 = now_ns();
    printf("comm_rank_ns=%.1f isend_recv_wait_ns=%.1f\n", (t1 - t0) / n, (t2 - t1) / n);
    MPI_Finalize();
    return 0;
}
