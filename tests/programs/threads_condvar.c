/* Producer/consumer over a pthread condition variable.
 *
 * Usage: threads_condvar [N [P [C]]]   (defaults 10 30 20; tests: 10 30 20)
 *
 * Construction: main creates a producer and a consumer thread and joins both. The
 * producer makes N items one after the other: produce() spins P ms of thread CPU time,
 * then, under the mutex, it counts the item and signals the condition variable. The
 * consumer takes each item under the mutex (waiting on the condition variable while
 * none is ready), releases the mutex, then consume() spins C ms.
 *
 * With P > C the consumer is idle before the next item exists: it finishes item i at
 * work time (i+1)*P + C < (i+2)*P, when item i+1 is ready. So it blocks in
 * pthread_cond_wait (a futex wait) for every item, and the producer's signal (a futex
 * wake) releases it: the dependency producer -> consumer exists for every item. To keep
 * this true when the consumer is short of CPU (other load on the machine), the producer
 * publishes item i only once the consumer waits for it: it naps (nap_until in spin.h: off
 * CPU, no futex) until then; without such load it never has to. The program warns on
 * stderr if an item was nevertheless found ready without waiting.
 *
 * Expected (work clock; P = 30, C = 20, N = 10 in brackets):
 *   critical path = N*P + C                               [320 ms]
 *     the producer's N produce() calls, then the consumer's last consume()
 *   produce: share N*P                                    [300 ms, 93.75 %]
 *            zeroing: without produce the items are ready at once and the consumer's
 *            own chain of N consume() calls is the longest path, N*C [200 ms], so the
 *            gain is N*P + C - N*C = N*(P-C) + C          [120 ms]
 *   consume: share C (only the last one; the others overlap the next produce)
 *                                                         [20 ms, 6.25 %]
 *            zeroing: the path becomes the producer's N*P [300 ms]: gain C [20 ms]
 * --locks gives the same answer: its arcs (signal -> the wait's return, unlock -> next
 * lock) either duplicate the futex wakes (producer -> consumer) or carry a shorter path
 * than the receiving thread already has (the consumer's unlocks, with (i+1)*P + small,
 * against the producer's (i+2)*P at its next lock). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int items = 10, produced = 0, consumed = 0;
static int waits; /* waits for an item the consumer has begun (set under m) */
static double p_ms = 30, c_ms = 20;

__attribute__((noinline)) void produce(double ms) { spin_ms(ms); }
__attribute__((noinline)) void consume(double ms) { spin_ms(ms); }

static void *producer(void *arg) {
    (void)arg;
    for (int i = 0; i < items; i++) {
        produce(p_ms);
        nap_until(&waits, i + 1, 100);
        pthread_mutex_lock(&m);
        produced++;
        pthread_cond_signal(&c);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    long ready = 0; /* items found ready without waiting */
    for (int i = 0; i < items; i++) {
        pthread_mutex_lock(&m);
        if (consumed < produced) ready++;
        __atomic_store_n(&waits, i + 1, __ATOMIC_RELEASE);
        while (consumed == produced) pthread_cond_wait(&c, &m);
        consumed++;
        pthread_mutex_unlock(&m);
        consume(c_ms);
    }
    return (void *)ready;
}

int main(int argc, char **argv) {
    items = argc > 1 ? atoi(argv[1]) : 10;
    p_ms = argc > 2 ? atof(argv[2]) : 30;
    c_ms = argc > 3 ? atof(argv[3]) : 20;
    pthread_t prod, cons;
    void *ready;
    pthread_create(&prod, NULL, producer, NULL);
    pthread_create(&cons, NULL, consumer, NULL);
    pthread_join(prod, NULL);
    pthread_join(cons, &ready);
    if ((long)ready > 0)
        fprintf(stderr, "threads_condvar: warning: %ld of %d items were ready without a wait\n",
                (long)ready, items);
    printf("ok\n");
    return 0;
}
