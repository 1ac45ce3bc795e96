/* Communicators made from groups, and everything derived from them, used at once.
 * 4 ranks. g = Group_incl(world's group, {3, 1, 2}); sub = Comm_create(WORLD, g) (world
 * rank 0 gets MPI_COMM_NULL), so sub's ranks 0, 1, 2 are world ranks 3, 1, 2. dup =
 * Comm_dup(sub); half = Comm_split(dup, rank == 2 ? MPI_UNDEFINED : 0, -rank): world 1
 * then world 3. cg = Comm_create_group(WORLD, Group_excl(world's group, {0}), 77): world
 * ranks 1, 2, 3 in order. cart = Cart_create(WORLD, 1 dim of 3, reorder 1): world 0, 1, 2
 * (world rank 3 gets MPI_COMM_NULL; neither library reorders). Then ROUNDS times: a ring
 * r -> r + 1 on sub (16 bytes), r -> r + 2 on dup (8 bytes), an exchange on half (24
 * bytes), a shift r -> r + 1 on cart (40 bytes, the last rank to MPI_PROC_NULL), an
 * Allreduce on sub, an Allreduce and a Bcast on cg, a Barrier on half.
 * Known answer (world ranks, per round): 0->1 40 B; 1->2 16 + 40 B; 1->3 8 + 24 B; 2->1
 * 8 B; 2->3 16 B; 3->1 16 + 24 B; 3->2 8 B; 11 collective exits. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) MPI_Abort(MPI_COMM_WORLD, 1);
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    MPI_Group wg, g, g2;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int incl[3] = {3, 1, 2}, excl[1] = {0};
    MPI_Group_incl(wg, 3, incl, &g);
    MPI_Group_excl(wg, 1, excl, &g2);
    MPI_Comm sub = MPI_COMM_NULL, dup = MPI_COMM_NULL, half = MPI_COMM_NULL,
             cg = MPI_COMM_NULL, cart;
    MPI_Comm_create(MPI_COMM_WORLD, g, &sub);
    if (rank != 0) {
        int r;
        MPI_Comm_rank(sub, &r);
        MPI_Comm_dup(sub, &dup);
        MPI_Comm_split(dup, r == 2 ? MPI_UNDEFINED : 0, -r, &half);
        MPI_Comm_create_group(MPI_COMM_WORLD, g2, 77, &cg);
    }
    int dims[1] = {3}, periods[1] = {0};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 1, &cart);
    char out[40] = {0}, in[40];
    for (int i = 0; i < rounds; i++) {
        if (sub != MPI_COMM_NULL) {
            int r;
            MPI_Comm_rank(sub, &r);
            MPI_Sendrecv(out, 16, MPI_BYTE, (r + 1) % 3, i, in, 16, MPI_BYTE, (r + 2) % 3, i,
                         sub, MPI_STATUS_IGNORE);
            MPI_Sendrecv(out, 8, MPI_BYTE, (r + 2) % 3, i, in, 8, MPI_BYTE, (r + 1) % 3, i,
                         dup, MPI_STATUS_IGNORE);
            if (half != MPI_COMM_NULL) {
                int h;
                MPI_Comm_rank(half, &h);
                MPI_Sendrecv(out, 24, MPI_BYTE, 1 - h, 3, in, 24, MPI_BYTE, 1 - h, 3, half,
                             MPI_STATUS_IGNORE);
            }
            int x = rank, y;
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, sub);
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, cg);
            MPI_Bcast(in, 4, MPI_BYTE, 0, cg);
            if (half != MPI_COMM_NULL) MPI_Barrier(half);
        }
        if (cart != MPI_COMM_NULL) {
            int src, dst;
            MPI_Cart_shift(cart, 0, 1, &src, &dst);
            MPI_Sendrecv(out, 40, MPI_BYTE, dst, 9, in, 40, MPI_BYTE, src, 9, cart,
                         MPI_STATUS_IGNORE);
        }
    }
    MPI_Group_free(&g);
    MPI_Group_free(&g2);
    MPI_Group_free(&wg);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
