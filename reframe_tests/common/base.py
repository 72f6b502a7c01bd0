"""The base every perfguard check builds on: ``MeasuredCheck`` (``LaunchedCheck`` below
it is what a cluster sanity check such as MPI hello needs: no binaries, no measurement).

Read top to bottom, a job of a measured check is: the partition's binaries (a provider:
Spack view, prefix, the node's PATH, or a recording), ranks pinned where the topology
says (cores near the HCA, its GPU, the MPI flavour's knobs), launched by srun with a
verbose binding, the job script recording its allocation, looking for its programs on
the node, fingerprinting every node, then the check's own commands and the proof of each
rank's GPU. After the job: the fingerprints, a program the node lacked (a skip, saying
so), the allocation and whether the job and every benchmark step ended cleanly; then the
check's sanity, the database's references and the direction of every metric. The
details are plain functions in the modules beside this one; the base calls them and
applies what they return, in a handful of hooks:

====================  ============================================================
after init            ``maintained_by_perfguard``; ``measured_by_perfguard``:
                      exclusive nodes, the partitions with the check's HCA
after setup           ``one_core_per_task``
before run            ``compose_the_job``: shape check, job script lines, srun;
                      ``limit_the_job_time``; ``take_the_measurement_slot``
before sanity         ``read_what_the_job_left``; ``skip_where_a_program_was_missing``
before performance    ``references_and_directions``
====================  ============================================================

A check calls ``provided(relpath)`` for its executable, ``pin_to_hca(...)`` after setup,
``record_series(...)`` in sanity and ``skip_saying(...)`` to skip with a reason the
report keeps; ``explain_job_problem`` and ``compose_steps`` are its to override. Where a
hook computes ``executable_opts``, ``num_tasks_per_node`` or ``valid_systems``, it takes
them through ``steerable(name, computed)``: a user's ``-S`` on them is honoured or
refused with a skip saying why, never silently replaced.
"""

from __future__ import annotations

import copy
from pathlib import Path

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import fixture, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from reframe_tests.common import (
    cpu_wait,
    fingerprints,
    gpus,
    launch,
    pinning,
    providers,
    references,
    time_limit,
)
from reframe_tests.common.output import read_output

#: What the checks' hooks compute that a user may also set with ReFrame's ``-S``
#: (``steerable``).
STEERABLE = ("executable_opts", "num_tasks_per_node", "valid_systems")


def declared_value(cls, name: str):
    """The value of variable ``name`` that the body of ``cls`` gives, else the first
    base's that has the variable (None: none has it, a plugin below the test class)."""
    if name in cls.__dict__:
        return cls.__dict__[name]
    return next((base._rfm_var_space[name]._default_value for base in cls.__mro__[1:]
                 if name in getattr(base, "_rfm_var_space", {})), None)


