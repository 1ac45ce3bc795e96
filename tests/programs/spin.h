/* Spin for a known amount of this thread's CPU time: the building block of the
 * programs whose critical path is known by construction. */
#include <time.h>

static inline double thread_cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void spin_ms(double ms) {
    double end = thread_cpu_ms() + ms;
    while (thread_cpu_ms() < end) { }
}
