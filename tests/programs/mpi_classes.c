/* Classes of traffic the matcher must pair, one phase per run: mpi_classes PHASE ROUNDS.
 * 4 ranks. Every count follows from the construction; by world rank w, per round:
 *
 * self: messages a rank sends to itself on a communicator: an Isend to itself received
 *   by a Recv naming it (8 B, world), a Sendrecv with itself (16 B, a dup of world), an
 *   Irecv(MPI_ANY_SOURCE) on that dup completed by a Wait after a Send to itself (24 B):
 *   w->w 3 messages, 48 B.
 * wildcard: rank 0 posts 3 Irecv(MPI_ANY_SOURCE) on a dup, all ranks meet at a Barrier
 *   (so a ready send is legal), ranks 1..3 MPI_Rsend 16 B to rank 0; rank 0 completes
 *   the 3 by MPI_Waitall(MPI_STATUSES_IGNORE). Again with MPI_Ssend 8 B, completed by
 *   MPI_Testall(MPI_STATUSES_IGNORE) polled; again with MPI_Bsend 32 B, completed by
 *   MPI_Waitall with statuses (each checked). A Barrier ends the round, so no round's
 *   messages are in flight during another's completion: w->0 for w = 1..3, 3 messages,
 *   56 B.
 * cartsub: cart = Cart_create(world, 2 x 2, reorder allowed; both libraries keep every
 *   rank, checked), row = Cart_sub(cart, {0, 1}) ({0, 1}, {2, 3}), col = Cart_sub(cart,
 *   {1, 0}) ({0, 2}, {1, 3}; its remain_dims are the last two ints of a page followed
 *   by an inaccessible one, where the probe's read of 8 ints fails and it reads to the
 *   page's end), line = Cart_sub(row, {1}) (row again, through a Cart_sub of a
 *   Cart_sub); a Sendrecv with the other member of line (24 B) and of col (32 B), an
 *   Allreduce on row and on col: w->w^1 24 B, w->w^2 32 B; 2 collective exits per rank.
 * intercomm: half = Comm_split(world, w % 2, w) (even {0, 2}, odd {1, 3}), inter =
 *   Intercomm_create(half, leader 0, world, remote leader 1 or 0, tag 7). On inter, ranks
 *   name the remote group: even local rank r sends 20 B to remote rank r, odd local rank
 *   r sends 28 B to remote rank 1 - r (one Sendrecv each): 0->1 20 B, 2->3 20 B,
 *   1->2 28 B, 3->0 28 B; collectives on inter: a Barrier, an Allreduce, a Bcast from
 *   the even group's rank 1 (world 2: MPI_ROOT there, MPI_PROC_NULL at world 0, root 1
 *   in the odd group) and a Reduce to the odd group's rank 0 (world 1). merged =
 *   Intercomm_merge(inter, high = even) puts the odd group first: ranks 0..3 are world
 *   1, 3, 0, 2 (checked); a ring on it to merged rank m + 1 (36 B): 1->3, 3->0, 0->2,
 *   2->1 36 B; an Allreduce on merged: 5 collective exits per rank.
 * distgraph: ring = Dist_graph_create_adjacent(world, in {w - 1}, out {w + 1}, no
 *   reorder), skip = Dist_graph_create(world, edge w -> w + 2, no reorder) (ranks kept,
 *   checked); a Sendrecv along each (44 B on ring, 52 B on skip), a Bcast from rank 1 on
 *   ring, an Allreduce on skip, a Neighbor_allgather and a Neighbor_alltoall on ring
 *   (each rank's in-neighbour is w - 1): w->w+1 mod 4 44 B, w->w+2 mod 4 52 B; 4
 *   collective exits per rank.
 * distreorder: ring = Dist_graph_create_adjacent(world, in {w - 1}, out {w + 1}, reorder
 *   allowed); a Sendrecv to ring rank r + 1 from r - 1 (48 B). MPICH keeps the ranks
 *   (checked): w->w+1 mod 4 48 B. Open MPI may permute them (topo/treematch): one
 *   message to and from each rank, 4 receives per round, pairs unknown.
 * splittype: node = Comm_split_type(world, MPI_COMM_TYPE_SHARED, key -w) (one machine:
 *   world reversed), a ring on it to new rank r + 1 (40 B), a Bcast from new rank 0
 *   (world 3): w->w-1 mod 4 40 B; 1 collective exit per rank.
 * f2c: back = MPI_Comm_f2c(MPI_Comm_c2f(dup of world)) (checked equal), a ring on it to
 *   w + 1 (12 B), an Allreduce on it: w->w+1 mod 4 12 B; 1 collective exit per rank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define N 4

static char out[64], in[N][64];

static void self_sends(MPI_Comm dup, int w) {
    MPI_Request r;
    MPI_Isend(out, 8, MPI_BYTE, w, 1, MPI_COMM_WORLD, &r);
    MPI_Recv(in[0], 8, MPI_BYTE, w, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Sendrecv(out, 16, MPI_BYTE, w, 2, in[0], 16, MPI_BYTE, w, 2, dup, MPI_STATUS_IGNORE);
    MPI_Irecv(in[0], 24, MPI_BYTE, MPI_ANY_SOURCE, 3, dup, &r);
    MPI_Send(out, 24, MPI_BYTE, w, 3, dup);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
}

/* Ranks 1..3 send `bytes` to rank 0 by `how` into 3 wildcard receives. */
static void into_wildcards(MPI_Comm dup, int w, int bytes, int tag, char how) {
    MPI_Request r[N - 1];
    MPI_Status st[N - 1];
    if (w == 0)
        for (int i = 0; i < N - 1; i++)
            MPI_Irecv(in[i], bytes, MPI_BYTE, MPI_ANY_SOURCE, tag, dup, &r[i]);
    MPI_Barrier(dup);
    if (w != 0) {
        if (how == 'r') MPI_Rsend(out, bytes, MPI_BYTE, 0, tag, dup);
        if (how == 's') MPI_Ssend(out, bytes, MPI_BYTE, 0, tag, dup);
        if (how == 'b') MPI_Bsend(out, bytes, MPI_BYTE, 0, tag, dup);
    } else if (how == 'r') {
        MPI_Waitall(N - 1, r, MPI_STATUSES_IGNORE);
    } else if (how == 's') {
        int done = 0;
        while (!done) MPI_Testall(N - 1, r, &done, MPI_STATUSES_IGNORE);
    } else {
        MPI_Waitall(N - 1, r, st);
        int seen = 0;
        for (int i = 0; i < N - 1; i++) seen |= 1 << st[i].MPI_SOURCE;
        if (seen != 0xe) MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

int main(int argc, char **argv) {
    int w, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &w);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != N || argc < 2) MPI_Abort(MPI_COMM_WORLD, 1);
    const char *phase = argv[1];
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    memset(out, 1, sizeof out);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    if (!strcmp(phase, "self")) {
        for (int i = 0; i < rounds; i++) self_sends(dup, w);
    } else if (!strcmp(phase, "wildcard")) {
        static char buffer[(32 + MPI_BSEND_OVERHEAD) * 4];
        MPI_Buffer_attach(buffer, sizeof buffer);
        for (int i = 0; i < rounds; i++) {
            into_wildcards(dup, w, 16, 5, 'r');
            into_wildcards(dup, w, 8, 6, 's');
            into_wildcards(dup, w, 32, 7, 'b');
            MPI_Barrier(dup);
        }
        void *b;
        int n;
        MPI_Buffer_detach(&b, &n);
    } else if (!strcmp(phase, "cartsub")) {
        int dims[2] = {2, 2}, periods[2] = {0, 0}, keep_col[2] = {0, 1}, keep_row[2] = {1, 0};
        int keep_all[1] = {1}, c;
        MPI_Comm cart, row, col, line;
        MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &cart);
        MPI_Comm_rank(cart, &c);
        if (c != w) MPI_Abort(MPI_COMM_WORLD, 5);
        MPI_Cart_sub(cart, keep_col, &row);
        long page = sysconf(_SC_PAGESIZE);
        char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
        if (two == MAP_FAILED || mprotect(two + page, page, PROT_NONE)) MPI_Abort(MPI_COMM_WORLD, 8);
        int *edge = (int *)(two + page) - 2;
        memcpy(edge, keep_row, sizeof keep_row);
        MPI_Cart_sub(cart, edge, &col);
        MPI_Cart_sub(row, keep_all, &line);
        for (int i = 0; i < rounds; i++) {
            int r, x = w, y;
            MPI_Comm_rank(line, &r);
            MPI_Sendrecv(out, 24, MPI_BYTE, 1 - r, 1, in[0], 24, MPI_BYTE, 1 - r, 1, line,
                         MPI_STATUS_IGNORE);
            MPI_Comm_rank(col, &r);
            MPI_Sendrecv(out, 32, MPI_BYTE, 1 - r, 1, in[0], 32, MPI_BYTE, 1 - r, 1, col,
                         MPI_STATUS_IGNORE);
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, row);
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, col);
        }
    } else if (!strcmp(phase, "intercomm")) {
        MPI_Comm half, inter, merged;
        int even = w % 2 == 0, r, m, n;
        MPI_Comm_split(MPI_COMM_WORLD, w % 2, w, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, even ? 1 : 0, 7, &inter);
        MPI_Comm_rank(half, &r);
        MPI_Intercomm_merge(inter, even, &merged);
        MPI_Comm_rank(merged, &m);
        MPI_Comm_size(merged, &n);
        if (n != N || m != (even ? 2 + w / 2 : w / 2)) MPI_Abort(MPI_COMM_WORLD, 6);
        for (int i = 0; i < rounds; i++) {
            int x = w, y;
            MPI_Sendrecv(out, even ? 20 : 28, MPI_BYTE, even ? r : 1 - r, 1, in[0], 28,
                         MPI_BYTE, even ? 1 - r : r, 1, inter, MPI_STATUS_IGNORE);
            MPI_Barrier(inter);
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, inter);
            MPI_Bcast(in[1], 4, MPI_BYTE, even ? (r == 1 ? MPI_ROOT : MPI_PROC_NULL) : 1, inter);
            MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, even ? 0 : (r == 0 ? MPI_ROOT : MPI_PROC_NULL),
                       inter);
            MPI_Sendrecv(out, 36, MPI_BYTE, (m + 1) % N, 2, in[0], 36, MPI_BYTE,
                         (m + N - 1) % N, 2, merged, MPI_STATUS_IGNORE);
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, merged);
        }
    } else if (!strcmp(phase, "distgraph")) {
        MPI_Comm ring, skip;
        int from = (w + N - 1) % N, to = (w + 1) % N, far = (w + 2) % N, one = 1, r1, r2;
        MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &from, MPI_UNWEIGHTED, 1, &to,
                                       MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &ring);
        MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &w, &one, &far, MPI_UNWEIGHTED,
                              MPI_INFO_NULL, 0, &skip);
        MPI_Comm_rank(ring, &r1);
        MPI_Comm_rank(skip, &r2);
        if (r1 != w || r2 != w) MPI_Abort(MPI_COMM_WORLD, 7);
        for (int i = 0; i < rounds; i++) {
            int x = w, y;
            MPI_Sendrecv(out, 44, MPI_BYTE, to, 1, in[0], 44, MPI_BYTE, from, 1, ring,
                         MPI_STATUS_IGNORE);
            MPI_Bcast(in[1], 4, MPI_BYTE, 1, ring);
            MPI_Sendrecv(out, 52, MPI_BYTE, far, 1, in[0], 52, MPI_BYTE, far, 1, skip,
                         MPI_STATUS_IGNORE);
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, skip);
            MPI_Neighbor_allgather(&x, 1, MPI_INT, &y, 1, MPI_INT, ring);
            if (y != from) MPI_Abort(MPI_COMM_WORLD, 10);
            MPI_Neighbor_alltoall(&x, 1, MPI_INT, &y, 1, MPI_INT, ring);
        }
    } else if (!strcmp(phase, "distreorder")) {
        MPI_Comm ring;
        int from = (w + N - 1) % N, to = (w + 1) % N, r;
        MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &from, MPI_UNWEIGHTED, 1, &to,
                                       MPI_UNWEIGHTED, MPI_INFO_NULL, 1, &ring);
        MPI_Comm_rank(ring, &r);
