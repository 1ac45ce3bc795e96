/* Sampled stacks without frame pointers (docs/sampling.md): built -O2 as users build
 * (no frame pointers on x86-64). The main thread, or with the argument `threads` two
 * threads, run main -> outer -> inner (worker -> outer -> inner), inner spinning on the
 * CPU for SPIN_S seconds: every sample taken in inner must unwind through outer to main
 * (or the thread's start routine). The spin reads the clock through the vDSO (no system
 * call) once per 2^20 steps, so nearly every sample interrupts inner itself. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SPIN_S 0.5

volatile unsigned long sink;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) void inner(double secs) {
    double end = now_s() + secs;
    unsigned long x = sink | 1;
    do {
        for (int i = 0; i < (1 << 20); i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
        sink = x;
    } while (now_s() < end);
}

__attribute__((noinline)) void outer(double secs) {
    inner(secs);
    sink++;
}

__attribute__((noinline)) void *worker(void *arg) {
    (void)arg;
    outer(SPIN_S);
    sink++;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "threads") == 0) {
        pthread_t t[2];
        for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, NULL);
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    } else {
        outer(SPIN_S);
    }
    printf("%lu\n", sink);
    return 0;
}
