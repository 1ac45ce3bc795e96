/* Per-event cost of each probe type, for `cargo xtask bench --only floor`. One mode per
 * run; each times its own loop in the process's CPU time (CLOCK_PROCESS_CPUTIME_ID: on a
 * shared machine, time other processes take from our CPU is not in it; the probes run in
 * our threads' context, so their cost is) and prints `ns_per_op=<x> wall_ns_per_op=<y>`
 * (start-up and exit not included):
 *   func N     N calls of bench_tiny() (select it with --func bench_tiny: an entry and a
 *              return probe per call)
 *   func_cet N [probed]  N calls of bench_tiny_cet(), which starts as code built with
 *              -fcf-protection -mnop-mcount does (endbr64, then a 5-byte nop; --func
 *              bench_tiny_cet); exits 1 unless its sum is right, or with `probed`
 *              unless the probe is on the nop (the endbr64 intact, the nop replaced)
 *   futex N    N FUTEX_WAKE calls on a futex nobody waits on (a futex enter and exit
 *              tracepoint per call, no context switch)
 *   sched N    two threads pinned to one CPU pass a byte back and forth over two pipes,
 *              N round trips; an op is one hand-off (a wakeup and a context switch)
 * and, for `--only flood`/`size`:
 *   flood EVENTS_PER_S SECS   futex wakes (2 events each) paced in 1 ms batches; prints
 *              `ops=<n> secs=<s> events_per_s=<x>` (events = 2 per op)              */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void report(double c0, double t0, double ops) {
    double c = cpu_ns() - c0, t = now_ns() - t0;
    printf("ns_per_op=%.1f wall_ns_per_op=%.1f\n", c / ops, t / ops);
}

volatile long sink;

__attribute__((noinline)) void bench_tiny(long i) { sink += i; }

/* bench_tiny, starting with endbr64 and the 5-byte nop that patching tools rewrite. The
 * kernel single-steps an endbr64 under a probe (a second trap) and emulates that nop (on
 * this kernel, rewrites it into a call of its uprobe trampoline): the tracer probes the
 * nop. */
void bench_tiny_cet(long i);
__asm__(".text\n"
        ".globl bench_tiny_cet\n"
        ".type bench_tiny_cet, @function\n"
        "bench_tiny_cet:\n"
        "  endbr64\n"
        "  .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n" /* nopl 0x0(%rax,%rax,1) */
        "  addq %rdi, sink(%rip)\n"
        "  ret\n"
        ".size bench_tiny_cet, .-bench_tiny_cet\n");

static int futex_word;

static void futex_wake(void) {
    syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static int ping[2], pong[2];
static long rounds;

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static int the_cpu;

static void *ponger(void *arg) {
    (void)arg;
    pin(the_cpu);
    char b;
    for (long i = 0; i < rounds; i++) {
        if (read(ping[0], &b, 1) != 1 || write(pong[1], &b, 1) != 1) exit(1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s func|func_cet|futex|sched N | flood EVENTS_PER_S SECS\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    long n = atol(argv[2]);
    if (!strcmp(mode, "func")) {
        double c0 = cpu_ns(), t0 = now_ns();
        for (long i = 0; i < n; i++) bench_tiny(i);
        report(c0, t0, n);
    } else if (!strcmp(mode, "func_cet")) {
        double c0 = cpu_ns(), t0 = now_ns();
        for (long i = 0; i < n; i++) bench_tiny_cet(i);
        report(c0, t0, n);
        if (sink != n * (n - 1) / 2) {
            fprintf(stderr, "bench_tiny_cet summed %ld, want %ld\n", (long)sink, n * (n - 1) / 2);
            return 1;
        }
        /* A uprobe shows in our own copy of the code: an int3, or on the 5-byte nop the
         * call of the kernel's trampoline. */
        const unsigned char *code = (const unsigned char *)bench_tiny_cet;
        if (argc > 3 && !strcmp(argv[3], "probed") &&
            (memcmp(code, "\xf3\x0f\x1e\xfa", 4) != 0 || code[4] == 0x0f)) {
            fprintf(stderr, "bench_tiny_cet not probed on its nop: %02x %02x %02x %02x %02x\n",
                    code[0], code[1], code[2], code[3], code[4]);
            return 1;
        }
    } else if (!strcmp(mode, "futex")) {
        double c0 = cpu_ns(), t0 = now_ns();
        for (long i = 0; i < n; i++) futex_wake();
        report(c0, t0, n);
    } else if (!strcmp(mode, "sched")) {
        the_cpu = sched_getcpu();
        pin(the_cpu);
        rounds = n;
        if (pipe(ping) || pipe(pong)) return 1;
        pthread_t t;
        pthread_create(&t, NULL, ponger, NULL);
        char b = 0;
        double c0 = cpu_ns(), t0 = now_ns();
        for (long i = 0; i < n; i++) {
            if (write(ping[1], &b, 1) != 1 || read(pong[0], &b, 1) != 1) return 1;
        }
        report(c0, t0, 2.0 * n);
        pthread_join(t, NULL);
    } else if (!strcmp(mode, "flood")) {
        double secs = argc > 3 ? atof(argv[3]) : 60;
        long per_ms = n / 2 / 1000; /* futex calls per 1 ms batch */
        if (per_ms < 1) per_ms = 1;
        struct timespec next;
        clock_gettime(CLOCK_MONOTONIC, &next);
        double t0 = now_ns(), end = t0 + secs * 1e9;
        long ops = 0;
        while (now_ns() < end) {
            for (long i = 0; i < per_ms; i++) futex_wake();
            ops += per_ms;
            next.tv_nsec += 1000000;
            if (next.tv_nsec >= 1000000000) {
                next.tv_nsec -= 1000000000;
                next.tv_sec++;
            }
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        }
        double s = (now_ns() - t0) / 1e9;
        printf("ops=%ld secs=%.3f events_per_s=%.0f\n", ops, s, 2.0 * ops / s);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
