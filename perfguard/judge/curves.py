"""Whole-curve verdicts: every message size of a sweep against its own history.

A key figure is one size (OMB's largest for bandwidth, smallest for latency); a
firmware or driver change often hurts only a band of sizes (the rendezvous protocol,
eager-to-rendezvous switch, a PCIe setting). Each size of each curve of the run is
judged like a key figure (perfguard.judge, the same rule and direction) and the curve is
summarised as ranges: "regressed at 64 KiB–1 MiB by 5.1–6.0 %; 8 B–4 KiB unchanged".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

import numpy as np

from perfguard.judge import history
from perfguard.judge import rules as judge
from perfguard.store import queries
from perfguard.store.queries import Connection

#: A curve regressed (improved) where this many consecutive sizes did: what a protocol,
#: firmware or PCIe change does (a band of sizes), and what chance rarely does.
BAND = 2


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
    #: size → its recent nights (the judged one last): what its evidence is read from
    recent: dict[int, list[float]] = field(default_factory=dict)
    #: size → the nights its baseline was taken from (``judge.judged_history``)
    history: dict[int, list[float]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Regressed (improved) where at least ``BAND`` consecutive sizes did; one size
        alone is inconclusive: at a false alarm in 200 per size, a curve of 23 sizes
        with independent noise would otherwise alarm one night in nine
        (benchmarks/ingest.py's synthetic curves flagged 2,000 of 10,000 curves)."""
        for state in (judge.REGRESSION, judge.IMPROVEMENT):
            if self._bands(state):
                return state
        states = {j.state for j in self.sizes.values()}
        if states & {judge.REGRESSION, judge.IMPROVEMENT, judge.INCONCLUSIVE}:
            return judge.INCONCLUSIVE
        return judge.PASS

    def distances(self) -> tuple[float, ...]:
        """The evidence of a regressed (improved) curve: the worse-signed distances of
        the recent nights (``judge.evidence``) of its typical size (``typical_size``)."""
        return self.evidence()[0]

    def evidence(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``distances``, and the typical size's baseline nights in its noise from its
        centre (what the findings learn the curve's far nights from:
        ``findings.far_shares``); ((), ()) for a curve that neither regressed nor
        improved."""
        size = self.typical_size()
        if size is None:
            return (), ()
        j = self.sizes[size]
        return (judge.evidence(self.recent[size], j, self.better)[1],
                judge.history_distances(self.history.get(size, []), j, self.better))

    def typical_size(self) -> int | None:
        """The middle size, by strength, of a regressed (improved) curve's bands (runs
        of ``BAND`` or more consecutive sizes in its state; the weaker middle one of an
        even count). The sizes of a sweep move together (one run, one protocol), so they
        are one line's worth of evidence, not a line each; a size alone outside a band is
        chance by the state's own rule and counts for nothing; and a curve is no stronger
        than its band's typical size (it was taken as the cap of two nights, z 7.1,
        whatever its sizes read: on 60 quiet real nights curves of two sizes 2-3σ out
        paged)."""
        state = self.state
        if state not in (judge.REGRESSION, judge.IMPROVEMENT):
            return None
        strengths = []
        for band in self._bands(state):
            for size in (size for size in band if size in self.recent):
                d = judge.evidence(self.recent[size], self.sizes[size], self.better)[1]
                strengths.append((abs(sum(d)) / len(d) ** 0.5 if d else 0.0, size))
        strengths.sort(key=lambda found: found[0])  # stable: ties keep the sizes' order
        return strengths[(len(strengths) - 1) // 2][1] if strengths else None

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

    def _bands(self, state: str) -> list[list[int]]:
        """The sizes of each run of at least ``BAND`` consecutive sizes in ``state`` (all
        sizes, if the curve has fewer): what makes the curve's state and its evidence."""
        band = min(BAND, len(self.sizes))
        runs = [[s for s in sorted(self.sizes) if first <= s <= last]
                for first, last, _ in self._ranges(state)]
        return [sizes for sizes in runs if len(sizes) >= band]

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