class LaunchedCheck(rfm.RegressionTestPlugin):
    """srun with a verified binding, the allocation and fingerprints recorded, the job's
    end judged, skips that keep their reason: what every perfguard job has."""

    #: Slurm ``--cpu-bind`` policy (cores, map_cpu:LIST, …); srun's verbose report of it
    #: is the proof sanity reads.
    cpu_bind = variable(str, value="cores")
    #: Extra srun options (``--gpu-bind=map_gpu:0``, ``--distribution=block:block``).
    srun_extra = variable(list, value=[])
    #: One core map per node, in allocation order, where one map cannot serve all nodes
    #: (virtual nodes sharing a host's CPUs); empty: ``cpu_bind`` for every node.
    node_cores = variable(list, value=[])
    #: MPI programs get the partition's ``srun_options`` (``--mpi=pmix``).
    uses_mpi = variable(bool, value=True)
    #: The job script runs the steps itself, each with the srun prefix ``compose_steps``
    #: is handed (server and client).
    self_launched = variable(bool, value=False)
    #: Nodes this run may use where fewer than the partition has (`perfguard upgrade-check
    #: --nodes`); 0: the partition's.
    nodes_available = variable(int, value=0)
    #: Every benchmark step must succeed; a check that records failed steps as results
    #: (the fabric sweep's failed pairs) clears it, and only the job's own end counts.
    steps_must_succeed = variable(bool, value=True)
    #: The job's nodes as Slurm allocated them ($SLURM_JOB_NODELIST, written by the job).
    perfguard_nodelist = variable(list, value=[])
    #: {node: {field: value}} of every node the job used (fingerprint.sh).
    perfguard_fingerprints = variable(typ.Dict[str, object], value={})
    #: Why the check was skipped: ReFrame's report keeps no skip message.
    perfguard_skip_reason = variable(str, value="")
    #: sha256 of the Spack stack's spack.lock the binaries came from (fingerprints).
    spack_lock_hash = variable(str, value="")
    #: The share of the job some task on a node may wait for a CPU (Linux PSI) before the
    #: job's figures count as disturbed by other processes, not judged (cpu_wait.py); and
    #: the share the job's own tasks may wait where the job has its own cgroup.
    max_cpu_wait = variable(float, value=0.5)
    max_job_cpu_wait = variable(float, value=0.2)
    #: {node: share of the job some task waited for a CPU} (cpu_wait.sh at start and end).
    perfguard_cpu_wait = variable(typ.Dict[str, float], value={})
    #: Why the figures are not the fabric's (other processes on the CPUs); "" if they are.
    perfguard_disturbed = variable(str, value="")

    def __init_subclass__(cls, **kwargs):
        """What the class declares of the ``STEERABLE`` variables (its body's value, else
        its bases'), kept before ReFrame's loader applies ``-S``: the loader redefines a
        test class's variables and keeps no record of it, so a value that differs from
        the declared one later is the user's (or the topology's ``check_variables``)."""
        super().__init_subclass__(**kwargs)
        cls._perfguard_declared = {name: copy.deepcopy(declared_value(cls, name))
                                   for name in STEERABLE}

    @run_after("init")
    def maintained_by_perfguard(self):
        self.maintainers = ["perfguard"]

    @run_after("setup")
    def one_core_per_task(self):
        if self.num_cpus_per_task is None:
            self.num_cpus_per_task = 1

    @run_before("run")
    def compose_the_job(self):
        """A shape the partition cannot hold is skipped with the reason, never sent to
        sbatch to fail there. Then the script, top to bottom: the allocation as Slurm gave
        it, ``first_in_the_job``, the nodes' fingerprints, the check's own commands,
        ``last_before_the_benchmark``; and srun's options."""
        problem = launch.shape_problem(self.current_partition, self.num_tasks,
                                       self.num_tasks_per_node, self.num_cpus_per_task,
                                       self.nodes_available)
        self.skip_saying_if(problem is not None, problem or "")
        self.prerun_cmds = [launch.record_allocation_command(),
                            *launch.whole_node_steps(self.cpu_bind), *self.first_in_the_job(),
                            fingerprints.add_step(Path(self.stagedir)), *self.prerun_cmds,
                            *self.last_before_the_benchmark(),
                            cpu_wait.add_step(Path(self.stagedir))]
        self.postrun_cmds = [*self.postrun_cmds, cpu_wait.end_step()]
        self.apply_launch_options()

    @run_before("run")
    def limit_the_job_time(self):
        """Every job has a time limit: the user's or the site's (``-S CHECK.time_limit``,
        the topology's ``check_variables``), the partition's default, else one derived
        from the check's work (time_limit.py). Without one a hung step holds exclusive
        nodes until the partition's default, days on many sites."""
        if self.time_limit is None and self.current_partition.time_limit is None:
            self.time_limit = time_limit.limit_seconds(self.expected_work_s())

    def expected_work_s(self) -> float | None:
        """Seconds the check's work takes at the floor rate (time_limit.py); None: the
        default allowance."""
        return None

    @run_before("sanity")
    def read_what_the_job_left(self):
        """Fingerprints and the allocation; then the job and each benchmark step ended
        cleanly (a complete table followed by a crash is no pass), a lost node named."""
        stage = Path(self.stagedir)
        self.perfguard_fingerprints = fingerprints.read(stage, self.spack_lock_hash)
        self.perfguard_nodelist = launch.recorded_allocation(stage)
        shared_host = bool(self.current_partition.extras.get("nodes_share_host"))
        self.perfguard_cpu_wait, readings, others = cpu_wait.read(
            stage, launch.job_cpu_seconds(self.job) if shared_host else None)
        self.perfguard_disturbed = cpu_wait.disturbance(
            self.perfguard_cpu_wait, {"node": self.max_cpu_wait, "job": self.max_job_cpu_wait},
            self.own_cpus_per_node(), readings, shared_host, others)
        problem = launch.job_end_problem(self.job, self.stagedir, self.steps_must_succeed)
        if problem:
            raise SanityError(self.explain_job_problem(problem))

    def own_cpus_per_node(self) -> int:
        """The CPUs the job's own ranks keep busy on a node, or on the host where the
        partition's nodes share one (then all its ranks are there)."""
        tasks = self.num_tasks or 1
        if not self.current_partition.extras.get("nodes_share_host"):
            nodes = max(1, len(self.perfguard_nodelist))
            tasks = self.num_tasks_per_node or -(-tasks // nodes)
        return tasks * (self.num_cpus_per_task or 1)

    def first_in_the_job(self) -> list[str]:
        """Commands before anything else runs (MeasuredCheck: its programs looked for)."""
        return []

    def last_before_the_benchmark(self) -> list[str]:
        """Commands after the check's own, before the benchmark (the rank-GPU proof)."""
        return []

    def skip_saying(self, reason: str) -> None:
        """Skip the test, keeping the reason for the report (a skip is neither a pass nor
        a failure, and says why)."""
        self.perfguard_skip_reason = reason
        self.skip(reason)

    def skip_saying_if(self, condition: bool, reason: str) -> None:
        if condition:
            self.skip_saying(reason)

    def set_by_user(self, name: str) -> bool:
        """Whether ``-S`` gave ``name`` (one of ``STEERABLE``) another value than the
        check's classes declare."""
        given = type(self)._rfm_var_space[name]._default_value
        declared = self._perfguard_declared[name]
        return given is not declared and given != declared

    def steerable(self, name: str, computed, fixed: str = ""):
        """``computed``, the check's own value of ``name`` (one of ``STEERABLE``), unless
        the user set it with ``-S``. Then: ``fixed`` (why the check cannot take another
        value) skips the test saying so where the user's differs (call it after setup);
        else ``executable_opts``: the user's options after the check's own (where a
        program takes the last of an option, the user's wins); ``valid_systems``: the
        user's systems narrowed to where the variant can run (``computed``: what it
        needs, ``["+hca_mlx5_0"]``; ``[]``: nowhere); ``num_tasks_per_node``: the
        user's."""
        if not self.set_by_user(name):
            return computed
        given = type(self)._rfm_var_space[name].default_value
        if fixed:
            shown = ",".join(map(str, given)) if isinstance(given, list) else given
            self.skip_saying_if(given != computed,
                                f"{name} cannot be set (-S {name}={shown}): {fixed}")
            return computed
        if name == "executable_opts":
            return [*computed, *given]
        if name == "valid_systems":
            return [f"{spec} {need}".strip() for spec in given for need in computed]
        return given

    def expected_node_cores(self) -> dict[str, list[int]]:
        """Host → the cores its ranks must own, where each node has its own map."""
        nodes = self.perfguard_nodelist or list(self.job.nodelist or [])
        return launch.node_core_maps(nodes, self.node_cores)

    @property
    def pinned_step(self) -> bool:
        """An explicit core map: the step must own the whole node."""
        return launch.pinned(self.cpu_bind)

    def node_limit(self) -> int | None:
        """How many nodes a job of this run can get: the partition's, or fewer if given."""
        return launch.node_limit(self.current_partition, self.nodes_available)

    def node_limit_source(self) -> str:
        return launch.node_limit_source(self.current_partition, self.nodes_available)

    def explain_job_problem(self, problem: str) -> str:
        """A check that knows what a failed job means adds it here."""
        return problem

    def compose_steps(self, srun: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} sets self_launched but does not "
                                  f"implement compose_steps(srun)")

    def apply_launch_options(self) -> None:
        """srun with the partition's MPI options, the check's extras and a verbose
        binding; per-node core maps through pin_per_node.sh; a self-launched check gets
        the srun prefix and composes its steps."""
        options = launch.srun_options(self.current_partition, self.uses_mpi, self.srun_extra,
                                      self.cpu_bind)
        if self.pinned_step:
            # Since Slurm 22.05 `srun --cpus-per-task` implies --exact: a map naming cores
            # outside the step's is refused. A pinned job takes whole nodes and its steps
            # all of their cores (and the job's SLURM_CPUS_PER_TASK is unset for 23.11+:
            # launch.WHOLE_NODE_STEPS).
            self.job.launcher.use_cpus_per_task = False
        if self.node_cores and not self.self_launched:
            program = Path(str(self.executable).split()[0]).name
            self.job.launcher = launch.per_node_launcher(options, self.node_cores, program)
            return
        self.job.launcher.options += options
        if self.self_launched:
            srun = self.job.launcher.run_command(self.job)
            self.job.launcher = getlauncher("local")()
            self.compose_steps(srun)
            if self.executable_opts:  # options left after the composed steps mean nothing
                self.steerable("executable_opts", [], fixed=f"{type(self).__name__} composes "
                               f"its job's steps (compose_steps) and puts no options on them")


