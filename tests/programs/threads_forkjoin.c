/* A fork/join pipeline.
 *
 * Usage: threads_forkjoin [S [W [L [F [P]]]]]   (defaults 5 3 40 10 10; tests: 5 3 40 10 10)
 *
 * Construction: S stages. In each stage main creates W workers (pthread_create); workers
 * 0..W-2 run stage_work() for F ms of thread CPU time, worker W-1 runs stage_slow() for
 * L ms; main joins them in creation order (pthread_join), then runs serial_part() for
 * P ms before the next stage.
 *
 * Dependencies: main's clone -> each worker's first event (a worker starts with main's
 * path), each worker's exit -> main's wakeup in pthread_join (main blocks in a futex wait
 * on the worker's tid; the kernel's wake at the worker's exit releases it). A join adds
 * an arc only if main had to wait, so each worker, after its step, naps (nap_until in
 * spin.h: off CPU, no futex) until main is joining it: main waits in every join, and
 * every exit is an arc, whatever the CPU sharing.
 *
 * Expected (work clock; S = 5, W = 3, L = 40, F = 10, P = 10 in brackets):
 *   critical path = S*(L + P)                        [250 ms]
 *     every stage's slowest worker, then the serial part
 *   stage_slow:  share S*L                           [200 ms, 80 %]
 *                zeroing: each stage then waits for the other workers' F: S*(F + P)
 *                [100 ms],
 *                gain S*(L - F)                      [150 ms]  (needs W >= 2)
 *   serial_part: share S*P                           [50 ms, 20 %]
 *                zeroing: S*L [200 ms], gain S*P     [50 ms]
 *   stage_work:  share 0 [0 ms], zeroing gain 0
 * --locks changes nothing (no pthread mutex; thread creation and join are futex and
 * clone/exit arcs). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

static double l_ms = 40, f_ms = 10, p_ms = 10;
static int nworkers = 3;
static int joining; /* 1 + the worker main is joining */

__attribute__((noinline)) void stage_work(double ms) { spin_ms(ms); }
__attribute__((noinline)) void stage_slow(double ms) { spin_ms(ms); }
__attribute__((noinline)) void serial_part(double ms) { spin_ms(ms); }

static void *worker(void *arg) {
    int i = (int)(long)arg;
    if (i == nworkers - 1) stage_slow(l_ms); else stage_work(f_ms);
    nap_until(&joining, i + 1, 100);
    return NULL;
}

int main(int argc, char **argv) {
    int stages = argc > 1 ? atoi(argv[1]) : 5;
    nworkers = argc > 2 ? atoi(argv[2]) : 3;
    l_ms = argc > 3 ? atof(argv[3]) : 40;
    f_ms = argc > 4 ? atof(argv[4]) : 10;
    p_ms = argc > 5 ? atof(argv[5]) : 10;
    if (nworkers < 1) nworkers = 1;
    if (nworkers > 64) nworkers = 64;
    pthread_t t[64];
    for (int s = 0; s < stages; s++) {
        __atomic_store_n(&joining, 0, __ATOMIC_SEQ_CST);
        for (int i = 0; i < nworkers; i++) {
            pthread_create(&t[i], NULL, worker, (void *)(long)i);
        }
        for (int i = 0; i < nworkers; i++) {
            __atomic_store_n(&joining, i + 1, __ATOMIC_SEQ_CST);
            pthread_join(t[i], NULL);
        }
        serial_part(p_ms);
    }
    printf("ok\n");
    return 0;
}
