/* Calls that return without their exit probe. A communicator's error handler jumps out
 * of N MPI_Recv calls from a rank that does not exist (longjmp from inside the call, as
 * a program's error recovery may), so none of them returns through its return probe;
 * then every rank passes a token round a ring N times. Usage: mpi_longjmp [N].
 * Known answer: N receives per rank that never return, whose frames the probes drop
 * (calls_unwound, exit_missed N per rank), one complete barrier, and N * size ring
 * messages, all matched.
 * Prints "jumped J" per rank: the test takes N from it. */
#include <mpi.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf recover;

static void jump_out(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    (void)code;
    longjmp(recover, 1);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5;
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Errhandler handler;
    MPI_Comm_create_errhandler(jump_out, &handler);
    MPI_Comm jumpy;
    MPI_Comm_dup(MPI_COMM_WORLD, &jumpy);
    MPI_Comm_set_errhandler(jumpy, handler);
    volatile int jumped = 0;
    for (volatile int i = 0; i < n; i++) {
        if (setjmp(recover) == 0) {
            int x;
            MPI_Recv(&x, 1, MPI_INT, size + 7, 0, jumpy, MPI_STATUS_IGNORE);
        } else {
            jumped++;
        }
    }
    /* The probes find each receive returned at the next one (the same call site at the
     * same stack pointer), and the last at the next call entered above its stack
     * pointer: a call with fewer arguments on the stack than MPI_Recv (the ring's
     * Sendrecv_replace has more, so its stack pointer is lower). */
    MPI_Barrier(MPI_COMM_WORLD);
    int token = 0;
    for (int i = 0; i < n; i++) {
        MPI_Sendrecv_replace(&token, 1, MPI_INT, (rank + 1) % size, i, (rank + size - 1) % size,
                             i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    printf("jumped %d\n", jumped);
    MPI_Finalize();
    return 0;
}
