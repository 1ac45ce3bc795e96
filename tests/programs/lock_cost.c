/* lock_cost N [SECS]: N uncontended pthread_mutex_lock/unlock pairs in one thread, timed
 * with CLOCK_MONOTONIC around the loop only (start-up and the tracer's attach time
 * excluded). Prints "lock_cost: N pairs, X ns per pair", then sleeps SECS seconds (default
 * 0; keeps a traced process, and its probes, alive while other processes are measured).
 * Used for the cost of `tracer record --locks` (docs/benchmarks.md).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    if (n <= 0) {
        fprintf(stderr, "usage: %s N [SECS] (N > 0)\n", argv[0]);
        return 2;
    }
    double start = now_ns();
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    double elapsed = now_ns() - start;
    printf("lock_cost: %ld pairs, %.1f ns per pair\n", n, elapsed / n);
    fflush(stdout);
    if (argc > 2)
        sleep(atoi(argv[2]));
    return 0;
}
