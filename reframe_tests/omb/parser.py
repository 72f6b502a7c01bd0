"""Parse OSU Micro-Benchmarks output, every header variant from 5.x to 7.5.

    # OSU MPI-CUDA Bandwidth Test v7.2                    title: name, device, version
    # Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)
    # Size      Bandwidth (MB/s)                          columns (5.x–7.3: before Datatype)
    # Datatype: MPI_CHAR.                                 7.1+ (7.4+: before # Size)
    1                       1.01                          rows: whitespace separated

Collectives with ``-f`` add Min/Max Latency and Iterations; ``-c`` a Validation
column (Pass/Fail); 7.4+ ``-z`` tail-latency columns; ``osu_mbw_mr`` prints a
``# [ pairs: N ]`` line and ``MB/s  Messages/s`` columns; ``osu_barrier`` has no
Size column. Bandwidth MB/s is 10^6 bytes/s, latency microseconds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

TITLE = re.compile(r"^# OSU MPI(?:-(?P<device>CUDA|ROCM|OPENACC))?\s+(?P<name>.+?)\s+Test"
                   r"\s+v(?P<version>[\d.]+)", re.M)
#: Where the buffers were, as OMB says it: point-to-point up to 7.3 (``print_header`` in
#: ``c/util/osu_util.c``) "# Send Buffer on DEVICE (D) and Receive Buffer on HOST (H)",
#: one-sided (``print_header_one_sided`` in ``c/util/osu_util_mpi.c``) "# Rank 0 Memory on
#: DEVICE (D) and Rank 1 Memory on DEVICE (D)"; managed memory is ``MANAGED (MD)``. From
#: 7.4 ``osu_bw``/``osu_latency`` print only the title (``print_preamble``): the buffers
#: are then the ones the command line asked for.
BUFFERS = re.compile(r"^# (?:Send Buffer|Rank 0 Memory) on (?P<send>\w+) \((?P<s>\w+)\) and "
                     r"(?:Receive Buffer|Rank 1 Memory) on (?P<recv>\w+) \((?P<r>\w+)\)", re.M)
#: What an MPI that never reached the benchmark printed instead, in its own words: UCX's
#: log line (``[…] select.c:629  UCX  ERROR   no auxiliary transport to …``), Open MPI's
#: UCX PML (``pml_ucx.c:424  Error: ucp_ep_create(proc=0) failed: Destination is
#: unreachable``, ``ompi/mca/pml/ucx/pml_ucx.c``) and its help text
#: ``It looks like MPI_INIT failed`` (``help-mpi-runtime.txt``, mpi_init:startup).
STARTUP_FAILURE = re.compile(r"UCX\s+ERROR\s+(?P<ucx>.+?)\s*$"
                             r"|pml_ucx\.c:\d+\s+Error: (?P<pml>.+?)\s*$"
                             r"|(?P<init>It looks like MPI_INIT failed)", re.M)
PAIRS = re.compile(r"^# \[ pairs: (?P<pairs>\d+) \]", re.M)
COLUMN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ]*?\([^)]*\)|Messages/s|MB/s|Iterations|Validation")

#: OMB column header → (metric, unit). Columns not listed are kept but not stored.
METRICS = {
    "Bandwidth (MB/s)": ("bandwidth", "MB/s"),
    "MB/s": ("bandwidth", "MB/s"),
    "Messages/s": ("message_rate", "msg/s"),
    "Latency (us)": ("latency", "us"),
    "Latency(us)": ("latency", "us"),
    "Avg Latency(us)": ("latency", "us"),
    "Min Latency(us)": ("latency_min", "us"),
    "Max Latency(us)": ("latency_max", "us"),
    "P50 Tail Lat(us)": ("latency_p50", "us"),
    "P90 Tail Lat(us)": ("latency_p90", "us"),
    "P99 Tail Lat(us)": ("latency_p99", "us"),
}


class ParseError(ValueError):
    """Output that is not a complete OMB result."""


@dataclass
class OmbResult:
    name: str
    version: str
    device: str | None
    buffers: tuple[str, str]
    pairs: int | None
    columns: list[str]
    sizes: list[int] = field(default_factory=list)
    table: dict[str, list] = field(default_factory=dict)

    def series(self) -> dict[tuple[str, str], list[float]]:
        """(metric, unit) → values, for every column with a known metric."""
        return {METRICS[c]: self.table[c] for c in self.columns if c in METRICS}

    def at(self, column_metric: str, size: int | None = None) -> float:
        """A metric's value at a message size (None: the only row, e.g. osu_barrier)."""
        for (metric, _), values in self.series().items():
            if metric == column_metric:
                if size is None:
                    return values[-1]
                if size in self.sizes:
                    return values[self.sizes.index(size)]
                raise ParseError(f"{self.name}: no row for size {size} "
                                 f"(measured {self.sizes[0]}..{self.sizes[-1]})")
        raise ParseError(f"{self.name}: no {column_metric} column in {self.columns}")


