#!/bin/bash
# How long tasks have waited for a CPU: Linux's pressure stall information ("some" line of
# a cpu.pressure file, microseconds), with the clock and the online CPUs, one tab-separated
# "perfguard-cpu  NODE  CLOCK_US  WAIT_US  CPUS  SCOPE  BUSY_US  THROTTLED_US" line. Read at the job's start and
# end (cpu_wait.py). SCOPE job: the job's own cgroup (cgroup v2, Slurm's task/cgroup puts
# each step in .../job_ID/step_N): the time the job's tasks waited, whichever CPUs they
# hold. SCOPE node: /proc/pressure/cpu, the node's (close to the share of its CPUs that
# had a task waiting: a stray process on one of 128 cores barely shows there). A kernel
# without PSI (RHEL boots it off: psi=1) prints no wait and nothing is concluded.
# $PERFGUARD_PROCFS and $PERFGUARD_SYSFS stand in for /proc and /sys (tests).
proc=${PERFGUARD_PROCFS:-/proc}
sys=${PERFGUARD_SYSFS:-/sys}
cgroup=$(sed -n 's/^0:://p' "$proc/self/cgroup" 2>/dev/null)
job=${cgroup%%/step_*}
if [[ $cgroup == */job_*/step_* && -r "$sys/fs/cgroup$job/cpu.pressure" ]]; then
    file="$sys/fs/cgroup$job/cpu.pressure" scope=job
else
    file="$proc/pressure/cpu" scope=node
fi
wait_us=$(sed -n 's/^some .*total=\([0-9]*\).*/\1/p' "$file" 2>/dev/null)
# The CPU time all processes of the host used (/proc/stat: user, nice, system, irq,
# softirq, steal), in microseconds: less the job's own (Slurm accounting), what others
# took, where the job's ranks outnumber the CPUs and PSI's wait is theirs (cpu_wait.py).
busy_us=$(awk -v hz="$(getconf CLK_TCK)" '/^cpu / {
    printf "%.0f", ($2 + $3 + $4 + $7 + $8 + $9) * 1000000 / hz }' "$proc/stat" 2>/dev/null)
# How long a CPU quota held this step's tasks back (the kernel's throttled time of its CPU
# cgroup or the most of any cgroup above it: cgroup v1 cpu.stat throttled_time in ns, v2
# throttled_usec): PSI counts a throttled task as waiting for a CPU, but no other process
# took the CPU; a quota on the node (systemd's CPUQuota on slurmd, a throttled node) is the
# node's own slowness, to be judged (cpu_wait.py).
throttled_us=0
while IFS=: read -r _ controllers path; do
    if [[ $controllers == "" ]]; then
        root="$sys/fs/cgroup" key=throttled_usec scale=1
        [[ -d "$root/unified" ]] && root="$root/unified"
    elif [[ ,$controllers, == *,cpu,* ]]; then
        root="$sys/fs/cgroup/$controllers" key=throttled_time scale=1000
        [[ -d $root ]] || root="$sys/fs/cgroup/cpu"
    else
        continue
    fi
    while :; do
        value=$(sed -n "s/^$key \([0-9]*\)$/\1/p" "$root$path/cpu.stat" 2>/dev/null)
        (( ${value:-0} / scale > throttled_us )) && throttled_us=$(( value / scale ))
        [[ $path == / || -z $path ]] && break
        path=$(dirname "$path")
    done
done < "$proc/self/cgroup"
printf 'perfguard-cpu\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(hostname -s)" "$(date +%s%6N)" \
    "$wait_us" "$(getconf _NPROCESSORS_ONLN)" "$scope" "$busy_us" "$throttled_us"
