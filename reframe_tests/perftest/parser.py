"""Parse perftest (ib_*_bw / ib_*_lat) client output.

    ---------------------------------------------------------------------------------------
                        RDMA_Write BW Test
     ...
     #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
    Conflicting CPU frequency values detected: ... (a warning inside the table)
     65536      5000             11686.69            11685.10          0.186962
    ---------------------------------------------------------------------------------------

The bandwidth label says MB/sec up to 24.06 and MiB/sec from 24.07; the unit was
always 2^20 bytes/s, so both are stored as MiB/s. ``--report_gbits`` prints Gb/sec.
Latency tables give min/max/typical/avg/stdev and the 99/99.9 percentiles in usec;
``-D`` duration runs print only t_avg and tps.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

HEADER = re.compile(r"^\s*#bytes\s+(?:#sl\s+)?#iterations\s+(?P<rest>.+)$", re.M)
BANNER = re.compile(r"^\s+(?P<test>(?:\w+ )*\w+ (?:BW|Latency) Test)\s*$", re.M)
ATOMIC_TYPE = re.compile(r"Atomic Type\s*:\s*(?P<kind>\w+)")
DASHES = re.compile(r"^\s*-{20,}\s*$")

BW_COLUMNS = ["bandwidth_peak", "bandwidth", "message_rate"]
LAT_COLUMNS = ["latency_min", "latency_max", "latency", "latency_avg", "latency_stdev",
               "latency_p99", "latency_p999"]
LAT_DURATION_COLUMNS = ["latency_avg", "transactions_per_s"]


class ParseError(ValueError):
    """Output that is not a complete perftest result."""


@dataclass
class PerftestResult:
    test: str
    atomic: str | None
    kind: str                                # "bw" or "lat"
    units: dict[str, str]                    # metric → unit
    sizes: list[int] = field(default_factory=list)
    table: dict[str, list[float]] = field(default_factory=dict)

    def at(self, metric: str, size: int | None = None) -> float:
        values = self.table[metric]
        return values[-1] if size is None else values[self.sizes.index(size)]


def _layout(rest: str) -> tuple[str, list[str], dict[str, str]]:
    if "BW peak[" in rest:
        label = re.search(r"BW average\[(?P<u>[^\]]+)\]", rest)["u"]
        bw_unit = "Gb/s" if label.startswith("Gb") else "MiB/s"
        return "bw", BW_COLUMNS, {"bandwidth_peak": bw_unit, "bandwidth": bw_unit,
                                  "message_rate": "Mpps"}
    if "t_min[" in rest:
        return "lat", LAT_COLUMNS, dict.fromkeys(LAT_COLUMNS, "us")
    if "t_avg[" in rest:
        return "lat", LAT_DURATION_COLUMNS, {"latency_avg": "us", "transactions_per_s": "1/s"}
    raise ParseError(f"unknown perftest table header: {rest.strip()!r}")


def parse(text: str) -> PerftestResult:
    banner = BANNER.search(text)
    header = HEADER.search(text)
    if header is None:
        raise ParseError("no '#bytes #iterations' table header: the test did not run (no RDMA "
                         "device, server unreachable or options rejected)")
    kind, columns, units = _layout(header["rest"])
    atomic = ATOMIC_TYPE.search(text)
    result = PerftestResult(test=banner["test"] if banner else "unknown", kind=kind,
                            atomic=atomic["kind"] if atomic else None, units=units,
                            table={c: [] for c in columns})
    closed = False
    for line_no, line in enumerate(text[header.end():].splitlines(), 1):
        if DASHES.match(line):
            closed = bool(result.sizes)
            if closed:
                break
            continue
        tokens = line.split()
        if not tokens or not tokens[0].isdigit():
            continue  # warnings inside the table (cpufreq, "BW peak won't be measured")
        values = tokens[2:] if len(tokens) == len(columns) + 2 else None
        if values is None:
            raise ParseError(f"table row {line_no} has {len(tokens)} fields, expected "
                             f"{len(columns) + 2}: {line.strip()!r} (truncated output?)")
        result.sizes.append(int(tokens[0]))
        for column, token in zip(columns, values):
            number = float(token)
            if not math.isfinite(number):
                raise ParseError(f"table row {line_no}: {column} is {token}")
            result.table[column].append(number)
    if not result.sizes:
        raise ParseError(f"{result.test}: table header but no result rows (cut short)")
    if not closed:
        raise ParseError(f"{result.test}: the table is not closed by a dashed line: the "
                         f"output was truncated after {result.sizes[-1]} bytes")
    return result