def judge_curves(conn: Connection, run_id: int,
                 rules: judge.Rules = judge.DEFAULT_RULES,
                 moved_only: bool = False,
                 since: Callable[[history.Series], history.Series] | None = None,
                 variants: list[UUID] | None = None) -> list[Curve]:
    """The run's sized curves, each size judged against its own history. ``moved_only``:
    only the curves that could have regressed or improved (``could_band``: the verdict adds
    a line for no other curve), screened on their values before a series is named or a
    size judged, so that the quiet thousands cost a median per size. ``since``: each
    series cut to the part it is judged on (an accepted new level). ``variants``: only
    the curves of those test case variants (the few a report draws)."""
    sizes = dict(queries.tuples(conn, "sized_points"))
    checks = [c for (c,) in queries.tuples(conn, "checks_of_run", (run_id,))]
    better = {(c, m): b for c, m, b in queries.tuples(conn, "directions_of_checks", (checks,))}
    candidates = []
    for curve in history.curves(conn, run_id, checks, sorted(sizes), rules, variants):
        rule = rules.for_metric(curve.check, curve.metric)
        if (curve.check, curve.metric) in better and curve.measured:
            candidates.append((curve, rule))
    if moved_only:  # their values are all they are judged on: screened before they are named
        candidates = _could_band(candidates, sizes)
    rows = [row for curve, _ in candidates for row in curve.rows if row[5]]
    members: dict[tuple, dict[int, history.Series]] = defaultdict(dict)
    for series in history.named(conn, rows).values():
        key = (series.check, series.params_text, series.partition, series.environ,
               series.metric)
        members[key][sizes[series.point_id]] = series
    epochs: dict = {}
    curves = []
    for key, by_size in members.items():
        check, _, partition, environ, metric = key
        rule = rules.for_metric(check, metric)
        values = {size: history.values(conn, since(series) if since else series,
                                       rule.same_fingerprint, epochs)
                  for size, series in by_size.items()}
        if moved_only and rule.same_fingerprint and not could_band(values, rule):
            continue  # screened on the values since its nodes' last change
        first = next(iter(by_size.values()))
        curves.append((Curve(check, first.params, partition, environ, metric, first.unit,
                             better[(check, metric)], {}), values, rule))
    _judge_sizes(curves)
    return sorted((curve for curve, _, _ in curves),
                  key=lambda c: (c.check, str(sorted(c.params.items())), c.metric))


def _judge_sizes(curves: list[tuple[Curve, dict[int, list[float]], judge.Rule]]) -> None:
    """Each size of each curve judged (``Curve.sizes``), all baselines at once."""
    sized = [(curve, size, series, rule) for curve, values, rule in curves
             for size, series in values.items()]
    judged = judge.judge_all([series for _, _, series, _ in sized],
                             [curve.better for curve, _, _, _ in sized],
                             [rule for _, _, _, rule in sized])
    for (curve, size, series, rule), judgement in zip(sized, judged):
        curve.sizes[size] = judgement
        curve.recent[size] = judge.split(series, rule)[1]
        curve.history[size] = judge.judged_history(series, rule)


def could_band(values: dict[int, list[float] | tuple[float, ...]], rule: judge.Rule) -> bool:
    """Whether a curve (size → its series) could be judged regressed or improved
    (``Curve.state``): only where ``BAND`` consecutive sizes (all, if fewer) each could move
    (``judge.movement``), the same way."""
    return banded([judge.movement(values[size], rule) for size in sorted(values)])


def _could_band(curves: list[tuple[history.CurveNights, judge.Rule]],
                sizes: dict[int, int]) -> list[tuple[history.CurveNights, judge.Rule]]:
    """The ``curves`` (each with its rule) that ``could_band`` on all their values, those
    whose nights listed the same points screened together (one median per size and
    shape); a rule that judges since the nodes' last change is screened later."""
    kept: dict[int, bool] = {}
    stacks: dict[tuple, list[int]] = defaultdict(list)
    for index, (curve, rule) in enumerate(curves):
        if rule.same_fingerprint:
            continue
        if curve.nights is None:
            kept[index] = could_band({sizes[row[2]]: row[3] for row in curve.rows if row[5]},
                                     rule)
        else:
            stacks[(curve.point_ids, len(curve.nights), rule)].append(index)
    for (point_ids, _, rule), members in stacks.items():
        by_size = np.argsort([sizes[point] for point in point_ids], kind="stable")
        moves = judge.movements(np.stack([curves[i][0].nights for i in members]), rule)
        for index, banded_ in zip(members, banded_rows(moves[:, by_size]).tolist()):
            kept[index] = banded_
    return [curve for index, curve in enumerate(curves) if kept.get(index, True)]


def banded(moves: list[int]) -> bool:
    """Whether ``BAND`` consecutive of a curve's ``moves`` (``judge.movement`` of each size,
    smallest first; all, if fewer) are the same move."""
    return bool(banded_rows(np.asarray([moves], dtype=np.int64).reshape(1, -1))[0])


def banded_rows(moves: np.ndarray) -> np.ndarray:
    """``banded`` of each row of ``moves`` (curves × sizes, smallest first), at once."""
    band = min(BAND, moves.shape[1])
    found = np.zeros(len(moves), dtype=bool)
    for first in range(moves.shape[1] - band + 1) if band else ():
        window = moves[:, first:first + band]
        found |= (window[:, 0] != 0) & (window == window[:, :1]).all(axis=1)
    return found
