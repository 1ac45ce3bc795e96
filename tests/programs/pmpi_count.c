/* An independent count of the messages a program sends, through MPI's profiling
 * interface: preloaded into each rank (LD_PRELOAD), it wraps the point-to-point send
 * calls and, at MPI_Finalize, writes "sends N" to $PMPI_COUNT_DIR/rank-R.txt (R: rank
 * in MPI_COMM_WORLD). Each wrapped call is one message, as the tracer counts them:
 * MPI_Send, MPI_Ssend, MPI_Bsend, MPI_Rsend, MPI_Isend, MPI_Issend, MPI_Sendrecv and
 * MPI_Sendrecv_replace. Nothing here shares code or data with the tracer. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static long sends;

int MPI_Send(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c) {
    sends++;
    return PMPI_Send(b, n, t, d, g, c);
}
int MPI_Ssend(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c) {
    sends++;
    return PMPI_Ssend(b, n, t, d, g, c);
}
int MPI_Bsend(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c) {
    sends++;
    return PMPI_Bsend(b, n, t, d, g, c);
}
int MPI_Rsend(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c) {
    sends++;
    return PMPI_Rsend(b, n, t, d, g, c);
}
int MPI_Isend(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r) {
    sends++;
    return PMPI_Isend(b, n, t, d, g, c, r);
}
int MPI_Issend(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r) {
    sends++;
    return PMPI_Issend(b, n, t, d, g, c, r);
}
int MPI_Sendrecv(const void *sb, int sn, MPI_Datatype st, int d, int sg, void *rb, int rn,
                 MPI_Datatype rt, int s, int rg, MPI_Comm c, MPI_Status *status) {
    sends++;
    return PMPI_Sendrecv(sb, sn, st, d, sg, rb, rn, rt, s, rg, c, status);
}
int MPI_Sendrecv_replace(void *b, int n, MPI_Datatype t, int d, int sg, int s, int rg,
                         MPI_Comm c, MPI_Status *status) {
    sends++;
    return PMPI_Sendrecv_replace(b, n, t, d, sg, s, rg, c, status);
}

int MPI_Finalize(void) {
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *dir = getenv("PMPI_COUNT_DIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank-%d.txt", dir, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "sends %ld\n", sends);
            fclose(f);
        }
    }
    return PMPI_Finalize();
}
