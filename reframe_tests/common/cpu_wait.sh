#!/bin/bash
# How long tasks have waited for a CPU: Linux's pressure stall information ("some" line of
# a cpu.pressure file, microseconds), with the clock and the online CPUs, one tab-separated
# "perfguard-cpu  NODE  CLOCK_US  WAIT_US  CPUS  SCOPE  BUSY_US" line. Read at the job's start and
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
printf 'perfguard-cpu\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(hostname -s)" "$(date +%s%6N)" \
    "$wait_us" "$(getconf _NPROCESSORS_ONLN)" "$scope" "$busy_us"
