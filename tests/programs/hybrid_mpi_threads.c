/* A hybrid MPI + threads program.
 *
 * Usage: mpirun -np NP hybrid_mpi_threads.{openmpi,mpich} [T [R [L [W [SLOW [LINES]]]]]]
 *        (defaults 2 5 40 10 -1 0; tests: -np 2 and 2 5 40 10 -1)
 *
 * With LINES > 0 every rank's main thread prints LINES lines on standard output after
 * each round's Allreduce ("rank N round R line K of LINES"), flushed: a command that
 * prints, for `tracer top`'s test (it adds a little main-thread work, outside the
 * procedures the figures below are about).
 *
 * Construction: MPI_Init_thread(MPI_THREAD_FUNNELED): only each rank's main thread calls
 * MPI. R rounds; in each round every rank's main thread creates T pthreads and joins them
 * in creation order, then all ranks call MPI_Allreduce. Threads 0..T-2 run thread_work()
 * for W ms of thread CPU time; thread T-1 runs thread_work() too, except on the slow rank
 * of the round, where it runs thread_slow() for L ms. The slow rank of round r is
 * r % NP with SLOW = -1 (it moves from rank to rank), rank SLOW otherwise.
 *
 * Dependencies: main's clone -> each thread; each thread's exit -> main's wakeup in
 * pthread_join, an arc only if main had to wait: so each thread, after its work, naps
 * (nap_until in spin.h: off CPU, no futex) until main is joining it, and main waits in
 * every join whatever the CPU sharing; MPI_Allreduce: every rank's exit depends on every
 * rank's entry. MPI calls are not work (Open MPI and MPICH poll inside them). The
 * program warns on stderr if the MPI does not provide MPI_THREAD_FUNNELED.
 *
 * Expected (work clock; NP = 2, T = 2, R = 5, L = 40, W = 10 in brackets):
 *   critical path = R*L                               [200 ms]
 *     each round's slow thread, its rank's join, the Allreduce to every rank
 *     (with SLOW = -1 only the collective arcs make it R*L: without them a rank's own
 *     chain is ceil(R/NP)*L + (R - ceil(R/NP))*W [140 ms])
 *   thread_slow: share R*L                            [200 ms, 100 %]
 *     zeroing: every round then waits for a thread_work() (thread 0 of the slow rank,
 *     or any thread of another rank): R*W [50 ms], gain R*(L - W) [150 ms]
 *     (needs T >= 2 or NP >= 2)
 *   thread_work: share 0 [0 ms], zeroing gain 0
 * --locks should change nothing: the program takes no pthread lock itself; locks the
 * MPI libraries take in their helper threads carry those threads' short paths. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

static double l_ms = 40, w_ms = 10;
static int joining; /* 1 + the thread main is joining */

__attribute__((noinline)) void thread_work(double ms) { spin_ms(ms); }
__attribute__((noinline)) void thread_slow(double ms) { spin_ms(ms); }

struct job { int index; int slow; };

static void *body(void *arg) {
    struct job *j = arg;
    if (j->slow) thread_slow(l_ms); else thread_work(w_ms);
    nap_until(&joining, j->index + 1, 100);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int nthreads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 5;
    l_ms = argc > 3 ? atof(argv[3]) : 40;
    w_ms = argc > 4 ? atof(argv[4]) : 10;
    int slow_arg = argc > 5 ? atoi(argv[5]) : -1;
    int lines = argc > 6 ? atoi(argv[6]) : 0;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 64) nthreads = 64;
    if (provided < MPI_THREAD_FUNNELED)
        fprintf(stderr, "hybrid_mpi_threads: warning: rank %d: MPI provides thread level %d < FUNNELED\n",
                rank, provided);
    pthread_t t[64];
    struct job jobs[64];
    int in = 1, out = 0;
    for (int r = 0; r < rounds; r++) {
        int slow_rank = slow_arg < 0 ? r % size : slow_arg;
        __atomic_store_n(&joining, 0, __ATOMIC_SEQ_CST);
        for (int i = 0; i < nthreads; i++) {
            jobs[i].index = i;
            jobs[i].slow = rank == slow_rank && i == nthreads - 1;
            pthread_create(&t[i], NULL, body, &jobs[i]);
        }
        for (int i = 0; i < nthreads; i++) {
            __atomic_store_n(&joining, i + 1, __ATOMIC_SEQ_CST);
            pthread_join(t[i], NULL);
        }
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (out != size) fprintf(stderr, "hybrid_mpi_threads: rank %d: allreduce gave %d\n", rank, out);
        for (int k = 1; k <= lines; k++) printf("rank %d round %d line %d of %d\n", rank, r, k, lines);
        if (lines > 0) fflush(stdout);
    }
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
