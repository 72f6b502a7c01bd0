"""Proof that each rank computed on the GPU the topology chose, as srun's report proves
its cores: a helper step with the benchmark's layout runs ``rank_gpu.sh`` on every rank
before the benchmark; the sanity stage compares each rank's GPU (its PCI bus id where
the topology gives one, else its index) with ``rank_gpus``."""

from __future__ import annotations

import shutil
from pathlib import Path

from reframe_tests.common.launch import HELPER_STEP

SCRIPT = Path(__file__).with_name("rank_gpu.sh")
OUTPUT = "rank_gpus.txt"


def parse(text: str) -> list[tuple[int, int, str, str, str]]:
    """(procid, local rank, host, device, bus id) per rank."""
    found = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 6 and parts[0] == "perfguard-gpu" and parts[1].isdigit() \
                and parts[2].isdigit():
            found.append((int(parts[1]), int(parts[2]), parts[3], parts[4], parts[5]))
    return sorted(found)


def rank_gpu_errors(reported: list[tuple], expected: list[list], ranks: int,
                    gres: bool) -> list[str]:
    """What differs between the GPUs the ranks used and ``expected`` ([index, bus id] per
    local rank). Under Slurm's GRES a task may see its GPU renumbered: there only bus ids
    can be compared."""
    if len(reported) != ranks:
        return [f"{len(reported)} of {ranks} ranks reported their GPU"]
    errors = []
    for procid, local, host, device, bus in reported:
        index, want_bus = expected[local % len(expected)]
        if want_bus and bus.lower() != want_bus.lower():
            errors.append(f"rank {procid} on {host} used GPU {bus} (device {device}), the "
                          f"topology chose GPU {index} ({want_bus})")
        elif not want_bus and not gres and device != str(index):
            errors.append(f"rank {procid} on {host} used device {device}, the topology "
                          f"chose GPU {index}")
    return errors


def add_step(stage: Path, srun_extra: list[str]) -> str:
    """The script staged beside the job; its step's command, with the benchmark's GPU
    binding, run after the check's own commands and before the benchmark."""
    shutil.copy(SCRIPT, stage / SCRIPT.name)
    bind = [option for option in srun_extra if option.startswith("--gpu-bind")]
    return " ".join(["srun", "-J", HELPER_STEP, "--cpu-bind=none", *bind, "bash", SCRIPT.name,
                     ">", OUTPUT, "2>/dev/null", "|| true"])


def errors(stage: Path, expected: list[list], ranks: int, gres: bool) -> list[str]:
    """What the step reported against ``expected`` ([index, bus id] per local rank)."""
    path = stage / OUTPUT
    reported = parse(path.read_text(errors="replace")) if path.exists() else []
    return rank_gpu_errors(reported, expected, ranks, gres)
