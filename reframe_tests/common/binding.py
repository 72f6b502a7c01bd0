"""Proof of core binding: parse what `srun --cpu-bind=verbose` and the ranks report.

srun prints to stderr, per task::

    cpu-bind=MASK - node2, task  1  0 [6091]: mask 0x2 set

and our programs print their own affinity as seen by the kernel, so a check can
show that the binding it asked for is the binding the process ran with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SRUN_MASK = re.compile(
    r"cpu-bind=(?P<kind>[A-Z_]+)\s*-\s*(?P<host>\S+),\s*task\s+(?P<task>\d+)\s+"
    r"(?P<local>\d+)\s+\[\d+\]:\s*mask\s+(?P<mask>0x[0-9a-fA-F]+)\s+set"
)


def mask_of(cpus: Iterable[int]) -> int:
    mask = 0
    for cpu in cpus:
        mask |= 1 << int(cpu)
    return mask


def srun_masks(stderr: str) -> dict[int, tuple[str, int]]:
    """Global task id → (host, mask) for every binding srun reported as set."""
    return {
        int(m["task"]): (m["host"], int(m["mask"], 16)) for m in SRUN_MASK.finditer(stderr)
    }


def parse_mask(text: str) -> int:
    return int(text, 16)
