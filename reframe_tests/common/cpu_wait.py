"""CPU contention during a job, from Linux's pressure stall information (PSI).

A step reads a ``cpu.pressure`` file on every node as the job starts and again after the
benchmark (``cpu_wait.sh``); the share of the job's wall time in which some task waited
for a CPU is that node's *CPU wait*. Where Slurm puts each job in its own cgroup (v2,
task/cgroup) it is the job's own tasks' wait, whichever cores they hold; elsewhere the
node's (``/proc/pressure/cpu``), which is close to the share of the node's CPUs with a
task waiting among those busy. Measured on a real 16-core node (docs/verdicts.md): two
busy ranks pinned to cores 0 and 1 read 0 % in their job's cgroup and in the node's;
one stray busy process on core 0 read 33 % and 50 %; strays on both cores 49.5 % and
100 %; 14 strays on the other 14 cores 0 % and 0.1 %. A job's cgroup reads at most about
half where every rank gets half its core (a task waits while the other runs), so its
bar is lower: ``max_job_cpu_wait`` 0.2 against ``max_cpu_wait`` 0.5 for the node's.

A benchmark whose ranks have their cores to themselves waits almost never; one sharing
them with other processes (a stray job, a runaway daemon, on virtual nodes the host's
other load) is slowed by them, not by the fabric: 60 real nights of the embedded cluster
on a busy host had inter-node latency 5–25× its baseline while the host's load was
10–15 on 2 CPUs (benchmarks/data/real-nights). Such a test case is ``disturbed``: its
figures are kept but neither judged nor used as anyone's baseline, and the verdict names
the node.

Where the job's own ranks need more CPUs than the node has (virtual nodes sharing a
host: 4, 8, 16 ranks on 2 cores), the job contends with itself and PSI's wait is its own
(100 % whether the host is quiet or not). There the CPU time is compared instead: what
the host's processes used during the job (``/proc/stat``) less what the job's own used
(Slurm accounting's TotalCPU of its benchmark steps) is what others took; more than ``max_cpu_wait``
of the host's CPUs taken by others disturbs the figures as a wait would.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from reframe_tests.common import fingerprints

SCRIPT = Path(__file__).with_name("cpu_wait.sh")
START, END = "cpu_wait_start.txt", "cpu_wait_end.txt"


class Reading(NamedTuple):
    clock_us: int
    wait_us: int | None
    cpus: int
    #: "job": the job's own cgroup's pressure; "node": the node's.
    scope: str = "node"
    #: The CPU time every process of the node (host) had used (/proc/stat), if read.
    busy_us: int | None = None
    #: How long a CPU quota on the step's cgroup or one above it had held tasks back.
    throttled_us: int = 0


def add_step(stage: Path) -> str:
    """The script staged beside the job; the start reading's step."""
    return fingerprints.node_step(stage, SCRIPT, START)


def end_step() -> str:
    """After the benchmark: the end reading, then the benchmark's exit status as the
    job's (the last command's status is the job's)."""
    return (f"perfguard_rc=$?; {fingerprints.node_command(SCRIPT.name, END)}; "
            f"exit $perfguard_rc")


def parse(text: str) -> dict[str, Reading]:
    """The script's lines → {node: Reading}; lines of another shape are ignored."""
    readings = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) not in (6, 7, 8) or parts[0] != "perfguard-cpu":
            continue
        _, node, clock, wait, cpus, scope, *more = parts
        busy, throttled = (more + ["", ""])[:2]
        if clock.isdigit() and cpus.isdigit():
            readings[node] = Reading(int(clock), int(wait) if wait.isdigit() else None,
                                     int(cpus), scope, int(busy) if busy.isdigit() else None,
                                     int(throttled) if throttled.isdigit() else 0)
    return readings


