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

/* Sleep, in naps of NAP_US microseconds, until *flag >= want. A napping thread is off CPU
 * and outside any futex or MPI call: no dependency, and no work but the few microseconds
 * of CPU each nap costs. The programs use it to force an order their construction needs,
 * whatever the CPU sharing, without changing the answer. */
static inline void nap_until(const int *flag, int want, long nap_us) {
    struct timespec ts = {nap_us / 1000000, nap_us % 1000000 * 1000};
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < want) nanosleep(&ts, NULL);
}

/* Runs `call` and adds the CPU time this thread spent in it to `total_ms` (a double): how
 * a program counts its CPU inside MPI calls, outside which the tracer counts work. */
#define ADD_CPU_OF(total_ms, call)                  \
    do {                                            \
        double add_cpu_before_ = thread_cpu_ms();   \
        call;                                       \
        (total_ms) += thread_cpu_ms() - add_cpu_before_; \
    } while (0)
