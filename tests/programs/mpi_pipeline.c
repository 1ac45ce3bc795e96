/* A pipeline: ITEMS items flow through the ranks; rank r receives an item from r-1,
 * works on it, and sends it to r+1. The rank given as SLOW runs stage_slow(S ms) per
 * item, the others stage_fast(F ms).
 * Known answer (N ranks, S > F): critical path = (N-1)*F + S + (ITEMS-1)*S, of which
 * stage_slow is ITEMS*S and stage_fast (N-1)*F; zeroing stage_slow leaves
 * (N-1)*F + (ITEMS-1)*F, so it gains ITEMS*S - (ITEMS-1)*F.
 * With a fifth argument GATE (a path), each rank creates GATE.RANK once MPI_Init has
 * returned (so a tracer has probed it) and naps until GATE exists before the first item:
 * a test decides when the messages flow. Naps add no dependency and almost no work (a few
 * microseconds each, 5 a second): the known answer is unchanged.
 * With a sixth argument `barrier`, the ranks meet in MPI_Barrier before MPI_Finalize,
 * and a rank still inside MPI_Finalize 10 s later exits (status 0) by itself: MPICH
 * 4.0.2 over UCX's TCP transport between two hosts can deadlock there, one rank waiting
 * in the launcher's barrier without progressing UCX while the other still closes its
 * endpoints with it. The barrier makes it rarer; a skew of a few milliseconds between
 * the ranks' exits from it still sets it off (without any tracer: 4 jobs in 29 with two
 * busy loops beside them on two CPUs, none in 40 on an idle machine). Neither adds
 * work: the known answer is unchanged. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "spin.h"

static void wait_for_gate(const char *gate, int rank) {
    char mark[4096];
    snprintf(mark, sizeof mark, "%s.%d", gate, rank);
    FILE *f = fopen(mark, "w");
    if (f) fclose(f);
    /* Long naps: each costs some CPU, which would be work before the first item. */
    struct timespec nap = {0, 200 * 1000 * 1000};
    while (access(gate, F_OK) != 0) nanosleep(&nap, NULL);
}

static void finalize_deadlocked(int sig) {
    (void)sig;
    _exit(0);
}

__attribute__((noinline)) void stage_slow(double ms) { spin_ms(ms); }
__attribute__((noinline)) void stage_fast(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int rank, size, item = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int items = argc > 1 ? atoi(argv[1]) : 5, slow = argc > 2 ? atoi(argv[2]) : 1;
    double s = argc > 3 ? atof(argv[3]) : 60, f = argc > 4 ? atof(argv[4]) : 20;
    if (argc > 5) wait_for_gate(argv[5], rank);
    for (int i = 0; i < items; i++) {
        if (rank > 0) MPI_Recv(&item, 1, MPI_INT, rank - 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rank == slow) stage_slow(s); else stage_fast(f);
        if (rank < size - 1) MPI_Send(&item, 1, MPI_INT, rank + 1, i, MPI_COMM_WORLD);
    }
    if (argc > 6 && strcmp(argv[6], "barrier") == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        signal(SIGALRM, finalize_deadlocked);
        alarm(10);
    }
    MPI_Finalize();
    alarm(0);
    if (rank == 0) printf("ok\n");
    return 0;
}