#ifdef MPICH_VERSION
        if (r != w) MPI_Abort(MPI_COMM_WORLD, 9);
#endif
        for (int i = 0; i < rounds; i++)
            MPI_Sendrecv(out, 48, MPI_BYTE, (r + 1) % N, 1, in[0], 48, MPI_BYTE, (r + N - 1) % N,
                         1, ring, MPI_STATUS_IGNORE);
    } else if (!strcmp(phase, "splittype")) {
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -w, MPI_INFO_NULL, &node);
        int r, n;
        MPI_Comm_rank(node, &r);
        MPI_Comm_size(node, &n);
        if (n != N || r != N - 1 - w) MPI_Abort(MPI_COMM_WORLD, 3);
        for (int i = 0; i < rounds; i++) {
            MPI_Sendrecv(out, 40, MPI_BYTE, (r + 1) % N, 1, in[0], 40, MPI_BYTE,
                         (r + N - 1) % N, 1, node, MPI_STATUS_IGNORE);
            MPI_Bcast(in[0], 4, MPI_BYTE, 0, node);
        }
    } else if (!strcmp(phase, "f2c")) {
        MPI_Comm back = MPI_Comm_f2c(MPI_Comm_c2f(dup));
        if (back != dup) MPI_Abort(MPI_COMM_WORLD, 4);
        for (int i = 0; i < rounds; i++) {
            int x = w, y;
            MPI_Sendrecv(out, 12, MPI_BYTE, (w + 1) % N, 1, in[0], 12, MPI_BYTE,
                         (w + N - 1) % N, 1, back, MPI_STATUS_IGNORE);
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, back);
        }
    } else {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    if (w == 0) printf("ok\n");
    return 0;
}
