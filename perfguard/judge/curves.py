"""Whole-curve verdicts: every message size of a sweep against its own history.

A key figure is one size (OMB's largest for bandwidth, smallest for latency); a
firmware or driver change often hurts only a band of sizes (the rendezvous protocol,
eager-to-rendezvous switch, a PCIe setting). Each size of each curve of the run is
judged like a key figure (perfguard.judge, the same rule and direction) and the curve is
summarised as ranges: "regressed at 64 KiB–1 MiB by 5.1–6.0 %; 8 B–4 KiB unchanged".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import psycopg

from perfguard.judge import history
from perfguard.judge import rules as judge

#: A curve regressed (improved) where this many consecutive sizes did: what a protocol,
#: firmware or PCIe change does (a band of sizes), and what chance rarely does.
BAND = 2

# The points that are sizes of a curve: {"size": 65536}.
SIZED_POINTS_SQL = """
SELECT id, (coords->>'size')::bigint FROM point
WHERE coords ? 'size' AND jsonb_typeof(coords->'size') = 'number'
"""

DIRECTIONS_SQL = """
SELECT check_name, metric, better FROM metric_direction WHERE check_name = ANY(%s)
"""


@dataclass
class Curve:
    check: str
    params: dict
    partition: str
    environ: str
    metric: str
    unit: str
    better: str
    #: size → the judgement of that size
    sizes: dict[int, judge.Judgement]

    @property
    def state(self) -> str:
        """Regressed (improved) where at least ``BAND`` consecutive sizes did; one size
        alone is inconclusive: at a false alarm in 200 per size, a curve of 23 sizes
        with independent noise would otherwise alarm one night in nine
        (benchmarks/ingest.py's synthetic curves flagged 2,000 of 10,000 curves)."""
        band = min(BAND, len(self.sizes))
        for state in (judge.REGRESSION, judge.IMPROVEMENT):
            if any(len([s for s in self.sizes if first <= s <= last]) >= band
                   for first, last, _ in self._ranges(state)):
                return state
        states = {j.state for j in self.sizes.values()}
        if states & {judge.REGRESSION, judge.IMPROVEMENT, judge.INCONCLUSIVE}:
            return judge.INCONCLUSIVE
        return judge.PASS

    def summary(self) -> str:
        parts = []
        for state, word in ((judge.REGRESSION, "regressed"), (judge.IMPROVEMENT, "improved"),
                            (judge.INCONCLUSIVE, "inconclusive"), (judge.PASS, "unchanged")):
            for first, last, changes in self._ranges(state):
                span = size_label(first) + ("" if first == last else f"–{size_label(last)}")
                size = "" if state in (judge.PASS, judge.INCONCLUSIVE) or not changes else \
                    f" by {_percent_range(changes)}"
                parts.append(f"{word} at {span}{size}")
        return "; ".join(parts)

    def _ranges(self, state: str) -> list[tuple[int, int, list[float]]]:
        """Runs of consecutive sizes in ``state``: (first, last, |changes|)."""
        ranges: list[tuple[int, int, list[float]]] = []
        previous_in = False
        for size in sorted(self.sizes):
            j = self.sizes[size]
            if j.state != state:
                previous_in = False
                continue
            change = [abs(j.change)] if j.change is not None else []
            if previous_in:
                first, _, changes = ranges[-1]
                ranges[-1] = (first, size, changes + change)
            else:
                ranges.append((size, size, change))
            previous_in = True
        return ranges


def size_label(size: int) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _percent_range(changes: list[float]) -> str:
    low, high = min(changes), max(changes)
    return f"{low:.1%}" if f"{low:.1%}" == f"{high:.1%}" else f"{low:.1%}–{high:.1%}"


def judge_curves(conn: psycopg.Connection, run_id: int,
                 rules: judge.Rules = judge.DEFAULT_RULES,
                 moved_only: bool = False) -> list[Curve]:
    """The run's sized curves, each size judged against its own history. ``moved_only``:
    only the curves where some size could be a regression or an improvement (its value
    off its history's median by more than the rule's ``min_change``: the verdict adds a
    line for no other curve), so that the quiet thousands are not judged size by size."""
    sizes = dict(conn.execute(SIZED_POINTS_SQL).fetchall())
    checks = [c for (c,) in conn.execute(
        "SELECT DISTINCT check_name FROM testcase WHERE run_id = %s", (run_id,))]
    better = {(c, m): b for c, m, b in conn.execute(DIRECTIONS_SQL, (checks,))}
    members: dict[tuple, dict[int, history.Series]] = defaultdict(dict)
    for series in history.read(conn, run_id, checks, sorted(sizes), rules).values():
        if series.measured and (series.check, series.metric) in better:
            key = (series.check, series.params_text, series.partition, series.environ,
                   series.metric)
            members[key][sizes[series.point_id]] = series
    epochs: dict = {}
    curves = []
    for key, by_size in members.items():
        check, _, partition, environ, metric = key
        rule = rules.for_metric(check, metric)
        values = {size: history.values(conn, series, rule.same_fingerprint, epochs)
                  for size, series in by_size.items()}
        if moved_only and not any(judge.could_move(v, rule) for v in values.values()):
            continue
        direction = better[(check, metric)]
        judged = {size: judge.judge_series(v, direction, rule) for size, v in values.items()}
        first = next(iter(by_size.values()))
        curves.append(Curve(check, first.params, partition, environ, metric, first.unit,
                            direction, judged))
    return sorted(curves, key=lambda c: (c.check, str(sorted(c.params.items())), c.metric))
