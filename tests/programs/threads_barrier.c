/* A barrier with imbalanced threads.
 *
 * Usage: threads_barrier [T [R [S [F [ROTATE]]]]]   (defaults 4 8 30 10 1;
 *        tests: 4 8 30 10 1, and 4 8 30 10 0 for the fixed slow thread)
 *
 * Construction: main creates T threads and joins them. Each thread runs R rounds; in
 * round r one thread, the slow one, runs slow_step() for S ms of thread CPU time and the
 * others run fast_step() for F ms; then all wait in one pthread_barrier_wait. The slow
 * thread of round r is r % T with ROTATE=1, thread 0 in every round with ROTATE=0.
 *
 * With S > F the slow thread arrives last at every barrier; to keep this true when CPU
 * sharing is uneven (other load on the machine), the slow thread, after slow_step(),
 * naps (nap_until in spin.h: off CPU, no futex) until the T-1 others have arrived;
 * without such load it never has to. glibc's barrier does not spin: the others block in
 * a futex wait, and the last arrival's futex wake releases them all, so every round's
 * dependency is slow thread -> every other thread (the program warns on stderr if the
 * slow thread was not the last arrival of a round).
 *
 * Expected (work clock; T = 4, R = 8, S = 30, F = 10 in brackets):
 *   critical path = R*S                                      [240 ms]
 *     round after round through the slow thread (with ROTATE=1 the path moves to the next
 *     thread at each barrier: only the wake arcs make it R*S; without them the longest
 *     thread chain would be ceil(R/T)*S + (R - ceil(R/T))*F [120 ms])
 *   slow_step: share R*S                                     [240 ms, 100 %]
 *   fast_step: share 0 (always waiting for the slow thread)  [0 ms]; zeroing gain 0
 *   slow_step zeroing: with slow_step at 0 each round takes F. Without --locks the
 *     recorded graph only has the arcs of the futex wakes (last arrival -> the others;
 *     the early arrivals have no arc to the last one), so:
 *     ROTATE=0: the fast threads' own chains, R*F        [80 ms], gain R*(S-F)  [160 ms]
 *     ROTATE=1: F*(R - floor(R/T))                       [60 ms], gain R*S - that [180 ms]
 *       (the thread that was slow in round r keeps its lower value through round r+1,
 *       so one F is lost per T rounds)
 *   With --locks, if pthread_barrier_wait is taken as a collective (every thread's exit
 *   depends on every thread's entry), zeroing gives R*F [80 ms], gain R*(S-F) [160 ms],
 *   for both ROTATE values; the length and the shares do not change. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

static pthread_barrier_t bar;
static int nthreads = 4, rounds = 8, rotate = 1;
static double s_ms = 30, f_ms = 10;
static int arrivals, not_last;

__attribute__((noinline)) void slow_step(double ms) { spin_ms(ms); }
__attribute__((noinline)) void fast_step(double ms) { spin_ms(ms); }

static void *body(void *arg) {
    int me = (int)(long)arg;
    for (int r = 0; r < rounds; r++) {
        int slow = rotate ? r % nthreads : 0;
        if (me == slow) slow_step(s_ms); else fast_step(f_ms);
        if (me == slow) nap_until(&arrivals, r * nthreads + nthreads - 1, 100);
        int n = __atomic_add_fetch(&arrivals, 1, __ATOMIC_SEQ_CST);
        if (me == slow && n != (r + 1) * nthreads) __atomic_add_fetch(&not_last, 1, __ATOMIC_SEQ_CST);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

int main(int argc, char **argv) {
    nthreads = argc > 1 ? atoi(argv[1]) : 4;
    rounds = argc > 2 ? atoi(argv[2]) : 8;
    s_ms = argc > 3 ? atof(argv[3]) : 30;
    f_ms = argc > 4 ? atof(argv[4]) : 10;
    rotate = argc > 5 ? atoi(argv[5]) : 1;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 64) nthreads = 64;
    pthread_t t[64];
    pthread_barrier_init(&bar, NULL, nthreads);
    for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, body, (void *)(long)i);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    if (not_last)
        fprintf(stderr, "threads_barrier: warning: the slow thread was not the last arrival in %d of %d rounds\n",
                not_last, rounds);
    printf("ok\n");
    return 0;
}
