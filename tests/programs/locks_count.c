/* locks_count K M OUT: two threads make a known number of pthread synchronization calls,
 * for `tracer record --locks`.
 *
 * Each of the two threads, in this order:
 *   - locks and unlocks the shared mutex `m` K times (pthread_mutex_lock/unlock);
 *   - trylocks and unlocks its own mutex K times (never contended: every trylock succeeds);
 *   - takes the shared rwlock K times for reading and K times for writing;
 *   - locks and unlocks the shared spinlock K times;
 *   - waits at a barrier of two K times;
 *   - hands a turn to the other thread M times through condition variable `c` (mutex `cm`):
 *     exactly M pthread_cond_signal calls per thread, and as many pthread_cond_wait calls
 *     as the scheduling makes necessary;
 *   - waits once on `c2` (mutex `cm`) with a timeout already past (pthread_cond_timedwait
 *     returns ETIMEDOUT, or 0 when the other thread's broadcast came first), then
 *     broadcasts `c2` once.
 * The main thread makes none of these calls itself. The objects' addresses are written to
 * OUT, one "name 0x..." line each, so a test can compare them with what was recorded.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t own[2] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
static pthread_barrier_t barrier;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_cond_t c2 = PTHREAD_COND_INITIALIZER;

static int k_times, m_times;
static int turn;
static volatile long counter;

static void *worker(void *arg) {
    int me = (int)(long)arg;
    for (int i = 0; i < k_times; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    for (int i = 0; i < k_times; i++) {
        if (pthread_mutex_trylock(&own[me]) != 0)
            abort();
        counter++;
        pthread_mutex_unlock(&own[me]);
    }
    for (int i = 0; i < k_times; i++) {
        pthread_rwlock_rdlock(&rw);
        pthread_rwlock_unlock(&rw);
        pthread_rwlock_wrlock(&rw);
        counter++;
        pthread_rwlock_unlock(&rw);
    }
    for (int i = 0; i < k_times; i++) {
        pthread_spin_lock(&spin);
        counter++;
        pthread_spin_unlock(&spin);
    }
    for (int i = 0; i < k_times; i++)
        pthread_barrier_wait(&barrier);
    for (int i = 0; i < m_times; i++) {
        pthread_mutex_lock(&cm);
        while (turn != me)
            pthread_cond_wait(&c, &cm);
        turn = 1 - me;
        pthread_cond_signal(&c);
        pthread_mutex_unlock(&cm);
    }
    struct timespec past = {0, 0};
    pthread_mutex_lock(&cm);
    pthread_cond_timedwait(&c2, &cm, &past); /* ETIMEDOUT, or 0 if woken by the broadcast */
    pthread_mutex_unlock(&cm);
    pthread_cond_broadcast(&c2);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s K M OUT\n", argv[0]);
        return 2;
    }
    k_times = atoi(argv[1]);
    m_times = atoi(argv[2]);
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    FILE *out = fopen(argv[3], "w");
    if (!out)
        return 1;
    fprintf(out, "mutex %p\nown0 %p\nown1 %p\nrwlock %p\nspin %p\nbarrier %p\n", (void *)&m,
            (void *)&own[0], (void *)&own[1], (void *)&rw, (void *)&spin, (void *)&barrier);
    fprintf(out, "cond_mutex %p\ncond %p\ncond2 %p\n", (void *)&cm, (void *)&c, (void *)&c2);
    fclose(out);
    printf("locks_count: counter %ld\n", counter);
    return 0;
}
