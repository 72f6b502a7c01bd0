"""Environment fingerprints, collected inside each job on every node it uses.

A job step runs ``fingerprint.sh`` once per node before the benchmark; its lines
become ``perfguard_fingerprints`` ({node: {field: value}}), a variable of MeasuredCheck
the report carries to the database's fingerprint table. Kernel, OS, OFED and
rdma-core, HCA model/firmware/port state and rate, GPU model and driver, MPI and
UCX versions, and the Spack lock hash of the stack used.
"""

from __future__ import annotations

import shutil
from pathlib import Path

SCRIPT = Path(__file__).with_name("fingerprint.sh")
OUTPUT = "fingerprints.txt"


def node_command(script: str, output: str) -> str:
    """A helper step of one task per allocated node running ``script`` (staged beside
    the job) into ``output``: the fingerprints', the CPU wait's (cpu_wait.py)."""
    return (f"srun -J perfguard-helper -N $SLURM_JOB_NUM_NODES -n $SLURM_JOB_NUM_NODES "
            f"--ntasks-per-node=1 --cpu-bind=none bash {script} > {output} 2>/dev/null")


def node_step(stage: Path, script: Path, output: str) -> str:
    """``script`` staged beside the job; its step, which never fails the job."""
    shutil.copy(script, stage / script.name)
    return f"{node_command(script.name, output)} || true"


def parse(text: str, spack_lock_hash: str = "") -> dict[str, dict]:
    """The script's lines → {node: {kernel, os, ..., hcas: [...], gpus: [...]}}."""
    nodes: dict[str, dict] = {}
    for line in text.splitlines():
        parts = line.split("\t", 3)
        if len(parts) != 4 or parts[0] != "perfguard-fp":
            continue
        _, node, key, value = parts
        facts = nodes.setdefault(node, {"hcas": {}, "gpus": {}})
        if key.startswith("hca."):
            _, name, field = key.split(".", 2)
            facts["hcas"].setdefault(name, {"name": name})[field] = value
        elif key.startswith("gpu."):
            _, index, field = key.split(".", 2)
            facts["gpus"].setdefault(index, {"index": int(index)})[field] = value
        else:
            facts[key] = value
    for facts in nodes.values():
        facts["hcas"] = sorted(facts["hcas"].values(), key=lambda h: h["name"])
        facts["gpus"] = sorted(facts["gpus"].values(), key=lambda g: g["index"])
        if spack_lock_hash:
            facts["spack_lock_hash"] = spack_lock_hash
    return nodes


def add_step(stage: Path) -> str:
    """The script staged beside the job; its step's command (first in the job)."""
    return node_step(stage, SCRIPT, OUTPUT)


def read(stage: Path, spack_lock_hash: str = "") -> dict[str, dict]:
    """{node: facts} from what the step wrote (nothing where it wrote nothing)."""
    path = stage / OUTPUT
    return parse(path.read_text(errors="replace") if path.exists() else "", spack_lock_hash)
