/* A mutex-protected sequential section.
 *
 * Usage: threads_mutex [T [K [A [B [SEQ]]]]]   (defaults 4 4 10 20 0;
 *        tests: 4 4 10 20 0 (contended), 2 5 10 15 1 (uncontended hand-offs))
 *
 * Construction: main creates T threads and joins them. Each thread K times runs
 * parallel_part() for A ms of thread CPU time outside the lock, takes one
 * pthread_mutex_t (default type: no spinning), runs critical_section() for B ms, and
 * unlocks. With SEQ = 1, thread i first naps (nap_until in spin.h, 2 ms naps: off CPU,
 * no futex, so no dependency and well under 1 ms of work) until threads 0..i-1 are done.
 * The program records the order of the acquisitions and warns on stderr if it is not
 * the one the construction below assumes.
 *
 * SEQ = 0, contended (needs A < B, so A <= (T-1)*B): the lock is always busy. A thread
 * that unlocks runs parallel_part() (A < B) and is back waiting before the next holder
 * is done, so every acquisition but the very first one blocks in a futex wait and is
 * released by the previous holder's unlock (a contended unlock: futex wake). The kernel
 * wakes waiters first-in first-out, so the order is round-robin and each thread's next
 * critical section is T-1 sections after its last one: (T-1)*B >= A, so the chain
 * through the lock is longer than a thread's own parallel_part() in between. To keep
 * this schedule when CPU sharing is uneven (other load on the machine), a holder, after
 * critical_section() and before unlocking, naps (100 us naps) until every other thread
 * that still has a critical section to run is waiting for the lock (or about to);
 * without such load it never has to.
 * Expected (T = 4, K = 4, A = 10, B = 20 in brackets), with or without --locks (the lock
 * arcs are the same hand-offs as the futex wakes; only the first acquisition is
 * uncontended and it has no predecessor):
 *   critical path = A + T*K*B                                [330 ms]
 *     the first parallel_part(), then every critical section, one after the other
 *   critical_section: share T*K*B                            [320 ms, 96.97 %]
 *     zeroing: the longest chain of parallel parts, K*A [40 ms]: gain A + T*K*B - K*A
 *                                                            [290 ms]
 *   parallel_part: share A (only the first)                  [10 ms, 3.03 %]
 *     zeroing: T*K*B [320 ms]: gain A                        [10 ms]
 *
 * SEQ = 1, uncontended: thread i starts after thread i-1 has finished, so every
 * acquisition finds the lock free and no unlock wakes anyone: the hand-offs (thread
 * i-1's last unlock -> thread i's first lock) are uncontended and only --locks sees them.
 * Expected (T = 2, K = 5, A = 10, B = 15, SEQ = 1 in brackets):
 *   with --locks: each thread's first critical section follows the previous thread's
 *   last one, so its first parallel_part() is off the path:
 *     critical path = T*K*(A+B) - (T-1)*A                    [240 ms]
 *     critical_section: share T*K*B [150 ms, 62.5 %], zeroing gain T*K*B [150 ms]
 *     parallel_part: share T*K*A - (T-1)*A [90 ms, 37.5 %], zeroing gain the same [90 ms]
 *   without --locks: no arc between the threads (creation arcs carry ~0), the path is one
 *   thread's own chain:
 *     critical path = K*(A+B)                                [125 ms]
 *     critical_section: share K*B [75 ms, 60 %], zeroing gain K*B [75 ms]
 *     parallel_part: share K*A [50 ms, 40 %], zeroing gain K*A [50 ms] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int nthreads = 4, iters = 4;
static double a_ms = 10, b_ms = 20;
static int seq, finished; /* threads done (SEQ = 1) */
static int wanting;        /* threads waiting for m, or about to */
static int needing;        /* threads with a critical section still to start (under m) */
static int *order, norder; /* owner of each acquisition, in order (written under m) */

__attribute__((noinline)) void parallel_part(double ms) { spin_ms(ms); }
__attribute__((noinline)) void critical_section(double ms) { spin_ms(ms); }

static void *body(void *arg) {
    int me = (int)(long)arg;
    if (seq) nap_until(&finished, me, 2000);
    for (int k = 0; k < iters; k++) {
        parallel_part(a_ms);
        __atomic_add_fetch(&wanting, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_lock(&m);
        __atomic_sub_fetch(&wanting, 1, __ATOMIC_SEQ_CST);
        if (k == iters - 1) needing--;
        order[norder++] = me;
        critical_section(b_ms);
        if (!seq) nap_until(&wanting, needing - (k < iters - 1), 100);
        pthread_mutex_unlock(&m);
    }
    if (seq) __atomic_add_fetch(&finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(int argc, char **argv) {
    nthreads = argc > 1 ? atoi(argv[1]) : 4;
    iters = argc > 2 ? atoi(argv[2]) : 4;
    a_ms = argc > 3 ? atof(argv[3]) : 10;
    b_ms = argc > 4 ? atof(argv[4]) : 20;
    seq = argc > 5 ? atoi(argv[5]) : 0;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 64) nthreads = 64;
    needing = nthreads;
    order = calloc((size_t)nthreads * iters, sizeof *order);
    pthread_t t[64];
    for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, body, (void *)(long)i);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    /* The order the construction assumes: round-robin when contended, one thread after
     * the other when staggered. */
    int bad = 0, n = nthreads * iters;
    for (int j = 0; j < n; j++) {
        if (seq) bad += order[j] != j / iters;
        else bad += j >= nthreads && order[j] != order[j - nthreads];
    }
    if (bad)
        fprintf(stderr, "threads_mutex: warning: %d of %d acquisitions out of the %s order\n", bad, n,
                seq ? "sequential" : "round-robin");
    free(order);
    printf("ok\n");
    return 0;
}
