/* One OpenMP parallel region of T threads through 2R phases that end at team barriers
 * (gcc -fopenmp: libgomp; clang -fopenmp: libomp, omp_barrier_phases.libomp), at any
 * wait policy (the default spins before it sleeps).
 *
 * Usage: omp_barrier_phases [T [R [L [I]]]]   (defaults 2 4 40 10)
 *
 * Construction: in phase p one thread (p % T) runs slow_phase() for L ms of thread CPU
 * time and the others run normal_phase() for I ms, then every thread waits at a team
 * barrier. Phases 0..R-1 end at an explicit `#pragma omp barrier` (GOMP_barrier;
 * libomp: __kmpc_barrier);
 * phases R..2R-1 are a `#pragma omp for schedule(dynamic)` loop of T iterations, which
 * ends at the loop's implicit barrier (GOMP_loop_end; libomp: clang calls
 * __kmpc_barrier after __kmpc_dispatch_next says the loop is done). In those, each thread takes
 * exactly one iteration: after taking it, a thread naps (nap_until in spin.h: off CPU,
 * no futex) until all T are taken; iteration p % T is the slow one.
 *
 * Dependencies: every thread leaves a barrier after the last arrival, so each phase
 * lasts as long as its slowest thread; the slow thread changes from phase to phase, so
 * (T >= 2) no thread's own chain reaches the path without the barriers' dependencies.
 *
 * Expected (work clock; T = 2, R = 4, L = 40, I = 10):
 *   critical path = 2R*L                                  [320 ms]
 *   slow_phase: share 2R*L [320 ms]; zeroing: each phase then takes I: gain 2R*(L-I)
 *                                                         [240 ms]
 *   normal_phase: share 0, zeroing gain 0 (off the path).
 * Without the barriers' dependencies a thread's own chain is R*L + R*I [200 ms]. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void slow_phase(double ms) { spin_ms(ms); }
__attribute__((noinline)) void normal_phase(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 4;
    double l_ms = argc > 3 ? atof(argv[3]) : 40, i_ms = argc > 4 ? atof(argv[4]) : 10;
    static int taken; /* iterations of the dynamic loops taken so far */
    int wrong = 0;
#pragma omp parallel num_threads(t)
    {
        int me = omp_get_thread_num();
        if (omp_get_num_threads() != t) {
#pragma omp atomic
            wrong++;
        }
        for (int p = 0; p < reps; p++) {
            if (me == p % t) slow_phase(l_ms);
            else normal_phase(i_ms);
#pragma omp barrier
        }
        for (int p = reps; p < 2 * reps; p++) {
#pragma omp for schedule(dynamic)
            for (int i = 0; i < t; i++) {
                __atomic_add_fetch(&taken, 1, __ATOMIC_SEQ_CST);
                nap_until(&taken, (p - reps + 1) * t, 100);
                if (i == p % t) slow_phase(l_ms);
                else normal_phase(i_ms);
            }
        }
    }
    if (wrong) fprintf(stderr, "omp_barrier_phases: warning: the team had fewer than %d threads\n", t);
    printf("ok\n");
    return 0;
}
