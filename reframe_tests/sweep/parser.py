"""Parse a fabric sweep's output: one block per measurement, headed by its marker::

    # perfguard sweep server=node1 client=node3 test=tag_bw size=1048576
    ... ucx_perftest client output, ending in a Final: row ...
    # perfguard sweep failed rc=1        (instead, when the measurement itself failed)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reframe_tests.ucx.parser import ParseError, UcxResult, marked_blocks, parse_final

MARK = re.compile(r"^# perfguard sweep server=(\S+) client=(\S+) test=(\S+) size=(\d+)\s*$",
                  re.M)
FAILED = re.compile(r"^# perfguard sweep failed rc=(\d+)\s*$", re.M)


@dataclass(frozen=True)
class PairResult:
    server: str
    client: str
    test: str
    size: int
    #: None: the measurement failed (its server never listened, the client exited non-zero)
    result: UcxResult | None


def parse(output: str) -> list[PairResult]:
    """Every marked block holds a Final row or a failure marker; anything else (a block
    cut short) is an error naming the pair."""
    marks = list(MARK.finditer(output))
    if not marks:
        raise ParseError("no '# perfguard sweep' marker: the sweep never ran a pair")
    results = []
    for mark, block in marked_blocks(marks, output):
        server, client, test, size = mark.groups()
        what = f"{test} {server}→{client}"
        if FAILED.search(block):
            results.append(PairResult(server, client, test, int(size), None))
            continue
        results.append(PairResult(server, client, test, int(size),
                                  parse_final(block, int(size), what)))
    return results


def typical_latency(result: UcxResult) -> float:
    """The latency a sweep judges: ucx_perftest's typical (50th percentile) round trip.

    A pair's 10 000 8-byte round trips last a few milliseconds, so one preemption of its
    busy-polling server or client (another job's process, a daemon on a shared node) adds
    a whole time slice to the average: under two busy loops on the embedded cluster's two
    cores the average read 10.8 and 15.5 µs where pairs measured 0.16 µs, twice in a row,
    and a healthy node was blamed (CI, 2026-11-24). A slow link or HCA slows every round
    trip and moves the median with it; a node short of CPU is the loopback bandwidth's to
    find (throttled to a fifth of a core: typical 0.165 µs, average 2.458 µs, bandwidth
    1 001 MB/s against its peers' 5 000).
    """
    return result.latency_p50_us


__all__ = ["PairResult", "ParseError", "parse", "typical_latency"]
