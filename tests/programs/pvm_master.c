/* PVM manager/worker: spawns NWORKERS pvm_worker tasks; each round sends every worker 4
 * ints (pvm_send, tag 1) and takes one 2-int reply from each with a wildcard pvm_recv(-1, 2).
 * Then one pvm_mcast (tag 4) to all workers and one pvm_precv (tag 3, 8 PVM_INTs) per worker.
 * Workers spin MS ms (argument 3, default 0) in pvm_task before each reply.
 * Known answer: NWORKERS*ROUNDS sends and wildcard receives at the master, whose sources
 * are the worker task ids, each exactly ROUNDS times; critical path ROUNDS*MS in pvm_task
 * after the start-up work of the slowest worker to start (each tells it in its first
 * reply; printed as `workers' start-up work max_us N`), and a few us a round. */
#include <pvm3.h>
#include <stdio.h>
#include <stdlib.h>

static int nw, tids[32];

static int is_worker(int tid) {
    for (int w = 0; w < nw; w++) if (tids[w] == tid) return 1;
    return 0;
}

static int fail(const char *what) {
    fprintf(stderr, "pvm_master: %s\n", what);
    pvm_exit();
    return 1;
}

int main(int argc, char **argv) {
    int rounds = argc > 2 ? atoi(argv[2]) : 5, data[4] = {1, 2, 3, 4}, reply[2], buf[8];
    int startup_max_us = 0;
    nw = argc > 1 ? atoi(argv[1]) : 2;
    char rounds_arg[16], ms_arg[16];
    char *wargv[] = {rounds_arg, ms_arg, NULL};
    if (nw > 32) nw = 32;
    snprintf(rounds_arg, sizeof rounds_arg, "%d", rounds);
    snprintf(ms_arg, sizeof ms_arg, "%s", argc > 3 ? argv[3] : "0");
    if (pvm_mytid() < 0) { fprintf(stderr, "no pvmd\n"); return 1; }
    if (pvm_spawn("pvm_worker", wargv, PvmTaskDefault, "", nw, tids) != nw) return fail("spawn failed");
    for (int r = 0; r < rounds; r++) {
        for (int w = 0; w < nw; w++) {
            pvm_initsend(PvmDataDefault);
            pvm_pkint(data, 4, 1);
            if (pvm_send(tids[w], 1) < 0) return fail("pvm_send failed");
        }
        for (int w = 0; w < nw; w++) {
            int len, tag, src, bufid = pvm_recv(-1, 2);
            if (bufid < 0 || pvm_bufinfo(bufid, &len, &tag, &src) < 0) return fail("pvm_recv failed");
            if (len != 8 || tag != 2 || !is_worker(src)) return fail("bad reply");
            pvm_upkint(reply, 2, 1);
            if (reply[1] > startup_max_us) startup_max_us = reply[1];
        }
    }
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&rounds, 1, 1);
    if (pvm_mcast(tids, nw, 4) < 0) return fail("pvm_mcast failed");
    for (int w = 0; w < nw; w++) {
        int rtid, rtag, rlen;
        if (pvm_precv(-1, 3, buf, 8, PVM_INT, &rtid, &rtag, &rlen) < 0) return fail("pvm_precv failed");
        if (rtag != 3 || rlen != 32 || !is_worker(rtid)) return fail("bad pvm_precv result"); /* rlen in bytes */
    }
    pvm_exit();
    printf("workers' start-up work max_us %d\n", startup_max_us);
    printf("ok\n");
    return 0;
}
