/* Worker for pvm_master: ROUNDS times receives a request with pvm_recv(-1, 1), runs
 * pvm_task(MS ms) and replies (tag 2); then receives the multicast (tag 4) and answers
 * with pvm_psend (tag 3). Its first reply carries (second int) its start-up work in us:
 * its CPU time before its first pvm_recv, outside pvm_mytid. */
#include <pvm3.h>
#include <stdlib.h>
#include "spin.h"

__attribute__((noinline)) void pvm_task(double ms) { spin_ms(ms); }

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5, data[4], reply[2] = {7, 8}, buf[8] = {0};
    double ms = argc > 2 ? atof(argv[2]) : 0;
    double before_mytid = thread_cpu_ms();
    pvm_mytid();
    double in_mytid = thread_cpu_ms() - before_mytid;
    int parent = pvm_parent();
    reply[1] = (int)((thread_cpu_ms() - in_mytid) * 1000);
    for (int r = 0; r < rounds; r++) {
        if (pvm_recv(-1, 1) < 0 || pvm_upkint(data, 4, 1) < 0 || data[0] != 1) return 1;
        if (ms > 0) pvm_task(ms);
        pvm_initsend(PvmDataDefault);
        pvm_pkint(reply, 2, 1);
        pvm_send(parent, 2);
        reply[1] = 0;
    }
    if (pvm_recv(parent, 4) < 0) return 1;
    pvm_psend(parent, 3, buf, 8, PVM_INT);
    pvm_exit();
    return 0;
}
