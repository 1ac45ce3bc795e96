/* A thread id used by two processes, one after the other.
 *
 * Usage: tid_reuse exit DONE   a thread that exits at once: prints "tid N" (its id),
 *                              then naps until the file DONE exists (20 s at most)
 *        tid_reuse take N      makes a thread whose id is N (root: the next id comes
 *                              from /proc/sys/kernel/ns_last_pid), which spins 20 ms of
 *                              CPU time; prints "pid P took N", or exits 3 if another
 *                              process kept taking N first (50 tries)
 *
 * The tracer traces the first process only; the second one's thread must stay untraced
 * although it has the id of a traced thread that exited. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

static long wanted;
static volatile long got;

static void *report_id(void *arg) {
    (void)arg;
    got = syscall(SYS_gettid);
    if (got == wanted) spin_ms(20);
    return NULL;
}

static int take(long n) {
    wanted = n;
    for (int attempt = 0; attempt < 50; attempt++) {
        FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
        if (!f) { perror("ns_last_pid"); return 2; }
        fprintf(f, "%ld", n - 1);
        if (fclose(f) != 0) { perror("ns_last_pid"); return 2; }
        pthread_t t;
        if (pthread_create(&t, NULL, report_id, NULL) != 0) return 1;
        pthread_join(t, NULL);
        if (got == n) {
            printf("pid %d took %ld\n", getpid(), n);
            return 0;
        }
    }
    return 3;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "take") == 0) return take(atol(argv[2]));
    if (argc != 3 || strcmp(argv[1], "exit") != 0) {
        fprintf(stderr, "usage: tid_reuse exit DONE | tid_reuse take N\n");
        return 2;
    }
    wanted = -1;
    pthread_t t;
    if (pthread_create(&t, NULL, report_id, NULL) != 0) return 1;
    pthread_join(t, NULL);
    printf("tid %ld\n", got);
    fflush(stdout);
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 2000 && access(argv[2], F_OK) != 0; i++) nanosleep(&nap, NULL);
    return 0;
}
