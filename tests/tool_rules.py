"""How the real tools pick their GPU and HCA, read from their own sources: the model a
job script is tested against (tests/system/test_tool_rules.py, docs/tool-rules.md).

A dry-run job script proves what we wrote; these rules say what the tool then does with
the environment each rank gets. Each function cites the file of the tool's source it
follows (fetched: NVIDIA/nccl-tests 2.19.6 a0b82b2, OMB 7.4, SchedMD/slurm); a rule that
disagrees with a recording is wrong, not the recording.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass


class ToolRefuses(Exception):
    """The tool stops on this environment, in its own words."""


@dataclass(frozen=True)
class JobScript:
    """What a ReFrame job script gives the benchmark's step."""
    exports: dict[str, str]
    tasks: int
    tasks_per_node: int
    #: The benchmark's srun line (the last srun that is not perfguard's helper step).
    srun: list[str]

    @property
    def nodes(self) -> int:
        return self.tasks // self.tasks_per_node

    def option(self, name: str) -> str | None:
        """The value of ``--name=value`` on the benchmark's srun line."""
        for word in self.srun:
            if word.startswith(f"{name}="):
                return word.split("=", 1)[1]
        return None


def read_script(lines: list[str]) -> JobScript:
    exports, sbatch = {}, {}
    for line in lines:
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            exports[name] = shlex.split(value)[0] if value else ""
        elif match := re.match(r"#SBATCH --([\w-]+)=(\S+)", line):
            sbatch[match[1]] = match[2]
    steps = [shlex.split(line) for line in lines
             if line.startswith("srun ") and "perfguard-helper" not in line]
    return JobScript(exports, int(sbatch["ntasks"]), int(sbatch["ntasks-per-node"]), steps[-1])


def task_environment(script: JobScript, node: int, local: int, gres: bool) -> dict[str, str]:
    """The environment Slurm gives task ``local`` of node ``node`` (block distribution,
    srun's default: ``SLURM_PROCID = node × tasks per node + local``).

    ``--gpu-bind=map_gpu:L`` under GRES: Slurm sets the task's CUDA_VISIBLE_DEVICES to
    the one GPU ``L[local mod len(L)]``, the list reused per node (slurm
    ``src/plugins/gres/common/gres_common.c``, ``common_gres_set_env``; srun(1)
    "--gpu-bind=map_gpu"); under ConstrainDevices it is renumbered 0, the same GPU.
    Without GRES the job's own export reaches every task unchanged."""
    env = {**script.exports, "SLURM_LOCALID": str(local), "SLURM_NODEID": str(node),
           "SLURM_PROCID": str(node * script.tasks_per_node + local)}
    bind = script.option("--gpu-bind")
    if gres and bind and bind.startswith("map_gpu:"):
        mapped = bind[len("map_gpu:"):].split(",")
        env["CUDA_VISIBLE_DEVICES"] = mapped[local % len(mapped)]
    return env


def visible_gpus(env: dict[str, str], node_gpus: int) -> list[int]:
    """The node's GPUs in CUDA's device order (CUDA_VISIBLE_DEVICES, else all)."""
    listed = env.get("CUDA_VISIBLE_DEVICES")
    return [int(g) for g in listed.split(",")] if listed else list(range(node_gpus))


def nccl_tests_gpu(env: dict[str, str], local_rank: int, node_gpus: int) -> int:
    """The node's GPU an nccl-tests rank (``-g 1``, one thread) computes on.

    nccl-tests ``src/common.cu`` ``run()``: ``gpus[i] = (gpu0 != -1 ? gpu0 :
    localRank*nThreads*nGpus) + i`` with ``gpu0`` from ``NCCL_TESTS_DEVICE`` and localRank
    counted from the MPI ranks' host names; ``src/util.cu`` ``writeDeviceReport`` stops
    when that device is not there ("Invalid number of GPUs: N requested but only M were
    found", recorded on an H200)."""
    visible = visible_gpus(env, node_gpus)
    ordinal = int(env["NCCL_TESTS_DEVICE"]) if "NCCL_TESTS_DEVICE" in env else local_rank
    if ordinal >= len(visible):
        raise ToolRefuses(f"Invalid number of GPUs: {ordinal + 1} requested but only "
                          f"{len(visible)} were found.")
    return visible[ordinal]


#: OMB 7.4 ``c/util/osu_util_mpi.c`` ``omb_get_local_rank()``: the first of these set.
OMB_LOCAL_RANK = ("MV2_COMM_WORLD_LOCAL_RANK", "MVP_COMM_WORLD_LOCAL_RANK",
                  "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_PROCID", "LOCAL_RANK")


def omb_gpu(env: dict[str, str], node_gpus: int) -> int:
    """The node's GPU an OMB rank with device buffers computes on: ``init_accel()`` sets
    ``local_rank % cudaGetDeviceCount()`` before MPI_Init, the local rank from the first
    variable of ``OMB_LOCAL_RANK`` present. Under srun none of the MPI launchers' is set
    yet, so it is ``SLURM_PROCID``: the global rank."""
    rank = next(int(env[name]) for name in OMB_LOCAL_RANK if name in env)
    visible = visible_gpus(env, node_gpus)
    return visible[rank % len(visible)]


def nccl_ib_hcas(env: dict[str, str], node_hcas: list[str]) -> list[str]:
    """The ``name:port`` ports NCCL's IB plugin may use (NCCL ``src/transport/net_ib.cc``
    and ``src/misc/utils.cc`` ``parseStringList``/``matchIfList``: ``NCCL_IB_HCA`` a list
    of prefixes, ``=`` for exact names, ``^`` to exclude; unset: every port). Of these,
    NCCL gives each GPU the closest by PCI distance."""
    spec = env.get("NCCL_IB_HCA")
    if not spec:
        return list(node_hcas)
    exclude, exact = spec.startswith("^"), spec.lstrip("^").startswith("=")
    wanted = [w for w in spec.lstrip("^").lstrip("=").split(",") if w]

    def matches(port: str) -> bool:
        name, _, number = port.partition(":")
        for want in wanted:
            want_name, _, want_port = want.partition(":")
            same = name == want_name if exact else name.startswith(want_name)
            if same and (not want_port or want_port == number):
                return True
        return False

    return [port for port in node_hcas if matches(port) != exclude]
