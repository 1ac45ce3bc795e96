/* Joins that do not block.
 *
 * Usage: threads_join MODE A B C   (tests: join 200 100 50, try 200 100 50)
 *
 * Construction: main creates thread `slow` (slow_work(): A ms of thread CPU time) and
 * thread `fast` (fast_work(): B ms, B < A). It then waits for `slow` without ever
 * blocking in a futex:
 *   MODE join: naps (nap_until in spin.h: off CPU, no futex, no dependency) until slow's
 *              last statement has run, naps 20 ms more so that the thread has exited,
 *              and calls pthread_join, which finds it gone and returns at once;
 *   MODE try:  calls pthread_tryjoin_np every millisecond (nanosleep in between) until
 *              it succeeds; a try-join never blocks.
 * Then main runs serial_work() (C ms) and joins `fast`, which exited long before (in
 * MODE try with pthread_tryjoin_np, in MODE join with pthread_join: neither blocks).
 * (The test checks in the recording that no join call waited in a futex.)
 *
 * Known answer (A = 200, B = 100, C = 50 in brackets): the join orders serial_work
 * after slow_work although no thread woke main:
 *   critical path = A + C                                    [250 ms]
 *   slow_work: share A, zeroing gain A + C - max(B, C)       [200 ms, 150 ms]
 *     (without slow_work the path is fast_work, joined after serial_work: max(B, C))
 *   serial_work: share C, zeroing gain C - max(0, B - A)     [50 ms, 50 ms]
 *   fast_work: share 0, zeroing gain 0.
 * Main's own work besides (creating two threads, a few hundred naps or polls) is well
 * under a millisecond. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "spin.h"

static double a_ms = 200, b_ms = 100, c_ms = 50;
static int slow_done;

__attribute__((noinline)) void slow_work(double ms) { spin_ms(ms); }
__attribute__((noinline)) void fast_work(double ms) { spin_ms(ms); }
__attribute__((noinline)) void serial_work(double ms) { spin_ms(ms); }

static void *slow_body(void *arg) {
    (void)arg;
    slow_work(a_ms);
    __atomic_store_n(&slow_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *fast_body(void *arg) {
    (void)arg;
    fast_work(b_ms);
    return NULL;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&ts, NULL);
}

/* Joins `t` without blocking, as MODE says. */
static void join_exited(pthread_t t, int try_mode) {
    if (try_mode) {
        int rc;
        while ((rc = pthread_tryjoin_np(t, NULL)) == EBUSY) nap_ms(1);
        if (rc != 0) exit(1);
        return;
    }
    if (pthread_join(t, NULL) != 0) exit(1);
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "join") != 0 && strcmp(argv[1], "try") != 0)) {
        fprintf(stderr, "usage: threads_join join|try [A B C]\n");
        return 2;
    }
    int try_mode = strcmp(argv[1], "try") == 0;
    if (argc > 2) a_ms = atof(argv[2]);
    if (argc > 3) b_ms = atof(argv[3]);
    if (argc > 4) c_ms = atof(argv[4]);
    pthread_t slow, fast;
    if (pthread_create(&slow, NULL, slow_body, NULL) != 0) return 1;
    if (pthread_create(&fast, NULL, fast_body, NULL) != 0) return 1;
    if (!try_mode) {
        nap_until(&slow_done, 1, 1000);
        nap_ms(20);
    }
    join_exited(slow, try_mode);
    serial_work(c_ms);
    join_exited(fast, try_mode);
    printf("joined\n");
    return 0;
}
