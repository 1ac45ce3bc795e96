/* Named procedures: ITERS times, every rank spins MS ms of thread CPU time in compute()
 * and then passes a 1-byte token around the ring in exchange().
 * Known answer: compute and exchange are entered exactly ITERS times per rank, and each
 * rank's compute() takes the thread CPU time it prints (`rank R compute_cpu_ms X`):
 * ITERS x MS by construction, more if the kernel charged a stall of the host to a spin
 * (the spin then ends late by its own clock). It also prints the main thread's CPU time
 * outside MPI calls from the thread's start to MPI_Finalize's return
 * (`rank R outside_mpi_cpu_ms X`). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

/* This thread's CPU time inside MPI calls, as the calls see it. */
static double in_mpi_ms;
#define MPI(call) ADD_CPU_OF(in_mpi_ms, call)

__attribute__((noinline)) void compute(double ms) { spin_ms(ms); }

__attribute__((noinline)) void exchange(int rank, int size) {
    char b = 0;
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    if (rank == 0) {
        MPI(MPI_Send(&b, 1, MPI_BYTE, next, 0, MPI_COMM_WORLD));
        MPI(MPI_Recv(&b, 1, MPI_BYTE, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        MPI(MPI_Recv(&b, 1, MPI_BYTE, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI(MPI_Send(&b, 1, MPI_BYTE, next, 0, MPI_COMM_WORLD));
    }
}

int main(int argc, char **argv) {
    int rank, size;
    MPI(MPI_Init(&argc, &argv));
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int iters = argc > 1 ? atoi(argv[1]) : 5;
    double ms = argc > 2 ? atof(argv[2]) : 10;
    double compute_ms = 0;
    for (int i = 0; i < iters; i++) {
        double start = thread_cpu_ms();
        compute(ms);
        compute_ms += thread_cpu_ms() - start;
        exchange(rank, size);
    }
    MPI(MPI_Finalize());
    double outside_mpi_ms = thread_cpu_ms() - in_mpi_ms;
    printf("rank %d compute_cpu_ms %.3f\n", rank, compute_ms);
    printf("rank %d outside_mpi_cpu_ms %.3f\n", rank, outside_mpi_ms);
    if (rank == 0) printf("ok\n");
    return 0;
}
