#!/bin/bash
# perfguard environment fingerprint of the node this runs on, one tab-separated
# "perfguard-fp  NODE  KEY  VALUE" line per fact. Every probe is optional: a missing
# tool or file leaves its fact out and never fails the job.
node=$(hostname -s)
fp() { [ -n "$2" ] && printf 'perfguard-fp\t%s\t%s\t%s\n' "$node" "$1" "$2"; return 0; }

fp kernel "$(uname -r)"
fp os "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
fp ofed "$(ofed_info -s 2>/dev/null | tr -d ':')"
fp rdma_core "$(dpkg-query -W -f='${Version}' rdma-core 2>/dev/null \
                || rpm -q --qf '%{VERSION}' rdma-core 2>/dev/null)"
for dev in /sys/class/infiniband/*; do
    [ -d "$dev" ] || continue
    name=${dev##*/}
    fp "hca.$name.model" "$(cat "$dev/hca_type" 2>/dev/null)"
    fp "hca.$name.board" "$(cat "$dev/board_id" 2>/dev/null)"
    fp "hca.$name.fw" "$(cat "$dev/fw_ver" 2>/dev/null)"
    for port in "$dev"/ports/*; do
        [ -d "$port" ] || continue
        fp "hca.$name.port${port##*/}.state" "$(cat "$port/state" 2>/dev/null)"
        fp "hca.$name.port${port##*/}.rate" "$(cat "$port/rate" 2>/dev/null)"
        fp "hca.$name.port${port##*/}.link_layer" "$(cat "$port/link_layer" 2>/dev/null)"
    done
done
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null |
    while IFS=, read -r index model driver; do
        fp "gpu.${index// /}.model" "${model# }"
        fp gpu_driver "${driver# }"
    done
fi
fp mpi "$(mpirun --version 2>/dev/null | head -n 1)"
fp ucx "$(ucx_info -v 2>/dev/null | head -n 1 | sed 's/^# *//')"
exit 0
