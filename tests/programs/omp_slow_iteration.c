/* An OpenMP parallel-for with one slow iteration (gcc -fopenmp: libgomp; built by clang
 * -fopenmp as omp_slow_iteration.libomp: LLVM's libomp, whose threads spin for
 * KMP_BLOCKTIME, 200 ms, before they sleep; OMP_WAIT_POLICY=passive makes that 0).
 *
 * Usage: OMP_NUM_THREADS=T omp_slow_iteration [N [R [I [L [T]]]]]
 *        (defaults 12 6 5 40, T from OMP_NUM_THREADS; a 5th argument overrides it with
 *        omp_set_num_threads; tests: OMP_NUM_THREADS=3 and 12 6 5 40, or T = 2)
 *
 * Any wait policy: with OMP_WAIT_POLICY=passive (and GOMP_SPINCOUNT=0) libgomp's threads
 * wait in futex waits and every release is a futex wake; at the default policy they
 * spin before they sleep (on 2 CPUs, 2 threads spin long enough that most waits never
 * sleep), and the tracer knows the waits from the region's probes instead.
 *
 * Construction: R repetitions of
 *     #pragma omp parallel for schedule(static)
 *     for (i = 0; i < N; i++) ...
 * with T threads and N a multiple of T: the static schedule gives thread j the
 * contiguous chunk [j*c, (j+1)*c), c = N/T. Every iteration runs iteration() for I ms of
 * thread CPU time except one, which runs slow_iteration() for L ms: in repetition r the
 * first iteration of thread w's chunk, w = 1 + r % (T-1) (with T = 1, w = 0). The slow
 * iteration always belongs to a worker, never to the master (thread 0), and moves from
 * worker to worker when T >= 3. (The program warns if it ran on another thread.)
 *
 * Dependencies: the master's clone -> the workers (first region); the master's fork
 * releases the waiting workers at the start of each later region; at the end of each
 * region every thread arrives at the team barrier, and the last arrival releases the
 * others (passive: a futex wake). With L > I the slow thread's chunk,
 * (c-1)*I + L, is the longest, so it arrives last and everyone, the master included,
 * continues from its path. To keep it last when CPU sharing is uneven (other load on
 * the machine), the slow thread, after the last iteration of its chunk, naps (nap_until
 * in spin.h: off CPU, no futex) until the T-1 other threads have finished their chunks;
 * without such load it never has to.
 *
 * Expected (work clock; N = 12, R = 6, I = 5, L = 40; T = 3 so c = 4, and T = 2 so c = 6,
 * in brackets):
 *   critical path = R*((c-1)*I + L)                   [T=3: 330 ms; T=2: 390 ms]
 *   slow_iteration: share R*L                         [240 ms: 72.73 %; 61.54 %]
 *     zeroing: every chunk then takes at most c*I, and the master's own chain is c*I per
 *     region: R*c*I [120 ms; 180 ms]: gain R*(L - I)  [210 ms; 210 ms]
 *   iteration: share R*(c-1)*I                        [90 ms: 27.27 %; 150 ms: 38.46 %]
 *     zeroing: the slow iteration alone per region, R*L [240 ms]:
 *     gain R*(c-1)*I                                  [90 ms; 150 ms]
 * Without the wake arcs (T >= 3) no thread's own chain would reach R*((c-1)*I + L).
 * --locks changes nothing (libgomp's barriers and locks are its own futex code, no
 * pthread mutex). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void iteration(double ms) { spin_ms(ms); }
__attribute__((noinline)) void slow_iteration(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 12, reps = argc > 2 ? atoi(argv[2]) : 6;
    double i_ms = argc > 3 ? atof(argv[3]) : 5, l_ms = argc > 4 ? atof(argv[4]) : 40;
    if (argc > 5) omp_set_num_threads(atoi(argv[5]));
    int nthreads = omp_get_max_threads();
    if (n % nthreads != 0)
        fprintf(stderr, "omp_slow_iteration: warning: N = %d is not a multiple of %d threads\n", n, nthreads);
    int c = n / nthreads, wrong = 0;
    static int chunks_done; /* chunks of non-slow threads finished, all repetitions */
    for (int r = 0; r < reps; r++) {
        int w = nthreads > 1 ? 1 + r % (nthreads - 1) : 0;
        int slow = w * c;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            if (i == slow) {
                if (omp_get_thread_num() != w || omp_get_num_threads() != nthreads) {
#pragma omp atomic
                    wrong++;
                }
                slow_iteration(l_ms);
            } else {
                iteration(i_ms);
            }
            if (i % c == c - 1) { /* the last iteration of thread i / c's chunk */
                if (i / c == w) nap_until(&chunks_done, (r + 1) * (nthreads - 1), 100);
                else __atomic_add_fetch(&chunks_done, 1, __ATOMIC_SEQ_CST);
            }
        }
    }
    if (wrong)
        fprintf(stderr, "omp_slow_iteration: warning: the slow iteration ran on an unexpected thread %d times\n",
                wrong);
    printf("ok\n");
    return 0;
}
