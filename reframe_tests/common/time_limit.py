"""Every job's time limit, derived from what it runs.

Without ``--time`` a job gets its partition's default, often days: a hung NCCL step holds
four exclusive GPU nodes until then. Where nobody set one (the user's ``-S time_limit``,
the site's ``time_limits`` per check in the topology file, the partition's own default),
the check's estimate of its work gives it: sizes × iterations at a floor rate no healthy
fabric is below (1 GB/s, 20 µs a message: FDR does 6 GB/s and 1 µs), times a margin, after
a job's start (allocation, fingerprints on every node, MPI start-up).
"""

from __future__ import annotations

import math

#: Job start on real nodes: allocation, the fingerprint step, MPI start-up at scale.
START_S = 300
#: How far above the floor-rate estimate a job may run before it is taken as hung.
MARGIN = 4
#: A check that gives no estimate.
DEFAULT_WORK_S = 300
#: The floor: no healthy link is slower (bytes per second), no message takes longer.
FLOOR_BYTES_PER_S = 1e9
FLOOR_MESSAGE_S = 20e-6


def doubling_sizes(smallest: int, largest: int) -> list[int]:
    """The sizes a benchmark that doubles from ``smallest`` to ``largest`` runs."""
    sizes, size = [], max(1, smallest)
    while size <= largest:
        sizes.append(size)
        size *= 2
    return sizes


def sweep_seconds(messages: list[tuple[int, int]]) -> float:
    """(count, bytes) of each size's messages → seconds at the floor rate."""
    return sum(count * (FLOOR_MESSAGE_S + size / FLOOR_BYTES_PER_S)
               for count, size in messages)


def limit_seconds(work_s: float | None) -> int:
    """The job's limit, in whole minutes: start, then the work with its margin."""
    work = DEFAULT_WORK_S if work_s is None else work_s
    return 60 * math.ceil((START_S + MARGIN * work) / 60)


def minutes(seconds: float) -> str:
    """'25 min' for a limit in seconds (what a TIMEOUT says)."""
    return f"{math.ceil(seconds / 60)} min"
