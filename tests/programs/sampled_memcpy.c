/* Time spent inside the C library (docs/sampling.md): copy_routine copies 1 MiB blocks
 * with memcpy for 0.5 s, so most samples interrupt libc's memcpy, whose stack must
 * unwind out of libc through copy_routine to main. Built -O2, no frame pointers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK (1 << 20)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) unsigned long copy_routine(char *a, char *b, double secs) {
    double end = now_s() + secs;
    unsigned long n = 0;
    do {
        for (int i = 0; i < 16; i++, n++) {
            memcpy(i % 2 ? a : b, i % 2 ? b : a, BLOCK);
            /* The compiler may not drop a copy whose result is read. */
            a[n % BLOCK] ^= (char)n;
        }
    } while (now_s() < end);
    return n + (unsigned char)a[0];
}

int main(void) {
    char *a = malloc(BLOCK), *b = malloc(BLOCK);
    memset(a, 1, BLOCK);
    memset(b, 2, BLOCK);
    printf("%lu\n", copy_routine(a, b, 0.5));
    free(a);
    free(b);
    return 0;
}
