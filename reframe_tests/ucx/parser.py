"""Parse ucx_perftest client output, one measurement per `# perfguard size=N` block.

The client prints a table whose last row starts with ``Final:``::

    Final:   10000   0.280   0.299   0.299   25.52   25.52   3345007   3345007

columns: iterations, latency 50th percentile / average / overall (usec),
bandwidth average / overall (MB/s, where UCX's MB is 2^20 bytes), message rate
average / overall (msg/s). The averages are those of the last report interval: on a
node throttled to a fifth of a core that interval held no iteration and its average
latency read ``inf`` (``Final: 1000 80.665 inf 1001.678 0.00 998.32 0 998``); the
figures taken are the percentile and the overall ones.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

SIZE_MARK = re.compile(r"^# perfguard size=(\d+)\s*$", re.M)
FINAL = re.compile(r"^Final:\s+(\d+)" + r"\s+([0-9.eE+-]+|inf|nan)" * 7 + r"\s*$", re.M)


class ParseError(ValueError):
    """Output that is not a complete ucx_perftest measurement."""


@dataclass(frozen=True)
class UcxResult:
    size: int
    iterations: int
    latency_p50_us: float
    latency_us: float
    bandwidth_mib_s: float
    message_rate: float


def parse(output: str) -> list[UcxResult]:
    """Every size block must end in a Final row; a truncated block is an error."""
    marks = list(SIZE_MARK.finditer(output))
    if not marks:
        raise ParseError("no '# perfguard size=' marker: the measurement loop never ran")
    return [parse_final(block, int(mark.group(1)), f"message size {mark.group(1)}")
            for mark, block in marked_blocks(marks, output)]


def marked_blocks(marks: list[re.Match], output: str) -> Iterator[tuple[re.Match, str]]:
    """Each marker with the output between it and the next marker (or the end)."""
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(output)
        yield mark, output[mark.end():end]


def parse_final(block: str, size: int, what: str) -> UcxResult:
    """The ``Final:`` row of one measurement's output; ``what`` names it in errors."""
    final = FINAL.search(block)
    if final is None:
        raise ParseError(f"{what}: no 'Final:' row (output truncated or the client failed)")
    values = [float(v) for v in final.groups()[1:]]
    taken = values[0], values[2], values[4], values[6]  # the last interval's averages aside
    if not all(math.isfinite(v) for v in taken):
        raise ParseError(f"{what}: non-finite value in {final.group(0)!r}{untimed(values)}")
    return UcxResult(size, int(final.group(1)), *taken)


def untimed(values: list[float]) -> str:
    """Why an overall bandwidth is inf where ucx_perftest timed the run as no time at all.

    libperf divides the bytes by the run's elapsed timer ticks (``ucx_perf_calc_result``:
    ``bytes * sec_value / (current.time - start_time)``), so a run too short for its timer
    prints an overall latency of 0.000 and an infinite bandwidth and message rate. Recorded
    on the embedded cluster on a quiet host: ``ucp_put_bw`` at 8 B with ``-n 50`` (13 of 60
    nights; by hand 4 of 15 runs at ``-n 50``, none of 15 at 200 or 1000)."""
    if values[2] == 0 and math.isinf(values[4]):
        return (": ucx_perftest timed the run as 0 µs overall, too short for its timer; "
                "raise the iterations (-n)")
    return ""
