/* Two threads hand a token back and forth ROUNDS times through a mutex and a condition
 * variable; main joins both. Usage: threads_pingpong [ROUNDS [PAUSE_EVERY]].
 * Known answer: 2 threads created; every futex wait of a player that a wake ended was
 * woken by the other player. How many waits block is the scheduler's choice (a player
 * that finds the turn flipped already does not wait, common on two CPUs): with
 * PAUSE_EVERY > 0, every PAUSE_EVERY-th round the player holding the turn sleeps
 * PAUSE_US without the mutex before passing it on, so that the other one is asleep in
 * pthread_cond_wait by then and the broadcast wakes it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define PAUSE_US 20000

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn = 0, rounds = 100, pause_every = 0;

static void *player(void *arg) {
    int me = (int)(long)arg;
    for (int i = 0; i < rounds; i++) {
        pthread_mutex_lock(&m);
        while (turn != me) pthread_cond_wait(&c, &m);
        if (pause_every > 0 && i % pause_every == 0) {
            pthread_mutex_unlock(&m);
            usleep(PAUSE_US);
            pthread_mutex_lock(&m);
        }
        turn = 1 - me;
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 100;
    pause_every = argc > 2 ? atoi(argv[2]) : 0;
    pthread_t a, b;
    pthread_create(&a, NULL, player, (void *)0L);
    pthread_create(&b, NULL, player, (void *)1L);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("ok\n");
    return 0;
}
