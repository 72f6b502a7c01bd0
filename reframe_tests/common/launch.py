"""How every perfguard check is launched and how its job ended: srun options and core
binding from the partition, the shape a partition can hold, the allocation the job
recorded, and Slurm's account of the job and its steps (MeasuredCheck calls these)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import reframe.utility.osext as osext
import reframe.utility.typecheck as typ
from reframe.core.launchers import JobLauncher
from reframe.utility import nodelist_expand

from reframe_tests.common import time_limit

#: What srun prints when slurmctld tells it a node of the step was lost.
NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")
#: srun's account of a task that died (``srun: error: node1: task 0: Segmentation fault
#: (core dumped)``; ``tasks 0-3: Exited with exit code 1``), slurm src/srun ``_handle_msg``.
TASK_DIED = re.compile(r"^srun: error: (?P<node>[^:\s]+): tasks? (?P<tasks>[\d,-]+): "
                       r"(?P<how>.+?)\s*$", re.M)
#: What --kill-on-bad-exit did to the other ranks, not a cause.
KILLED_AFTER = ("Killed", "Terminated")
#: Slurm states that end a job or a job step without success.
UNSUCCESSFUL = ("FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "CANCELLED", "BOOT_FAIL",
                "DEADLINE", "PREEMPTED")
#: Name of the job steps perfguard runs around a benchmark (fingerprint, free-port and
#: listening probes, an interfering pair's load): they may fail or be stopped by design,
#: so their state is not the benchmark's.
HELPER_STEP = "perfguard-helper"
#: Binds each rank to its node's own core list (PerNodeSrun).
PIN_PER_NODE = Path(__file__).with_name("pin_per_node.sh")
#: Where a job with per-node core maps writes its allocation ($SLURM_JOB_NODELIST).
ALLOCATION_FILE = "allocation.txt"


def shape_problem(partition, num_tasks: int, tasks_per_node: int | None,
                  cpus_per_task: int | None, nodes_available: int) -> str | None:
    """Why the partition cannot hold the job's shape ("needs 32 nodes, partition … has 16"),
    or None: skipped with the reason, never sent to sbatch to fail there ("Requested node
    configuration is not available")."""
    per_node = tasks_per_node or 1
    nodes_needed = -(-num_tasks // per_node)
    nodes = node_limit(partition, nodes_available)
    if nodes is not None and nodes_needed > nodes:
        return f"needs {nodes_needed} nodes, {node_limit_source(partition, nodes_available)} " \
               f"{nodes}"
    cores = partition.processor.num_cpus
    cores_needed = per_node * (cpus_per_task or 1)
    if cores is not None and cores_needed > cores:
        return (f"needs {cores_needed} cores per node ({per_node} tasks), the nodes of "
                f"{partition.fullname} have {cores}")
    return None


def node_limit(partition, nodes_available: int) -> int | None:
    """How many nodes a job of this run can get: the partition's, or fewer if given."""
    nodes = partition.extras.get("num_nodes")
    if nodes_available:
        return min(nodes or nodes_available, nodes_available)
    return nodes


def node_limit_source(partition, nodes_available: int) -> str:
    return "this run may use" if nodes_available else f"partition {partition.fullname} has"


def pinned(cpu_bind: str) -> bool:
    """An explicit core map: the step must own the whole node (see srun_options)."""
    return cpu_bind.startswith(("map_cpu", "mask_cpu"))


#: A pinned job's steps own their whole nodes: Slurm 23.11 and later give srun the job's
#: SLURM_CPUS_PER_TASK (and SLURM_TRES_PER_TASK), which imply --exact and override
#: --whole, so a step got one core and refused a map naming another (25.11, embedded
#: cluster: "CPU binding outside of job step allocation, allocated CPUs are: 0x1").
#: 22.05's srun did not read them; unsetting them there changes nothing.
WHOLE_NODE_STEPS = "unset SLURM_CPUS_PER_TASK SLURM_TRES_PER_TASK"


def whole_node_steps(cpu_bind: str) -> list[str]:
    """The job-script line that lets a pinned job's steps own their nodes (none where
    the check does not pin)."""
    return [WHOLE_NODE_STEPS] if pinned(cpu_bind) else []


def record_allocation_command() -> str:
    """The job writes its allocation as Slurm gave it: ReFrame's nodelist comes from a
    poll and has been seen to name one node of a two-node job."""
    return f'echo "$SLURM_JOB_NODELIST" > {ALLOCATION_FILE}'


def recorded_allocation(stage: Path) -> list[str]:
    recorded = stage / ALLOCATION_FILE
    allocation = recorded.read_text().strip() if recorded.exists() else ""
    return nodelist_expand(allocation) if allocation else []


def srun_options(partition, uses_mpi: bool, extra: list[str], cpu_bind: str) -> list[str]:
    """The partition's MPI launch options, the check's extras and a verbose binding (the
    mask srun reports is the proof the sanity checks read). An MPI step ends when one rank
    dies (``--kill-on-bad-exit=1``): the others would wait in MPI until the time limit,
    holding exclusive nodes and the partition's measurement slot."""
    options = [*partition.extras.get("srun_options", []), "--kill-on-bad-exit=1"] \
        if uses_mpi else []
    return [*options, *extra, f"--cpu-bind=verbose,{cpu_bind}"]


def per_node_launcher(options: list[str], node_cores: list[list[int]],
                      program: str) -> PerNodeSrun:
    """One step whose nodes each get their own core map (named after the program, as
    srun names a plain step)."""
    common = [o for o in options if not o.startswith("--cpu-bind=")]
    return PerNodeSrun([*common, f"--job-name={program}"], node_cores)


def node_core_maps(nodes: list[str], node_cores: list[list[int]]) -> dict[str, list[int]]:
    """Host → the cores its ranks must own, where each node has its own map."""
    if not node_cores:
        return {}
    return dict(zip(sorted(nodes, key=nodelist_order), node_cores))


def job_end_problem(job, stagedir: str, steps_must_succeed: bool) -> str | None:
    """A complete table followed by a crash is not a pass: the job, and each of its
    benchmark steps, must end COMPLETED with exit code 0. A node lost mid-run is named
    as Slurm saw it ("node node1 failed (NODE_FAIL)"; on 25.11 "node node2 failed (not
    responding; rank 0 on node2: Killed)")."""
    state = job.state or ""
    stderr = os.path.join(stagedir, job.stderr)
    lost = lost_nodes(stderr)
    if "NODE_FAIL" in state or lost:
        nodes = lost or down_nodes(job.nodelist or [])
        return (f"node {','.join(nodes) or '(unknown)'} failed "
                f"({state if 'NODE_FAIL' in state else 'srun: Node failure'})")
    if (state.split() or [""])[0] == "TIMEOUT" or reached_time_limit(stderr):
        return (f"job {job.jobid} reached its time limit ({limit_said(job.time_limit)}): "
                f"a step hung or ran far slower than its sizes and iterations allow "
                f"(reframe_tests/common/time_limit.py; -S time_limit=… to give it more)")
    died = first_rank_that_died(stderr)
    failed = (state.split() or [""])[0] in UNSUCCESSFUL or (job.exitcode or 0) != 0
    if failed and died and died.endswith(": Killed") and (
            gone := nodes_stopping(job.nodelist or [])):
        return f"node {','.join(gone)} failed (not responding; {died})"
    steps = job_steps(job.jobid) \
        if job.scheduler.registered_name in ("slurm", "squeue") and job.jobid else []
    problem = job_problem(job.jobid, state, job.exitcode, steps, steps_must_succeed)
    return f"{problem}: {died}" if problem and died else problem


#: slurmstepd's words when the limit ends a job or step (slurm src/slurmd/slurmstepd/req.c:
#: ``*** JOB 12 ON node1 CANCELLED AT … DUE TO TIME LIMIT ***``); srun then reports the
#: ranks "Terminated", which is not their cause.
TIME_LIMIT = re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ DUE TO TIME LIMIT")


def reached_time_limit(stderr: str) -> bool:
    try:
        with open(stderr, errors="replace") as text:
            return TIME_LIMIT.search(text.read()) is not None
    except OSError:
        return False


def limit_said(limit) -> str:
    """'25 min' for a job's limit as ReFrame holds it (seconds, or the partition's
    '10m'); 'the partition's' where none was given."""
    if limit is None:
        return "the partition's"
    seconds = typ.Duration.__rfm_cast_str__(limit) if isinstance(limit, str) else limit
    return time_limit.minutes(float(seconds))


#: How long a job whose rank was killed waits for Slurm to find one of its nodes gone
#: (the embedded cluster's SlurmdTimeout is 30 s; slurmctld pings every third of it).
NODE_LOSS_WAIT_S = 45


def nodes_stopping(nodes: list[str], wait_s: float = NODE_LOSS_WAIT_S) -> list[str]:
    """Those of ``nodes`` Slurm finds down or not responding within ``wait_s``. A node
    lost mid-step ends the job NODE_FAIL on 22.05; on 25.11 srun first reports the rank
    killed ("srun: error: node2: task 0: Killed"), --kill-on-bad-exit ends the job FAILED,
    and only then does slurmctld mark the node down* (tests/data/slurm-25.11)."""
    deadline = time.monotonic() + wait_s
    while True:
        gone = down_nodes(nodes)
        if gone or time.monotonic() >= deadline:
            return gone
        time.sleep(3)


def first_rank_that_died(stderr: str) -> str | None:
    """The rank that brought the step down, in srun's words ("rank 0 on node1:
    Segmentation fault (core dumped)"): the first death that is not srun killing the
    others after it."""
    try:
        with open(stderr, errors="replace") as text:
            deaths = list(TASK_DIED.finditer(text.read()))
    except OSError:
        return None
    causes = [d for d in deaths if d["how"] not in KILLED_AFTER] or deaths
    if not causes:
        return None
    first = causes[0]
    ranks = "rank" if first["tasks"].isdigit() else "ranks"
    return f"{ranks} {first['tasks']} on {first['node']}: {first['how']}"


def nodelist_order(host: str) -> tuple:
    """Slurm's node order (node2 before node10): the order of SLURM_NODEID, by which
    pin_per_node.sh picks each node's core list."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", host))


class PerNodeSrun(JobLauncher):
    """One job step whose nodes each get their own core map: ``srun --cpu-bind=none
    pin_per_node.sh "1,0;0,1" PROGRAM``, the script binding each rank by its node and
    local rank and printing the kernel's mask as srun would. ``--cpu-bind=map_cpu`` alone
    cannot differ between nodes; a heterogeneous step can, but Slurm 22.05's srun hung
    after all its components had finished (1 run in 5 on the embedded cluster)."""

    def __init__(self, common: list[str], node_cores: list[list[int]]) -> None:
        super().__init__()
        self.common, self.node_cores = common, node_cores

    def command(self, job) -> list[str]:
        maps = ";".join(",".join(map(str, cores)) for cores in self.node_cores)
        return ["srun", *self.common, "--cpu-bind=none", str(PIN_PER_NODE), f"'{maps}'"]


def lost_nodes(stderr: str) -> list[str]:
    """Nodes srun reported lost, in order, from the job's standard error."""
    try:
        with open(stderr, errors="replace") as text:
            found = NODE_FAILURE.findall(text.read())
    except OSError:
        return []
    return list(dict.fromkeys(found))


def down_nodes(nodes: list[str]) -> list[str]:
    """Those of ``nodes`` Slurm now has down or not responding (``*``)."""
    if not nodes:
        return []
    listing = osext.run_command(f"sinfo -h -N -n {','.join(nodes)} -o '%N %T'")
    return sorted({name for name, state in (line.split()[:2] for line in
                                            listing.stdout.splitlines() if line.strip())
                   if state.startswith(("down", "fail")) or state.endswith("*")})


def job_steps(jobid: str) -> list[tuple[str, str, str, str]]:
    """(step id, name, state, exit code) of every step of a job, from Slurm accounting."""
    listing = osext.run_command(f"sacct -n -P -j {jobid} -o JobID,JobName,State,ExitCode")
    return sacct_steps(listing.stdout)


def job_cpu_seconds(job, wait_s: float = 15) -> float | None:
    """The CPU time the job's benchmark steps used (Slurm accounting's TotalCPU of each
    step but perfguard's helpers and the batch script), or None where accounting does
    not say within ``wait_s``. The CPU readings bracket the benchmark alone: the job's
    whole TotalCPU, its fingerprint step before them included, would be more than the
    job used between them (a short benchmark read as the job's own busy host)."""
    if job.scheduler.registered_name not in ("slurm", "squeue") or not job.jobid:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        listing = osext.run_command(f"sacct -n -P -j {job.jobid} -o JobID,JobName,TotalCPU")
        written = re.search(r"^\S+\.\d+\|", listing.stdout, re.M)  # any step at all
        if written or time.monotonic() >= deadline:
            return benchmark_cpu_seconds(listing.stdout)
        time.sleep(1)  # slurmdbd has not written the job's steps yet


def benchmark_cpu_seconds(listing: str) -> float | None:
    """``sacct -n -P -o JobID,JobName,TotalCPU`` → the benchmark steps' CPU seconds (the
    numbered steps not named perfguard-helper), None where none is listed yet."""
    steps = [line.split("|") for line in listing.splitlines() if line.count("|") == 2]
    times = [total_cpu_seconds(cpu) for step, name, cpu in steps
             if is_benchmark_step(step, name)]
    return sum(t for t in times if t is not None) if times else None


def total_cpu_seconds(text: str) -> float | None:
    """sacct's TotalCPU ([DD-][HH:]MM:SS[.mmm]) in seconds."""
    match = re.fullmatch(r"(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+(?:\.\d+)?)", text.strip())
    if match is None:
        return None
    days, hours, minutes, seconds = (float(part or 0) for part in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def sacct_steps(listing: str) -> list[tuple[str, str, str, str]]:
    """``sacct -n -P -o JobID,JobName,State,ExitCode`` → its rows (the same from Slurm
    22.05 to 25.11: tests/data/slurm-25.11)."""
    return [tuple(line.split("|", 3)) for line in listing.splitlines()
            if line.count("|") == 3]


def is_benchmark_step(step: str, name: str) -> bool:
    """A step of the job's own commands (``12.2``), not the job itself, its batch script
    or extern step, nor one of perfguard's helpers around the benchmark."""
    suffix = step.partition(".")[2]
    return bool(suffix) and suffix not in ("batch", "extern") and \
        not name.startswith(HELPER_STEP)


def job_problem(jobid: str | None, state: str, exitcode: int | None,
                steps: list[tuple[str, str, str, str]], steps_must_succeed: bool = True
                ) -> str | None:
    """Why a job did not succeed ("job 12 FAILED with exit code 17; step 12.1 (osu_bw)
    FAILED 139:0"), or None. Steps still shown running by accounting are not judged."""
    problems = []
    job_state = state.split()[0] if state else ""
    if job_state in UNSUCCESSFUL or (exitcode or 0) != 0:
        problems.append(f"job {jobid} {job_state or 'ended'} with exit code {exitcode}")
    for step, name, step_state, code in steps if steps_must_succeed else []:
        if not is_benchmark_step(step, name):
            continue
        if (step_state.split() or [""])[0] in UNSUCCESSFUL or code not in ("0:0", ""):
            problems.append(f"step {step} ({name}) {step_state} {code}")
    return "; ".join(problems) or None
