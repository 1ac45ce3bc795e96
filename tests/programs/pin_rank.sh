#!/bin/sh
# pin_rank.sh CPUS PROGRAM [ARGS...]: run an MPI rank on the CPU that the comma-separated
# list CPUS gives its rank (rank from Open MPI's or MPICH's environment).
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
cpu=$(echo "$1" | cut -d, -f$((rank + 1)))
shift
exec taskset -c "$cpu" "$@"
