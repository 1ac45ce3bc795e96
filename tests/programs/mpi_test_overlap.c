/* Work overlapped with a transfer and tested between chunks. 2 ranks, ROUNDS times: rank
 * 1 sleeps W ms and sends 64 bytes; rank 0 posts MPI_Irecv and runs 2 * W ms of CPU in
 * chunks of CHUNK us (inline: no procedure of its own), calling MPI_Test after each
 * chunk until the message is in, then the rest of its chunks without testing. Rank 0
 * then sends a 1-int ack that rank 1 waits for, so every round starts together.
 * Known answer: the chunks between the tests that found nothing are work, not polling:
 * the critical path is rank 0's work, at least ROUNDS * 2 * W (rank 1 sleeps: its CPU
 * clock hardly moves); 2 * ROUNDS messages are matched. (Were the time between those tests
 * taken for a polling loop's, the path would be about ROUNDS * W.)
 * Rank 0 prints that CPU time by its own clock ("work_cpu_ms": its CPU time from its
 * start to MPI_Finalize, less the time inside MPI calls). That is the answer: it is more
 * than ROUNDS * 2 * W by an amount that depends on the machine, since each chunk ends up
 * to one clock read late (1.2-1.5 ms a round here) and the process's start-up before
 * MPI_Init is work too (about 5 ms). The path exceeds it by what the probes' traps cost
 * outside their own timestamps, about 3 us for each of the 1,400 or so MPI_Test calls. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

/* The CPU time rank 0 spends inside MPI calls. */
static double mpi_ms = 0;
#define IN_MPI(call) ADD_CPU_OF(mpi_ms, call)

int main(int argc, char **argv) {
    int rank;
    IN_MPI(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    double w = argc > 2 ? atof(argv[2]) : 30;
    double chunk_ms = (argc > 3 ? atof(argv[3]) : 100) / 1000.0;
    char buf[64] = {0};
    int ack = 0;
    for (int r = 0; r < rounds; r++) {
        if (rank == 1) {
            struct timespec nap = {(long)(w / 1000), (long)(w * 1e6) % 1000000000L};
            nanosleep(&nap, NULL);
            MPI_Send(buf, 64, MPI_BYTE, 0, r, MPI_COMM_WORLD);
            MPI_Recv(&ack, 1, MPI_INT, 0, 1000 + r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 0) {
            MPI_Request req;
            int flag = 0;
            IN_MPI(MPI_Irecv(buf, 64, MPI_BYTE, 1, r, MPI_COMM_WORLD, &req));
            for (long c = 0; c < (long)(2 * w / chunk_ms + 0.5); c++) {
                spin_ms(chunk_ms);
                if (!flag) IN_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
            }
            if (!flag) IN_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
            IN_MPI(MPI_Send(&ack, 1, MPI_INT, 1, 1000 + r, MPI_COMM_WORLD));
        }
    }
    double work_ms = thread_cpu_ms() - mpi_ms;
    MPI_Finalize();
    if (rank == 0) printf("work_cpu_ms %.3f\nok\n", work_ms);
    return 0;
}