def shares(start: dict[str, Reading], end: dict[str, Reading]) -> dict[str, float]:
    """{node: share of the job some task waited for a CPU that another process held}
    where both ends have a wait.

    PSI counts a task a CPU quota throttles as waiting, though its CPU sat idle: a quota
    of 30 % of a core on two embedded nodes' slurmd read 70 % wait on both (115.5 s of
    164.9 s of osu_bibw, against the bar of 50 %), and the slow nodes' nights would have
    been stored disturbed, never judged. The time the quota held them back (the kernel's
    throttled time) is the node's own slowness, not contention: it is taken off."""
    found = {}
    for node, first in start.items():
        last = end.get(node)
        if last is None or first.wait_us is None or last.wait_us is None:
            continue
        elapsed = last.clock_us - first.clock_us
        waited = (last.wait_us - first.wait_us) - (last.throttled_us - first.throttled_us)
        if elapsed > 0:
            found[node] = round(max(0.0, waited / elapsed), 3)
    return found


def others_share(start: dict[str, Reading], end: dict[str, Reading],
                 job_cpu_s: float | None) -> float | None:
    """The share of the host's CPUs that processes other than the job's used during the
    job, where the nodes share one host (any node's readings are the host's), or None
    where it cannot be told (no /proc/stat reading, no accounting of the job)."""
    for node, first in sorted(start.items()):
        last = end.get(node)
        if job_cpu_s is None or last is None or first.busy_us is None or \
                last.busy_us is None or last.clock_us <= first.clock_us:
            continue
        others_us = last.busy_us - first.busy_us - job_cpu_s * 1e6
        return round(max(0.0, others_us / ((last.clock_us - first.clock_us) * first.cpus)), 3)
    return None


def read(stage: Path, job_cpu_s: float | None = None
         ) -> tuple[dict[str, float], dict[str, Reading], float | None]:
    """({node: CPU wait share}, {node: its reading at the start}, the share of the host's
    CPUs others took) from what the two steps wrote and the job's own CPU time."""

    def readings(name: str) -> dict[str, Reading]:
        path = stage / name
        return parse(path.read_text(errors="replace")) if path.exists() else {}

    start, end = readings(START), readings(END)
    return shares(start, end), start, others_share(start, end, job_cpu_s)


def disturbance(waits: dict[str, float], allowed: dict[str, float], own_cpus: int,
                readings: dict[str, Reading], shared_host: bool,
                others: float | None = None) -> str:
    """Why the job's figures are not the fabric's ("" where they are, or where nothing
    can be concluded: no PSI, or the job's own ranks (``own_cpus`` of them per node, or
    per host where the nodes share one) need more CPUs than the node has and what
    ``others`` took of them is unknown). ``allowed``: the most wait of each scope ("job",
    "node") that leaves the figures the fabric's; others may take as much as a node's
    wait may be."""
    cpus = min((r.cpus for r in readings.values()), default=0)
    if cpus and own_cpus > cpus:
        return taken_by_others(others, allowed["node"], own_cpus, cpus)
    busy = {node: share for node, share in waits.items()
            if node in readings and share > allowed[readings[node].scope]
            and own_cpus <= readings[node].cpus}
    if not busy:
        return ""
    named = ", ".join(f"{share:.0%} on {node}" for node, share in sorted(busy.items()))
    scope = readings[min(busy)].scope
    who, source = (("a task of the job", "the job's cgroup") if scope == "job"
                   else ("some task", "/proc/pressure/cpu"))
    where = "the host the nodes share" if shared_host else "the node"
    return (f"CPUs contended: {who} waited for a CPU during the job, {named} (Linux PSI, "
            f"{source}; allowed {allowed[scope]:.0%}): other processes on {where} shared "
            f"the benchmark's CPUs, so its figures are not the fabric's and are not judged "
            f"(look for what else ran there, e.g. `top -b -n 1`)")


def taken_by_others(others: float | None, allowed: float, own_cpus: int, cpus: int) -> str:
    """The reason where the job's own ranks outnumber the CPUs: what others took."""
    if others is None or others <= allowed:
        return ""
    return (f"CPUs contended: other processes used {others:.0%} of the host's {cpus} CPUs "
            f"during the job (/proc/stat less the job's own CPU time from Slurm accounting; "
            f"allowed {allowed:.0%}; the job's {own_cpus} ranks outnumber the CPUs, so their "
            f"own wait says nothing): its figures are not the fabric's and are not judged "
            f"(look for what else ran there, e.g. `top -b -n 1`)")
