/* A burst of futex calls written while the tracer may not read them
 * (tests/tests/integration/lost_events.rs: the test stops the tracer for the burst).
 *
 * Usage: futex_burst N DIR
 *
 * Construction: one thread. It creates DIR/ready, then waits (nanosleep: no futex) until
 * DIR/go exists, then makes N calls futex(&word, FUTEX_WAKE_PRIVATE, 1) on a word nobody
 * waits on (each returns 0 at once), creates DIR/done and exits. Traced, the burst is
 * exactly N futex entries and N exits of FUTEX_WAKE_PRIVATE on &word, written as fast as
 * the CPU makes the calls (about 2 million records a second here). It prints the
 * word's address so the test can tell its calls from the C library's. */
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int word;

static void touch(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: futex_burst N DIR\n");
        return 2;
    }
    long n = atol(argv[1]);
    const char *dir = argv[2];
    char go[4096];
    snprintf(go, sizeof go, "%s/go", dir);
    printf("word %p\n", (void *)&word);
    fflush(stdout);
    touch(dir, "ready");
    struct timespec nap = {0, 10 * 1000 * 1000};
    while (access(go, F_OK) != 0) nanosleep(&nap, NULL);
    for (long i = 0; i < n; i++) syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    touch(dir, "done");
    return 0;
}
