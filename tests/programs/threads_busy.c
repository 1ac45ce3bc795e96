/* NTHREADS threads each spin MS ms of thread CPU time in work(), then main joins them.
 * Known answer: work is entered exactly NTHREADS times, once per thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

static double ms_arg = 10;

__attribute__((noinline)) void work(double ms) { spin_ms(ms); }

static void *body(void *arg) {
    (void)arg;
    work(ms_arg);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    ms_arg = argc > 2 ? atof(argv[2]) : 10;
    pthread_t t[64];
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, body, NULL);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    printf("ok\n");
    return 0;
}
