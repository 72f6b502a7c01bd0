"""Proof of core binding: parse what `srun --cpu-bind=verbose` and the ranks report.

srun prints to stderr, per task::

    cpu-bind=MASK - node2, task  1  0 [6091]: mask 0x2 set

and our programs print their own affinity as seen by the kernel, so a check can
show that the binding it asked for is the binding the process ran with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

SRUN_MASK = re.compile(
    r"cpu-bind=(?P<kind>[A-Z_]+)\s*-\s*(?P<host>\S+),\s*task\s+(?P<task>\d+)\s+"
    r"(?P<local>\d+)\s+\[\d+\]:\s*mask\s+(?P<mask>0x[0-9a-fA-F]+)\s+set"
)


def mask_of(cpus: Iterable[int]) -> int:
    mask = 0
    for cpu in cpus:
        mask |= 1 << int(cpu)
    return mask


class SrunBinding(NamedTuple):
    host: str
    local_rank: int
    mask: int


def srun_masks(stderr: str) -> dict[int, SrunBinding]:
    """Global task id → where srun (or pin_per_node.sh) bound it, for every binding
    reported as set."""
    return {int(m["task"]): SrunBinding(m["host"], int(m["local"]), int(m["mask"], 16))
            for m in SRUN_MASK.finditer(stderr)}


def binding_errors(stderr: str, num_tasks: int, expected_cores: list[int],
                   node_cores: dict[str, list[int]] | None = None) -> list[str]:
    """Why the binding srun reported is not the one requested; empty when it is.

    ``expected_cores[local_rank]`` is the core each node's local rank must own, unless
    ``node_cores`` gives a host its own list; with no expectation every task must still
    have been bound (a mask reported).
    """
    reported = srun_masks(stderr)
    errors = [f"srun reported no cpu-bind mask for task {task}"
              for task in range(num_tasks) if task not in reported]
    for task, bound in sorted(reported.items()):
        cores = (node_cores or {}).get(bound.host, expected_cores)
        if cores and bound.local_rank < len(cores):
            want = mask_of([cores[bound.local_rank]])
            if bound.mask != want:
                errors.append(f"task {task} (local rank {bound.local_rank}) on {bound.host}: "
                              f"mask {hex(bound.mask)}, expected {hex(want)}")
    return errors


def parse_mask(text: str) -> int:
    return int(text, 16)
