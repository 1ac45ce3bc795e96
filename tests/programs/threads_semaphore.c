/* A semaphore post that a waiter takes without blocking.
 *
 * Usage: threads_semaphore P C   (tests: 100 50)
 *
 * Construction: main sem_inits a semaphore to 0 and creates two threads. The producer
 * runs produce() for P ms of thread CPU time and posts. The consumer naps (nap_until in
 * spin.h: off CPU, no futex, no dependency) until the post is done, naps 5 ms more, and
 * calls sem_wait, which finds the token and returns at once (no futex wait), then runs
 * consume() for C ms. Main joins both.
 *
 * Known answer with --locks (the semaphore calls probed; P = 100, C = 50 in brackets):
 *   critical path = P + C                  [150 ms]
 *   produce: share P, zeroing gain P       [100 ms, 100 ms]
 *   consume: share C, zeroing gain min(C, P + C - P) = C  [50 ms, 50 ms]
 * Without --locks nothing shows that consume() waited for produce(): the path is
 * max(P, C) [100 ms], all of it produce(). */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "spin.h"

static sem_t sem;
static int posted;
static double p_ms = 100, c_ms = 50;

__attribute__((noinline)) void produce(double ms) { spin_ms(ms); }
__attribute__((noinline)) void consume(double ms) { spin_ms(ms); }

static void *producer(void *arg) {
    (void)arg;
    produce(p_ms);
    sem_post(&sem);
    __atomic_store_n(&posted, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    nap_until(&posted, 1, 1000);
    struct timespec nap = {0, 5 * 1000 * 1000};
    nanosleep(&nap, NULL);
    sem_wait(&sem);
    consume(c_ms);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) p_ms = atof(argv[1]);
    if (argc > 2) c_ms = atof(argv[2]);
    if (sem_init(&sem, 0, 0) != 0) return 1;
    pthread_t a, b;
    if (pthread_create(&a, NULL, producer, NULL) != 0) return 1;
    if (pthread_create(&b, NULL, consumer, NULL) != 0) return 1;
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("done\n");
    return 0;
}
