#!/bin/bash
# How long tasks on this node have waited for a CPU: Linux's pressure stall information
# ("some" line of /proc/pressure/cpu, microseconds since boot), with the clock and the
# online CPUs, one tab-separated "perfguard-cpu  NODE  CLOCK_US  WAIT_US  CPUS" line. Read
# at the job's start and end (cpu_wait.py): the share of the job some task waited says
# whether other processes shared the CPUs the benchmark ran on. A kernel without PSI
# (RHEL boots it off: psi=1) prints no wait and nothing is concluded. $PERFGUARD_PROCFS
# stands in for /proc (tests: a recorded quiet node).
proc=${PERFGUARD_PROCFS:-/proc}
wait_us=$(sed -n 's/^some .*total=\([0-9]*\).*/\1/p' "$proc/pressure/cpu" 2>/dev/null)
printf 'perfguard-cpu\t%s\t%s\t%s\t%s\n' "$(hostname -s)" "$(date +%s%6N)" "$wait_us" \
    "$(getconf _NPROCESSORS_ONLN)"
