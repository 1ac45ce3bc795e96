#!/bin/sh
# Usage: run_pvm.sh BINDIR -- COMMAND ARGS...
# Starts a private PVM daemon (as root: PVM_ALLOW_ROOT) whose tasks come from BINDIR, runs
# COMMAND, halts the daemon, and exits with COMMAND's status.
set -u
bindir=$(cd "$1" && pwd); shift
[ "${1:-}" = "--" ] && shift
export PVM_ROOT=/usr/lib/pvm3 PVM_ALLOW_ROOT=1
PVM_TMP=$(mktemp -d /tmp/pvm.XXXXXX); export PVM_TMP
host=$(hostname)
printf '* ep=%s wd=%s\n%s\n' "$bindir" "$PVM_TMP" "$host" > "$PVM_TMP/hostfile"
pvmd "$PVM_TMP/hostfile" > "$PVM_TMP/pvmd.out" 2>&1 &
i=0
until ls "$PVM_TMP"/pvmd.* >/dev/null 2>&1 && echo conf | timeout 5 pvm >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -gt 100 ] && { echo "pvmd did not start" >&2; cat "$PVM_TMP/pvmd.out" >&2; exit 1; }
    sleep 0.1
done
timeout 60 "$@"; status=$?
echo halt | timeout 10 pvm >/dev/null 2>&1
sleep 0.2
pkill -f "pvmd3? $PVM_TMP/hostfile" 2>/dev/null
rm -rf "$PVM_TMP"
exit $status
