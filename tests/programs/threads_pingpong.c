/* Two threads hand a token back and forth ROUNDS times through a mutex and a condition
 * variable; main joins both. Known answer: 2 threads created, blocking hand-offs wake
 * each other through futexes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn = 0, rounds = 100;

static void *player(void *arg) {
    int me = (int)(long)arg;
    for (int i = 0; i < rounds; i++) {
        pthread_mutex_lock(&m);
        while (turn != me) pthread_cond_wait(&c, &m);
        turn = 1 - me;
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 100;
    pthread_t a, b;
    pthread_create(&a, NULL, player, (void *)0L);
    pthread_create(&b, NULL, player, (void *)1L);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("ok\n");
    return 0;
}
