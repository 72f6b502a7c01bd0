"""GPCNeT's result tables (network_test and network_load_test, version 1.3).

Each table is framed by ``+---+`` bars: a title row (``| Isolated Network Tests |``),
a header row (``| Name | Avg | 99% | Units |``; verbose builds add columns) and one row
per test (``| RR Two-sided Lat (8 B) | 18.3 | 74.5 | usec |``). network_load_test's
impact table names its columns in a second header row (``| | Avg | 99% |``, under
``| Name | Congestion Impact Factor |``) and has no units: its cells are factors
(``| RR Two-sided Lat (8 B) | 1.8X | 3.4X |``), congested over isolated. Formats as
printed by GPCNeT's utils.c (print_header, print_results, print_comparison_results) and
recorded live (tests/data/replay/SOURCES.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: "Test with 16 MPI ranks (16 nodes)": the scale GPCNeT actually ran at.
SCALE = re.compile(r"Test with (\d+) MPI ranks \((\d+) nodes\)")


class ParseError(ValueError):
    pass


@dataclass
class Table:
    title: str
    columns: list[str] = field(default_factory=list)
    #: test name → column → value; units per test (``X`` for an impact factor).
    rows: dict[str, dict[str, float]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    ranks: int
    nodes: int
    tables: list[Table]

    def table(self, title: str) -> Table | None:
        return next((t for t in self.tables if t.title.startswith(title)), None)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse(text: str) -> Result:
    scale = SCALE.search(text)
    if scale is None:
        raise ParseError("no 'Test with N MPI ranks (M nodes)' line: GPCNeT did not start "
                         "its measurements")
    tables: list[Table] = []
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = _cells(line)
        if len(cells) == 1:
            tables.append(Table(title=cells[0]))
        elif tables and cells[0] in ("Name", ""):  # the impact table's columns: 2nd row
            tables[-1].columns = cells[1:]
        elif tables and tables[-1].columns:
            tables[-1].rows[cells[0]], tables[-1].units[cells[0]] = _row(tables[-1], cells)
    if not any(t.rows for t in tables):
        raise ParseError("no result table: GPCNeT stopped before its first test ended")
    return Result(int(scale.group(1)), int(scale.group(2)), [t for t in tables if t.rows])


def _row(table: Table, cells: list[str]) -> tuple[dict[str, float], str]:
    named = dict(zip(table.columns, cells[1:]))
    unit = named.pop("Units", "X")
    try:
        return {column: float(value.rstrip("X")) for column, value in named.items()}, unit
    except ValueError as exc:
        raise ParseError(f"{table.title}: row {cells[0]!r}: {exc}") from None
