/* Two threads whose ids are equal modulo SLOTS, the size of the probes' direct-mapped
 * table of thread states (tracer_common::THREAD_SLOTS_LEN), so the second one's state
 * cannot take the slot the first one holds and goes to the probes' hash map instead.
 * Main starts short-lived threads, one at a time, until one gets such an id; that one
 * spins MS ms of thread CPU time in work(), then main does the same. Prints
 * "collided main=<tid> partner=<tid> threads=<n>", or exits 2 after 100000 threads.
 * Known answer: work() is entered twice, once by each of the two threads, MS ms of CPU
 * each. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "spin.h"

static long slots;
static double ms;
static long main_tid;

__attribute__((noinline)) void work(double m) { spin_ms(m); }

static void *body(void *partner) {
    long me = syscall(SYS_gettid);
    if (me % slots == main_tid % slots) {
        *(long *)partner = me;
        work(ms);
    }
    return NULL;
}

int main(int argc, char **argv) {
    slots = argc > 1 ? atol(argv[1]) : 4096;
    ms = argc > 2 ? atof(argv[2]) : 20;
    main_tid = syscall(SYS_gettid);
    for (int n = 1; n <= 100000; n++) {
        long partner = 0;
        pthread_t t;
        if (pthread_create(&t, NULL, body, &partner) != 0) return 1;
        pthread_join(t, NULL);
        if (partner) {
            work(ms);
            printf("collided main=%ld partner=%ld threads=%d\n", main_tid, partner, n);
            return 0;
        }
    }
    return 2;
}
