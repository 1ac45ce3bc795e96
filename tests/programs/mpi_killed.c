/* A rank killed mid-run: ROUNDS rounds of a ring (64 bytes, tag = round), then rank
 * (VICTIM-1) sends one message (tag 98) to VICTIM, VICTIM sends 3 messages (tag 99) to
 * rank 0, and every rank but VICTIM enters an MPI_Barrier; VICTIM naps 1 s (the others
 * are in the barrier by then) and SIGKILLs itself. Nobody receives the tag 98 and 99
 * messages (they are small enough to be sent eagerly: the sends return). The launcher
 * then ends the other ranks.
 * Known answer (N ranks, 1 <= VICTIM < N): ROUNDS*N messages matched; VICTIM dies of
 * signal 9 with 3 of its sends and 1 send to it never received, and the barrier it never
 * entered incomplete. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    int victim = argc > 2 ? atoi(argv[2]) : 1;
    char buf[64] = {0};
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    for (int r = 0; r < rounds; r++) {
        if (rank == 0) {
            MPI_Send(buf, 64, MPI_BYTE, next, r, MPI_COMM_WORLD);
            MPI_Recv(buf, 64, MPI_BYTE, prev, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 64, MPI_BYTE, prev, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 64, MPI_BYTE, next, r, MPI_COMM_WORLD);
        }
    }
    if (rank == victim - 1) MPI_Send(buf, 16, MPI_BYTE, victim, 98, MPI_COMM_WORLD);
    if (rank == victim) {
        for (int i = 0; i < 3; i++) MPI_Send(buf, 16, MPI_BYTE, 0, 99, MPI_COMM_WORLD);
        struct timespec nap = {1, 0};
        nanosleep(&nap, NULL);
        kill(getpid(), SIGKILL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* Never reached while VICTIM is dead. */
    if (rank == 0)
        for (int i = 0; i < 3; i++)
            MPI_Recv(buf, 16, MPI_BYTE, victim, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == victim) MPI_Recv(buf, 16, MPI_BYTE, victim - 1, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
