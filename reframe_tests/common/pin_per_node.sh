#!/bin/bash
# pin_per_node.sh MAPS PROGRAM [ARGS...]: one core list per node of the job step, in
# Slurm's node order ("1,0;0,1"): local rank R of node N runs on core R of list N, what
# `srun --cpu-bind=map_cpu` does with one list for every node. For nodes that share one
# host's CPUs (virtual nodes), where one list would stack every node's ranks on one CPU.
# The mask printed is the kernel's, read back after binding, in srun's verbose format.
set -euo pipefail
IFS=';' read -ra node_maps <<< "$1"
shift
IFS=',' read -ra cores <<< "${node_maps[$SLURM_NODEID]}"
core=${cores[$((SLURM_LOCALID % ${#cores[@]}))]}
taskset -p -c "$core" $$ > /dev/null
mask=$(awk '/^Cpus_allowed:/ {gsub(",", "", $2); print $2}' /proc/$$/status)
printf -v mask '%x' "$((16#$mask))"
echo "cpu-bind=PER_NODE_MAP - ${SLURMD_NODENAME}, task ${SLURM_PROCID} ${SLURM_LOCALID}" \
     "[$$]: mask 0x$mask set" >&2
exec "$@"
