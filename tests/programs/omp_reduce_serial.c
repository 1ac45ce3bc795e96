/* A region run by the master alone (an `if` clause that is false), serial work, then one
 * region of T threads through R phases, each ending at a reduction loop's barrier
 * (clang -fopenmp: libomp's __kmpc_reduce, __kmpc_end_reduce and the loop's
 * __kmpc_barrier; gcc -fopenmp: the combining and GOMP_barrier).
 *
 * Usage: omp_reduce_serial [T [R [L [I [S]]]]]   (defaults 2 4 40 10 50)
 *
 * Construction: first `#pragma omp parallel if(argc < 0)`: false, so the master runs the
 * region's outlined function itself (clang: between __kmpc_serialized_parallel and
 * __kmpc_end_serialized_parallel; gcc: inside GOMP_parallel); then serial_part() runs
 * S ms on the master, outside any region. Then one region: in phase p thread p % T runs
 * slow_phase() for L ms of thread CPU time and the others normal_phase() for I ms, then
 * every thread meets a `#pragma omp for reduction(+:sum)` loop of T iterations, whose end
 * waits for the whole team.
 *
 * Expected (work clock; T = 2, R = 4, L = 40, I = 10, S = 50):
 *   critical path = S + R*L                                [210 ms]
 *   serial_part: share S, zeroing S                        [50 ms]
 *   slow_phase: share R*L [160 ms]; zeroing: each phase then takes I: gain R*(L-I)
 *                                                          [120 ms]
 *   normal_phase: share 0, zeroing gain 0.
 * If the master's return from the serialized region were taken for a worker going idle,
 * serial_part would be waiting, not work (path R*L); if the reduction's waits were
 * work, the fast threads' chains would reach the slow ones' and the phases' shares
 * would spread over normal_phase. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void slow_phase(double ms) { spin_ms(ms); }
__attribute__((noinline)) void normal_phase(double ms) { spin_ms(ms); }
__attribute__((noinline)) void serial_part(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 4;
    double l_ms = argc > 3 ? atof(argv[3]) : 40, i_ms = argc > 4 ? atof(argv[4]) : 10;
    double s_ms = argc > 5 ? atof(argv[5]) : 50;
    int alone = 0, wrong = 0;
    long sum = 0;
#pragma omp parallel if(argc < 0) num_threads(t)
    alone = omp_get_num_threads();
    serial_part(s_ms);
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
#pragma omp for schedule(static) reduction(+:sum)
            for (int k = 0; k < t; k++) sum += k;
        }
    }
    if (alone != 1) fprintf(stderr, "omp_reduce_serial: warning: the first region had %d threads\n", alone);
    if (wrong) fprintf(stderr, "omp_reduce_serial: warning: the team had fewer than %d threads\n", t);
    if (sum != (long)reps * t * (t - 1) / 2) fprintf(stderr, "omp_reduce_serial: wrong sum %ld\n", sum);
    printf("ok\n");
    return 0;
}