def _header_columns(text: str) -> tuple[bool, list[str]]:
    """The last '# Size …' or '# Avg Latency…' line: (has size column, column names)."""
    sized = re.findall(r"^#\s*Size\s+(.+)$", text, re.M)
    if sized:
        return True, [c.strip() for c in COLUMN.findall(sized[-1])]
    unsized = re.findall(r"^#\s*((?:Avg )?Latency\s*\(us\).*)$", text, re.M)
    if unsized:
        return False, [c.strip() for c in COLUMN.findall(unsized[-1])]
    raise ParseError("no column header ('# Size …') in the output: the benchmark did not start "
                     "or printed an error")


def _value(token: str, column: str, line_no: int) -> float | int | str:
    if column == "Validation":
        if token not in ("Pass", "Fail"):
            raise ParseError(f"line {line_no}: validation {token!r} is neither Pass nor Fail")
        return token
    try:
        number = float(token)
    except ValueError:
        raise ParseError(f"line {line_no}: {token!r} in column {column!r} is not a number") \
            from None
    if not math.isfinite(number):
        raise ParseError(f"line {line_no}: {column} is {token}")
    return int(number) if column == "Iterations" else number


def _buffers(text: str, asked: tuple[str, str] | None) -> tuple[str, str]:
    """The buffers OMB printed, which must be the ones ``asked`` (``D D`` after ``-d cuda``);
    where it printed none (7.4+ point-to-point, any run without ``-d``), the asked ones,
    else host memory, OMB's default (``options.src = 'H'``)."""
    printed = BUFFERS.search(text)
    if printed is None:
        return asked or ("H", "H")
    found = (printed["s"], printed["r"])
    if asked and tuple(b[0] for b in found) != tuple(b[0] for b in asked):
        raise ParseError(f"asked {','.join(asked)} buffers but OMB printed {','.join(found)}: "
                         f"{printed.group(0)[2:]}")
    return found


def failure_causes(text: str) -> list[str]:
    """Why the MPI job ended before OMB printed its title, each cause once, as printed."""
    causes: list[str] = []
    for match in STARTUP_FAILURE.finditer(text):
        cause = (f"UCX ERROR {match['ucx']}" if match["ucx"] else
                 f"pml_ucx: {match['pml']}" if match["pml"] else match["init"])
        if cause not in causes:
            causes.append(cause)
    return causes


def parse(text: str, expect_max_size: int | None = None,
          buffers: tuple[str, str] | None = None) -> OmbResult:
    """The table; ``buffers`` are the ones the command line asked for (``("D", "D")``)."""
    title = TITLE.search(text)
    if title is None:
        causes = failure_causes(text)
        if causes:
            raise ParseError(f"MPI failed before OMB started: {'; '.join(causes)}")
        raise ParseError("no '# OSU MPI … Test vX' title: not OSU Micro-Benchmarks output")
    has_size, columns = _header_columns(text)
    pairs = PAIRS.search(text)
    result = OmbResult(
        name=title["name"], version=title["version"], device=title["device"],
        buffers=_buffers(text, buffers),
        pairs=int(pairs["pairs"]) if pairs else None, columns=columns,
        table={c: [] for c in columns})
    for line_no, line in enumerate(text.splitlines(), 1):
        tokens = line.split()
        if not tokens or not tokens[0][0].isdigit() or (has_size and not tokens[0].isdigit()):
            continue  # comments, blank lines, launcher and warning lines
        if has_size:
            size, tokens = int(tokens[0]), tokens[1:]
            if result.sizes and size <= result.sizes[-1]:
                raise ParseError(f"line {line_no}: size {size} after {result.sizes[-1]}: "
                                 f"two outputs mixed or the table restarted")
            result.sizes.append(size)
        if len(tokens) != len(columns):
            raise ParseError(f"line {line_no}: {len(tokens)} values for columns {columns} "
                             f"(truncated line?)")
        for column, token in zip(columns, tokens):
            result.table[column].append(_value(token, column, line_no))
    if not any(result.table.values()):
        raise ParseError(f"{result.name}: header but no result rows (the run was cut short)")
    if expect_max_size is not None and has_size and result.sizes[-1] != expect_max_size:
        raise ParseError(f"{result.name}: table ends at {result.sizes[-1]} bytes, expected "
                         f"{expect_max_size} (output truncated)")
    failed = [s for s, v in zip(result.sizes, result.table.get("Validation", [])) if v == "Fail"]
    if failed:
        raise ParseError(f"{result.name}: validation failed at sizes {failed}")
    return result