class MeasuredCheck(LaunchedCheck):
    """A measurement: binaries from the partition's providers, ranks pinned where the
    topology says, every point recorded, the database's references, exclusive nodes."""

    #: Cores each node's ranks were pinned to (local rank order); empty: not pinned.
    pinned_cores = variable(list, value=[])
    #: The GPU index exposed to the ranks (-1: none) and each local rank's [index, bus id].
    pinned_gpu = variable(int, value=-1)
    rank_gpus = variable(list, value=[])
    #: [{"metric", "unit", "coords": {name: [..] or scalar}, "values": [..]}]: every point.
    perfguard_samples = variable(typ.List[typ.Dict[str, object]], value=[])
    #: Which way each metric is better, declared where it is defined (the check).
    perfguard_better = variable(typ.Dict[str, str], value={})
    #: The metrics of ``perfguard_better`` whose direction no one declared: their
    #: reference's one-sided bound implies it (shown as "implied by its reference").
    perfguard_better_implied = variable(typ.List[str], value=[])
    #: Programs the 'system' provider names: the job looks for them on the node first.
    programs_on_node_path = variable(typ.List[str], value=[])
    #: The provider the executable came from (``provided``): what it offers beyond
    #: programs decides which variants can run (``lacks``).
    binary_provider = variable(typ.Dict[str, object], value={})

    #: The partition's Spack stack, installed once per session (nothing without one).
    spack_stack = fixture(providers.SpackStack, scope="partition")

    @property
    def needs_gpu(self) -> bool:
        """Checks with device buffers say so from their parameters."""
        return False

    @run_after("init")
    def measured_by_perfguard(self):
        """A measurement owns its nodes: another job's ranks on them would be measured
        too. A check with an ``hca`` parameter runs only where the partition has it."""
        self.exclusive_access = True
        if "hca" in type(self).param_space.params:
            self.valid_systems = self.steerable("valid_systems", pinning.hca_valid_systems(
                self.hca, "+gpu" if self.needs_gpu else ""))

    @run_before("run")
    def take_the_measurement_slot(self):
        """The partition's options for measuring jobs (topology ``measurement_options``):
        on the embedded cluster a license of 1, so benchmarks run one at a time on the
        shared host while sanity jobs run beside them."""
        self.job.options += self.current_partition.extras.get("measurement_options", [])

    @run_before("sanity")
    def skip_where_a_program_was_missing(self):
        """The job said a node lacked a program: a skip naming the node and the fix.

        A skip here, not after run: ReFrame 4.10's asynchronous policy keeps a test that
        leaves in ``run_wait`` in its partition's running set, so every such skip held a
        ``max_jobs`` slot for good and the run spun forever once they were all held."""
        modules = self.binary_provider.get("modules")
        if not (self.programs_on_node_path or modules) or self.is_dry_run():
            return
        try:
            output = read_output(self)
        except SanityError:
            return  # no output at all: the sanity stage says why
        partition = self.current_partition.fullname
        missing = (providers.missing_module(output, self.binary_provider, partition)
                   or providers.missing_program(output, partition))
        self.skip_saying_if(missing is not None, missing or "")

    @run_before("performance")
    def references_and_directions(self):
        """ReFrame's references (the check has chosen its perf variables by now): per
        figure the database's threshold, else the check's own ``reference``; every
        measured metric says which way is better, in ``perfguard_better`` or by its
        reference's one-sided bound."""
        metrics = sorted(getattr(self, "perf_variables", {}))
        partition = self.current_partition
        own = references.own_references(self.reference, partition.fullname, metrics)
        in_force = own
        if not self.is_dry_run():
            params = {name: str(getattr(self, name)) for name in type(self).param_space.params}
            in_force = references.for_check(
                self.display_name, type(self).__name__, params, partition.name,
                self.current_environ.name, metrics, own)
            self.reference = {f"{self.current_system.name}:{partition.name}": in_force}
        declared = set(self.perfguard_better)
        self.perfguard_better = references.directions(self.perfguard_better, in_force)
        self.perfguard_better_implied = sorted(set(self.perfguard_better) - declared)
        measured = {s["metric"] for s in self.perfguard_samples} | set(metrics)
        problem = references.direction_problem(type(self).__name__, measured,
                                               self.perfguard_better)
        if problem:
            raise SanityError(problem)

    def first_in_the_job(self) -> list[str]:
        """A provider's module that did not load, or a program the node lacks, ends the
        job cleanly, saying so."""
        return [*providers.module_probes(self.binary_provider.get("modules", [])),
                *providers.probe_commands(self.programs_on_node_path)]

    def last_before_the_benchmark(self) -> list[str]:
        """Each rank's GPU, reported with the benchmark's layout (kept with the output)."""
        if not self.rank_gpus:
            return []
        self.keep_files = [*self.keep_files, gpus.OUTPUT]
        return [gpus.add_step(Path(self.stagedir), self.srun_extra)]

    def provided(self, relpath: str) -> str:
        """The executable's path from the partition's providers, the first that has it
        (a dry run takes the first: job scripts for clusters this machine is not)."""
        found, reasons = providers.find(self.current_partition, relpath, self.is_dry_run())
        if found is None:
            self.skip_saying(f"no provider of {relpath} for {self.current_partition.fullname}: "
                             + "; ".join(reasons))
        path, provider = found
        self.binary_provider = provider
        self.modules = list(self.modules) + list(provider.get("modules", []))
        if provider.get("kind") == "spack":  # the view first on PATH: RPATHs do the rest
            self.env_vars["PATH"] = f"{providers.spack_view(provider)}/bin:$PATH"
            self.spack_lock_hash = self.spack_stack.lock_hash
        if provider.get("kind", "system") == "system":
            self.programs_on_node_path = [*self.programs_on_node_path, path]
        return path

    def lacks(self, *needs: str) -> str | None:
        """Why the executable's provider cannot serve what this variant ``needs``
        (``mpi-ucc``, ``ucc-sharp``, ``nccl-collnet``: perfguard/contract/offers.py), or
        None where it has them or nobody knows; call after ``provided``."""
        return providers.lacks(self.binary_provider, set(needs),
                               self.current_partition.fullname)

    @property
    def replaying(self) -> bool:
        """The partition's first provider replays recorded output instead of running."""
        return providers.providers_of(self.current_partition)[0].get("kind") == "replay"

    def replays(self, relpath: str) -> bool:
        """A recording stands in for ``relpath`` (else a real program would run)."""
        return self.replaying and providers.replay_problem(
            providers.providers_of(self.current_partition)[0], relpath) is None

    def pin_to_hca(self, hca_name: str, ranks_per_node: int, gpudirect: bool | None = None,
                   device_buffers: bool = False, flavour: str | None = None) -> None:
        """Cores, GPUs and MPI knobs for ``hca_name`` (``flavour`` overrides the
        partition's MPI flavour: UCX tools use UCX's knobs); sanity compares srun's
        report with ``pinned_cores`` and each rank's GPU with ``rank_gpus``."""
        plan = pinning.plan(self.current_partition, hca_name, ranks_per_node,
                            self.num_tasks or 1, gpudirect, device_buffers, flavour)
        if plan.cores:
            self.pin_cores(plan.cores)
        self.node_cores = plan.node_cores or self.node_cores
        if plan.gpus:
            self.pin_gpus(plan.topology, plan.gpus)
        self.env_vars.update(plan.env)

    def pin_cores(self, cores: list[int]) -> None:
        self.pinned_cores = cores
        self.cpu_bind = pinning.map_cpu(cores)
        self.exclusive_access = True

    def pin_gpus(self, topology, gpu_list: list) -> None:
        """Each local rank on its GPU (``--gpu-bind=map_gpu`` where GPUs are Slurm GRES,
        and CUDA_VISIBLE_DEVICES in local-rank order, which alone selects them where not)."""
        chosen = pinning.gpu_binding(topology, gpu_list)
        self.rank_gpus, self.pinned_gpu = chosen.rank_gpus, chosen.first
        if chosen.srun_option:
            self.num_gpus_per_node = len(topology.node.gpus)
            self.srun_extra = [*self.srun_extra, chosen.srun_option]
        self.env_vars["CUDA_VISIBLE_DEVICES"] = chosen.visible

    def srun_gpu_bound(self) -> bool:
        """Slurm binds each task to its GPU (``--gpu-bind``): a task sees that one device."""
        return any(option.startswith("--gpu-bind") for option in self.srun_extra)

    def hca_rate_gbps(self, hca_name: str) -> float | None:
        return pinning.hca_rate_gbps(self.current_partition, hca_name)

    def record_series(self, metric: str, unit: str, values: list[float], **coords) -> None:
        """One curve: ``record_series("bandwidth", "MB/s", bws, size=sizes)``."""
        self.perfguard_samples = [*self.perfguard_samples, {
            "metric": metric, "unit": unit, "coords": coords,
            "values": [float(v) for v in values]}]

    def gpu_errors(self) -> list[str]:
        """Sanity: each rank on the GPU the topology chose ([] where none was chosen)."""
        if not self.rank_gpus:
            return []
        gres = bool(self.current_partition.extras.get("gres_gpus", True))
        return gpus.errors(Path(self.stagedir), self.rank_gpus, self.num_tasks, gres)
