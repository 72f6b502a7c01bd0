#!/bin/bash
# The GPU this rank computes on, as CUDA programs pick it (device local-rank modulo the
# visible devices, the convention of OMB and the MPI libraries), named by its PCI bus id:
# one tab-separated "perfguard-gpu PROCID LOCALID HOST DEVICE BUS_ID" line per rank.
IFS=, read -ra visible <<< "${CUDA_VISIBLE_DEVICES:-}"
local_rank=${SLURM_LOCALID:-0}
device=none
bus=none
if [ ${#visible[@]} -gt 0 ]; then
    device=${visible[$((local_rank % ${#visible[@]}))]}
    bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i "$device" 2>/dev/null \
          | head -n 1 | tr -d ' ')
fi
printf 'perfguard-gpu\t%s\t%s\t%s\t%s\t%s\n' "${SLURM_PROCID:-0}" "$local_rank" \
    "$(hostname -s)" "$device" "${bus:-unknown}"
