#!/bin/sh
# Usage: run_pvm.sh BINDIR -- COMMAND ARGS...
# Runs COMMAND inside a private, single-host PVM: starts a pvmd (a child of this script)
# whose spawned tasks are looked up in BINDIR, runs COMMAND (at most RUN_PVM_TIMEOUT s,
# default 60), halts the pvmd and exits with COMMAND's status (124 on timeout).
# As root pvmd and every task need PVM_ALLOW_ROOT; PVM_TMP keeps the daemon's address
# file, socket and log (pvml.UID, which also gets the tasks' stdout) private to this run.
set -u
[ $# -ge 3 ] && [ "$2" = "--" ] || { echo "usage: $0 BINDIR -- COMMAND ARGS..." >&2; exit 2; }
bindir=$(cd "$1" && pwd) || exit 2
shift 2
export PVM_ROOT=/usr/lib/pvm3 PVM_ALLOW_ROOT=1
PVM_TMP=$(mktemp -d /tmp/pvm.XXXXXX) || exit 2
export PVM_TMP
pvmd_pid= cmd_pid=

# Running and not a zombie (kill -0 also succeeds on a zombie child not yet waited for).
alive() { case $(ps -o stat= -p "$1" 2>/dev/null) in ''|Z*) return 1 ;; esac; }

cleanup() {
    if [ -n "$cmd_pid" ] && alive "$cmd_pid"; then
        kill -TERM "$cmd_pid" 2>/dev/null; sleep 0.5; kill -KILL "$cmd_pid" 2>/dev/null
    fi
    if [ -n "$pvmd_pid" ] && alive "$pvmd_pid"; then
        # The console's halt also SIGTERMs the console itself: keep the shell's
        # "Terminated" note out of our stderr.
        (echo halt | timeout 10 pvm) >/dev/null 2>&1
        i=0
        while alive "$pvmd_pid" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        # $pvmd_pid is the timeout(1) wrapping pvmd: TERM is passed on to pvmd.
        alive "$pvmd_pid" && kill -TERM "$pvmd_pid" 2>/dev/null && sleep 1
        if alive "$pvmd_pid"; then
            for p in $(ps -o pid= --ppid "$pvmd_pid"); do kill -KILL "$p" 2>/dev/null; done
            kill -KILL "$pvmd_pid" 2>/dev/null
        fi
        wait "$pvmd_pid" 2>/dev/null
    fi
    rm -rf "$PVM_TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# "*" sets the defaults, which also apply to the local (master) host: no host line needed.
printf '* ep=%s wd=%s\n' "$bindir" "$PVM_TMP" > "$PVM_TMP/hostfile"
# Safety net: pvmd never outlives the time budget by much, even if this shell is SIGKILLed.
timeout -k 2 $((${RUN_PVM_TIMEOUT:-60} + 30)) pvmd "$PVM_TMP/hostfile" > "$PVM_TMP/pvmd.out" 2>&1 &
pvmd_pid=$!

# pvmd prints its socket path on stdout and writes pvmd.UID once it accepts tasks.
# (Do not probe with the pvm console: it starts a daemon of its own if none is there.)
i=0
until [ -s "$PVM_TMP/pvmd.$(id -u)" ] && grep -q pvmtmp "$PVM_TMP/pvmd.out"; do
    if ! alive "$pvmd_pid" || [ $i -ge 100 ]; then
        echo "run_pvm.sh: pvmd did not start" >&2
        cat "$PVM_TMP/pvmd.out" "$PVM_TMP"/pvml.* >&2 2>/dev/null
        exit 1
    fi
    sleep 0.1; i=$((i + 1))
done

# In the background so that INT/TERM reach our traps at once; keep our stdin for it.
exec 3<&0
timeout -k 5 "${RUN_PVM_TIMEOUT:-60}" "$@" <&3 3<&- &
cmd_pid=$!
wait "$cmd_pid"
status=$?
cmd_pid=
[ $status -ne 0 ] && { echo "run_pvm.sh: command exited $status; pvmd log:" >&2; cat "$PVM_TMP"/pvml.* >&2 2>/dev/null; }
exit $status
