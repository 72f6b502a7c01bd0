"""How every perfguard check is launched: srun options and core binding from the partition."""

from __future__ import annotations

import os
import re
from pathlib import Path

import reframe.utility.osext as osext
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError
from reframe.core.launchers import JobLauncher
from reframe.utility import nodelist_expand

from reframe_tests.common.skips import SaysWhySkipped

#: What srun prints when slurmctld tells it a node of the step was lost.
NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")
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


class SrunLaunch(SaysWhySkipped):
    """Adds the partition's MPI launch options and a verbose core binding to srun.

    ``cpu_bind`` is what we ask Slurm for (pinning may change it after setup);
    ``verbose`` is always added, because the mask srun reports is the proof the
    sanity checks read. Checks that start several job steps themselves (server
    and client) set ``self_launched`` and implement ``compose_steps(srun)``.
    """

    #: Slurm ``--cpu-bind`` policy (cores, map_cpu:LIST, mask_cpu:LIST, ldoms, …).
    cpu_bind = variable(str, value="cores")
    #: Extra srun options a check or the pinning adds (e.g. ``--gpu-bind=map_gpu:0``).
    srun_extra = variable(list, value=[])
    #: The job's nodes as Slurm allocated them ($SLURM_JOB_NODELIST, written by the job).
    perfguard_nodelist = variable(list, value=[])
    #: MPI programs get the partition's ``srun_options`` (e.g. ``--mpi=pmix``).
    uses_mpi = variable(bool, value=True)
    #: The job script runs the steps itself, each with the srun prefix we hand it.
    self_launched = variable(bool, value=False)
    #: Nodes this run may use, when fewer than the partition has (`perfguard upgrade-check
    #: --nodes`); 0: the partition's.
    nodes_available = variable(int, value=0)
    #: Every benchmark step must succeed; a check that records failed steps as results
    #: (the fabric sweep's failed pairs) clears it, and only the job's own end counts.
    steps_must_succeed = variable(bool, value=True)
    #: One core map per node of the job, in allocation order, where one map cannot serve
    #: all nodes (virtual nodes sharing a host's CPUs); empty: ``cpu_bind`` for every node.
    node_cores = variable(list, value=[])

    @run_after("setup")
    def one_core_per_task(self):
        if self.num_cpus_per_task is None:
            self.num_cpus_per_task = 1

    @run_before("run")
    def fits_the_partition(self):
        """A shape the partition cannot hold is skipped with the reason, never sent to
        sbatch to fail there ("Requested node configuration is not available")."""
        partition = self.current_partition
        per_node = self.num_tasks_per_node or 1
        nodes_needed = -(-self.num_tasks // per_node)
        nodes = self.node_limit()
        self.skip_saying_if(nodes is not None and nodes_needed > nodes,
                            f"needs {nodes_needed} nodes, {self.node_limit_source()} {nodes}")
        cores = partition.processor.num_cpus
        cores_needed = per_node * (self.num_cpus_per_task or 1)
        self.skip_saying_if(cores is not None and cores_needed > cores,
                            f"needs {cores_needed} cores per node ({per_node} tasks), the "
                            f"nodes of {partition.fullname} have {cores}")

    def node_limit(self) -> int | None:
        """How many nodes a job of this run can get: the partition's, or fewer if given."""
        nodes = self.current_partition.extras.get("num_nodes")
        if self.nodes_available:
            return min(nodes or self.nodes_available, self.nodes_available)
        return nodes

    def node_limit_source(self) -> str:
        return ("this run may use" if self.nodes_available else
                f"partition {self.current_partition.fullname} has")

    @property
    def pinned_step(self) -> bool:
        """An explicit core map: the step must own the whole node (see apply_launch_options)."""
        return self.cpu_bind.startswith(("map_cpu", "mask_cpu"))

    @run_before("run")
    def record_the_allocation(self):
        """The job writes its allocation as Slurm gave it: ReFrame's nodelist comes from a
        poll and has been seen to name one node of a two-node job."""
        self.prerun_cmds = [f'echo "$SLURM_JOB_NODELIST" > {ALLOCATION_FILE}',
                            *self.prerun_cmds]

    @run_before("sanity")
    def read_the_allocation(self):
        recorded = Path(self.stagedir) / ALLOCATION_FILE
        allocation = recorded.read_text().strip() if recorded.exists() else ""
        if allocation:
            self.perfguard_nodelist = nodelist_expand(allocation)

    @run_before("run")
    def apply_launch_options(self):
        options = list(self.current_partition.extras.get("srun_options", [])) \
            if self.uses_mpi else []
        options += [*self.srun_extra, f"--cpu-bind=verbose,{self.cpu_bind}"]
        if self.pinned_step:
            # Since Slurm 22.05 `srun --cpus-per-task` implies --exact: the step gets only
            # the cores Slurm picks, and a map naming others is refused ("CPU binding
            # outside of job step allocation"). A pinned job takes whole nodes and its
            # steps all of their cores.
            self.job.launcher.use_cpus_per_task = False
        if self.node_cores and not self.self_launched:
            common = [o for o in options if not o.startswith("--cpu-bind=")]
            # the step is named after the program, as srun names a plain step
            program = Path(str(self.executable).split()[0]).name
            self.job.launcher = PerNodeSrun([*common, f"--job-name={program}"],
                                            self.node_cores)
            return
        self.job.launcher.options += options
        if self.self_launched:
            srun = self.job.launcher.run_command(self.job)
            self.job.launcher = getlauncher("local")()
            self.compose_steps(srun)

    @run_before("sanity")
    def job_ended_cleanly(self):
        """A complete table followed by a crash is not a pass: the job, and each of its
        benchmark steps, must end COMPLETED with exit code 0. A node lost mid-run is
        named as Slurm saw it ("node node1 failed (NODE_FAIL)")."""
        state = self.job.state or ""
        lost = lost_nodes(os.path.join(self.stagedir, self.job.stderr))
        if "NODE_FAIL" in state or lost:
            nodes = lost or down_nodes(self.job.nodelist or [])
            raise SanityError(f"node {','.join(nodes) or '(unknown)'} failed "
                              f"({state if 'NODE_FAIL' in state else 'srun: Node failure'})")
        steps = job_steps(self.job.jobid) \
            if self.job.scheduler.registered_name in ("slurm", "squeue") and self.job.jobid else []
        problem = job_problem(self.job.jobid, state, self.job.exitcode, steps,
                              self.steps_must_succeed)
        if problem:
            raise SanityError(self.explain_job_problem(problem))

    def explain_job_problem(self, problem: str) -> str:
        """A check that knows what a failed job means adds it here."""
        return problem

    def compose_steps(self, srun: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} sets self_launched but does not "
                                  f"implement compose_steps(srun)")

    def expected_node_cores(self) -> dict[str, list[int]]:
        """Host → the cores its ranks must own, where each node has its own map."""
        if not self.node_cores:
            return {}
        nodes = self.perfguard_nodelist or list(self.job.nodelist or [])
        return dict(zip(sorted(nodes, key=nodelist_order), self.node_cores))


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
    return [tuple(line.split("|", 3)) for line in listing.stdout.splitlines()
            if line.count("|") == 3]


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
        suffix = step.partition(".")[2]
        if not suffix or suffix in ("batch", "extern") or name.startswith(HELPER_STEP):
            continue
        if (step_state.split() or [""])[0] in UNSUCCESSFUL or code not in ("0:0", ""):
            problems.append(f"step {step} ({name}) {step_state} {code}")
    return "; ".join(problems) or None
