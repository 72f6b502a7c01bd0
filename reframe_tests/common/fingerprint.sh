#!/bin/bash
# perfguard environment fingerprint of the node this runs on, one tab-separated
# "perfguard-fp  NODE  KEY  VALUE" line per fact. Every probe is optional: a missing
# tool or file leaves its fact out and never fails the job. $PERFGUARD_SYSFS stands in
# for /sys (tests: a recorded tree).
node=$(hostname -s)
sys=${PERFGUARD_SYSFS:-/sys}
fp() { [ -n "$2" ] && printf 'perfguard-fp\t%s\t%s\t%s\n' "$node" "$1" "$2"; return 0; }
# PCIe link of a device, as trained against its maximum (a link that trained below it is
# the silent cause of many bandwidth drops after hardware work)
pcie() {
    fp "$1.pcie_speed" "$(cat "$2/current_link_speed" 2>/dev/null)"
    fp "$1.pcie_width" "$(cat "$2/current_link_width" 2>/dev/null)"
    fp "$1.pcie_max_speed" "$(cat "$2/max_link_speed" 2>/dev/null)"
    fp "$1.pcie_max_width" "$(cat "$2/max_link_width" 2>/dev/null)"
}

fp kernel "$(uname -r)"
# one per booted kernel: nodes that print the same one share a host (virtual nodes)
fp boot_id "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
fp os "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
fp ofed "$(ofed_info -s 2>/dev/null | tr -d ':')"
fp rdma_core "$(dpkg-query -W -f='${Version}' rdma-core 2>/dev/null \
                || rpm -q --qf '%{VERSION}' rdma-core 2>/dev/null)"
for dev in "$sys"/class/infiniband/*; do
    [ -d "$dev" ] || continue
    name=${dev##*/}
    fp "hca.$name.model" "$(cat "$dev/hca_type" 2>/dev/null)"
    fp "hca.$name.board" "$(cat "$dev/board_id" 2>/dev/null)"
    fp "hca.$name.fw" "$(cat "$dev/fw_ver" 2>/dev/null)"
    pcie "hca.$name" "$dev/device"
    for port in "$dev"/ports/*; do
        [ -d "$port" ] || continue
        fp "hca.$name.port${port##*/}.state" "$(cat "$port/state" 2>/dev/null)"
        fp "hca.$name.port${port##*/}.rate" "$(cat "$port/rate" 2>/dev/null)"
        fp "hca.$name.port${port##*/}.link_layer" "$(cat "$port/link_layer" 2>/dev/null)"
    done
done
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,vbios_version,persistence_mode,ecc.mode.current,ecc.errors.uncorrected.aggregate.total,mig.mode.current \
               --format=csv,noheader 2>/dev/null |
    while IFS=, read -r index model bus driver vbios persistence ecc uncorrected mig; do
        gpu="gpu.${index// /}"
        bus=$(echo "${bus# }" | tr 'A-F' 'a-f')
        fp "$gpu.model" "${model# }"
        fp "$gpu.bus_id" "$bus"
        fp "$gpu.vbios" "${vbios# }"
        fp "$gpu.persistence" "${persistence# }"
        fp "$gpu.ecc" "${ecc# }"
        fp "$gpu.ecc_uncorrected" "${uncorrected# }"
        fp "$gpu.mig" "${mig# }"
        pcie "$gpu" "$sys/bus/pci/devices/${bus: -12}"
        fp gpu_driver "${driver# }"
    done
    fp cuda_driver "$(nvidia-smi -q 2>/dev/null | sed -n 's/^CUDA Version *: *//p' | head -n 1)"
    for module in nvidia_peermem gdrdrv; do
        if [ -d "$sys/module/$module" ]; then fp "$module" loaded; else fp "$module" "not loaded"; fi
    done
fi
fp mpi "$(mpirun --version 2>/dev/null | head -n 1)"
fp ucx "$(ucx_info -v 2>/dev/null | head -n 1 | sed 's/^# *//')"
exit 0
