/* One of each newly probed call, ROUNDS times on 4 ranks, with counts known by
 * construction. Per round and rank, collectives: Gatherv, Scatterv, Allgatherv (root 0),
 * Reduce_scatter, Reduce_scatter_block, Scan, Exscan, an Allreduce on MPI_COMM_SELF, an
 * Ibcast (completed by Wait), an Iallreduce and an Ibarrier (completed together by
 * Waitall), an Ireduce (completed by a Test loop), two Win_fence on a window of
 * MPI_COMM_WORLD with a Put and a Get between them, a Barrier, an Alltoallw, an
 * Igather and an Iscatter (each completed by Wait), an Iallgather and an Ialltoall
 * (completed together by Waitall): 20 collective exits.
 * Point to point, per round and rank: a Sendrecv_replace around the ring (to r + 1, 16
 * bytes, tag 1) and a persistent ring (Send_init to r + 1 and Recv_init from r - 1,
 * 24 bytes, tag 2, started with Startall, completed with Waitsome until both are done),
 * a ring of Isend (to r + 1, 8 bytes, tag 3) whose Irecv is cancelled first once and
 * then posted again and completed with Testall, a message to r + 1 (8 bytes, tag 4) that
 * the receiver finds with MPI_Probe before receiving it, and a ring of Isend/Irecv (8
 * bytes, tag 5) completed with a Testsome loop.
 * Once at start, MPI_Comm_split_type (probed since issue 38: a split by type).
 * Known answer: 5 messages per rank and round, all matched (world rank r to r + 1:
 * 64 bytes per round); 20 collective exits per rank and round, none incomplete. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int counts[64], displs[64], x[64] = {0}, y[64] = {0}, big[256] = {0};
    for (int j = 0; j < size; j++) { counts[j] = 2; displs[j] = 2 * j; }
    MPI_Comm shm;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm);
    MPI_Comm_free(&shm);
    int *winbuf = calloc(4, sizeof(int));
    MPI_Win win;
    MPI_Win_create(winbuf, 4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    char ring[16] = {0}, ps[24] = {0}, pr[24], is[8] = {0}, ir[8];
    MPI_Request pers[2];
    MPI_Send_init(ps, 24, MPI_BYTE, next, 2, MPI_COMM_WORLD, &pers[0]);
    MPI_Recv_init(pr, 24, MPI_BYTE, prev, 2, MPI_COMM_WORLD, &pers[1]);
    for (int r = 0; r < rounds; r++) {
        MPI_Gatherv(x, 2, MPI_INT, big, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Scatterv(big, counts, displs, MPI_INT, x, 2, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Allgatherv(x, 2, MPI_INT, big, counts, displs, MPI_INT, MPI_COMM_WORLD);
        MPI_Reduce_scatter(big, y, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Reduce_scatter_block(big, y, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Scan(x, y, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Exscan(x, y, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(x, y, 2, MPI_INT, MPI_SUM, MPI_COMM_SELF);
        MPI_Request q[2], one;
        MPI_Ibcast(x, 2, MPI_INT, 0, MPI_COMM_WORLD, &one);
        MPI_Wait(&one, MPI_STATUS_IGNORE);
        MPI_Iallreduce(x, y, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]);
        MPI_Ibarrier(MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        int flag = 0;
        MPI_Ireduce(x, y, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &one);
        while (!flag) MPI_Test(&one, &flag, MPI_STATUS_IGNORE);
        MPI_Win_fence(0, win);
        MPI_Put(x, 1, MPI_INT, next, 0, 1, MPI_INT, win);
        MPI_Get(y, 1, MPI_INT, prev, 1, 1, MPI_INT, win);
        MPI_Win_fence(0, win);

        MPI_Sendrecv_replace(ring, 16, MPI_BYTE, next, 1, prev, 1, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
        MPI_Startall(2, pers);
        int done = 0, outcount, idx[2];
        while (done < 2) {
            MPI_Waitsome(2, pers, &outcount, idx, MPI_STATUSES_IGNORE);
            if (outcount != MPI_UNDEFINED) done += outcount;
        }
        MPI_Request c;
        MPI_Irecv(ir, 8, MPI_BYTE, prev, 3, MPI_COMM_WORLD, &c);
        MPI_Cancel(&c);
        MPI_Wait(&c, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD); /* no message of tag 3 is sent before every cancel */
        MPI_Request t[2];
        MPI_Irecv(ir, 8, MPI_BYTE, prev, 3, MPI_COMM_WORLD, &t[0]);
        MPI_Isend(is, 8, MPI_BYTE, next, 3, MPI_COMM_WORLD, &t[1]);
        flag = 0;
        while (!flag) MPI_Testall(2, t, &flag, MPI_STATUSES_IGNORE);

        MPI_Datatype types[64];
        int wcounts[64], wdispls[64];
        for (int j = 0; j < size; j++) {
            types[j] = MPI_INT; wcounts[j] = 1; wdispls[j] = 4 * j;
        }
        MPI_Alltoallw(x, wcounts, wdispls, types, y, wcounts, wdispls, types, MPI_COMM_WORLD);
        MPI_Igather(x, 1, MPI_INT, big, 1, MPI_INT, 0, MPI_COMM_WORLD, &one);
        MPI_Wait(&one, MPI_STATUS_IGNORE);
        MPI_Iscatter(big, 1, MPI_INT, x, 1, MPI_INT, 0, MPI_COMM_WORLD, &one);
        MPI_Wait(&one, MPI_STATUS_IGNORE);
        MPI_Iallgather(x, 1, MPI_INT, big, 1, MPI_INT, MPI_COMM_WORLD, &q[0]);
        MPI_Ialltoall(x, 1, MPI_INT, big + 64, 1, MPI_INT, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);

        char pb[8] = {0};
        MPI_Status st;
        MPI_Request pq;
        MPI_Isend(pb, 8, MPI_BYTE, next, 4, MPI_COMM_WORLD, &pq);
        MPI_Probe(prev, 4, MPI_COMM_WORLD, &st);
        MPI_Recv(ir, 8, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&pq, MPI_STATUS_IGNORE);

        MPI_Irecv(ir, 8, MPI_BYTE, prev, 5, MPI_COMM_WORLD, &t[0]);
        MPI_Isend(is, 8, MPI_BYTE, next, 5, MPI_COMM_WORLD, &t[1]);
        int completed = 0, outcount2, idx2[2];
        while (completed < 2) {
            MPI_Testsome(2, t, &outcount2, idx2, MPI_STATUSES_IGNORE);
            if (outcount2 != MPI_UNDEFINED) completed += outcount2;
        }
    }
    MPI_Request_free(&pers[0]);
    MPI_Request_free(&pers[1]);
    MPI_Win_free(&win);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
