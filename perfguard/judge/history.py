"""A run's series as the judge reads them: for every series the run measured (system,
check, variant, partition, environ, metric and point), its values over the recent runs,
oldest first, the run's own last; optionally only those of the current fingerprint epoch
(since the environment of the judged nodes last changed).

Both key figures and curve points are read as the recent runs' blocks (0019: a run's
values of one check, metric and point list as one matrix) and split into series here,
by numpy, keeping the values of the passed test cases (not failed, not superseded). The
reads are bounded to the recent runs and the months they lie in: judging a run costs the
same after a year of nightly runs as after a month.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

import numpy as np

from perfguard.judge.rules import Rules
from perfguard.store import queries
from perfguard.store.queries import Connection


class Series(NamedTuple):
    check: str
    #: The variant's parameters as PostgreSQL prints the jsonb (one text per value).
    params_text: str
    partition: str
    environ: str
    metric: str
    unit: str
    point_id: int
    system: str
    values: tuple[float, ...]
    #: When each value was measured; only read where a rule needs it (same_fingerprint).
    times: tuple[datetime, ...] | None
    #: The nodes of the series' newest test case (the judged run's, when it measured it).
    nodes: tuple[str, ...]
    #: Whether the judged run measured this series (else it ends before the run).
    measured: bool

    @property
    def params(self) -> dict:
        return json.loads(self.params_text)

    @property
    def key(self) -> tuple:
        return (self.check, self.params_text, self.partition, self.environ, self.metric,
                self.point_id)


@dataclass(frozen=True)
class CurveNights:
    """One curve's nights (a variant, partition, environ and metric): what a curve's
    verdict screens before any ``Series`` is named."""
    #: The digest of its check and parameters (0018's testcase.variant), its 16 bytes.
    variant: bytes
    check: str
    metric: str
    metric_id: int
    #: Whether the judged run measured it.
    measured: bool
    #: Its values as one matrix, nights × ``point_ids``, oldest night first; None where
    #: its nights listed different points (``merged`` holds its rows then).
    nights: np.ndarray | None
    point_ids: tuple[int, ...] = ()
    #: Its newest test case (what names its series) and its nights' start times (where a
    #: rule needs them).
    newest: int = 0
    times: tuple | None = None
    merged: list[tuple] | None = None

    @property
    def rows(self) -> list[tuple]:
        """(newest test case, metric id, point id, values, times, measured) of each point,
        as ``named`` names them: built only for the curves that get that far."""
        if self.nights is None:
            return self.merged or []
        return [(self.newest, self.metric_id, point, self.nights[:, column], self.times,
                 self.measured) for column, point in enumerate(self.point_ids)]


def read(conn: Connection, run_id: int, checks: list[str], points: list[int],
         rules: Rules) -> dict[tuple, Series]:
    """The series of ``checks`` at ``points`` over the recent runs of the judged run's
    system up to it (as many as ``rules`` read; with the times of the values where a rule
    needs them), by ``Series.key`` (check, params as jsonb text, partition, environ,
    metric, point id). A key figure the judged run measured holds at least the values its
    rule judges by (``_key_figures``), not necessarily all."""
    bound = _recent(conn, run_id, checks, points, rules)
    if bound is None:
        return {}
    rows = []
    if 0 in points:
        rows += _key_figures(conn, bound, rules.values_judged())
    if set(points) - {0}:
        rows += [row for curve in _curves(conn, bound, points) for row in curve.rows]
    return named(conn, rows)


def curves(conn: Connection, run_id: int, checks: list[str], points: list[int],
           rules: Rules, variants: list[UUID] | None = None) -> list[CurveNights]:
    """The curves of ``checks`` at the (curve) ``points`` (of those ``variants`` only,
    where given), their series not yet named (``named``). Each curve the judged run
    measured holds at least the values its rule judges by, not every value ``read``
    gives: they are read from as many newest runs, and only the curves that found fewer
    there (new, or missing a night) again from all recent runs. On a nightly schedule
    that halves what a verdict reads."""
    bound = _recent(conn, run_id, checks, points, rules)
    if bound is None:
        return []
    bound["variants"] = variants
    judged = rules.values_judged()
    return _newest_first(
        bound, judged, lambda bound: _curves(conn, bound, points), lambda curve: curve.variant,
        lambda curve: curve.measured and (curve.nights is None or len(curve.nights) < judged))


def _newest_first(bound: dict, judged: int, read, variant_of, short) -> list:
    """``read(bound)``'s items (curves, key-figure rows), each the judged run measured
    holding at least the ``judged`` values its rule judges by: read from as many newest
    runs, and only the variants with an item ``short`` there (new, or missing a night)
    again from all recent runs."""
    if len(bound["runs"]) <= judged:
        return read(bound)
    newest = read({**bound, "runs": bound["runs"][:judged], "times": bound["times"][:judged]})
    again = {variant_of(item) for item in newest if short(item)}
    if not again:
        return newest
    return [item for item in newest if variant_of(item) not in again] + read(
        {**bound, "variants": [UUID(bytes=variant) for variant in sorted(again)]})


class KeyFigures(NamedTuple):
    """A key figure's series as ``named`` takes it, with its variant (``_newest_first``)."""
    newest: int
    metric_id: int
    point_id: int
    values: tuple[float, ...]
    times: tuple | None
    measured: bool
    variant: bytes


def _key_figures(conn: Connection, bound: dict, judged: int) -> list[KeyFigures]:
    """Every key-figure series of the recent runs, read newest first as ``curves`` reads
    curves (``_newest_first``): a 100,000-line verdict read 66 nights of each series to
    judge by 33. Named by its newest test case (the lowest id of the newest run)."""
    def read(bound: dict) -> list[KeyFigures]:
        found = []
        for segments in _segments(conn, bound, key_figures=True):
            values = segments.values[:, 0].tolist()
            for first, last, newest, variant in zip(segments.firsts, segments.lasts,
                                                    segments.newest_first_ids(),
                                                    segments.variants()):
                _, times, measured = segments.nights[tuple(segments.places[first:last])]
                found.append(KeyFigures(newest, segments.metric_id, 0,
                                        tuple(values[first:last]),
                                        times if bound["with_times"] else None, measured,
                                        variant))
        return found

    return _newest_first(bound, judged, read, lambda row: row.variant,
                         lambda row: row.measured and len(row.values) < judged)


def _recent(conn: Connection, run_id: int, checks: list[str], points: list[int],
            rules: Rules) -> dict | None:
    """The history queries' parameters: the recent runs and their start times."""
    if not checks or not points:
        return None
    ids, times = queries.one(conn, "recent_runs", {
        "run_id": run_id, "checks": checks, "runs": rules.runs_read()})
    if not ids:
        return None
    return {"run_id": run_id, "runs": ids, "checks": checks, "times": times,
            "with_times": rules.needs_times(), "variants": None}


def _curves(conn: Connection, bound: dict, points: list[int]) -> list[CurveNights]:
    """Every curve of the recent runs at ``points``."""
    rows = []
    for segments in _segments(conn, bound, key_figures=False):
        ids = segments.ids.tolist()
        for first, last, variant in zip(segments.firsts, segments.lasts, segments.variants()):
            runs, times, _ = segments.nights[tuple(segments.places[first:last])]
            rows.append((variant, *segments.where(first), segments.metric_id, segments.check,
                         segments.point_ids, ids[first:last], runs, times,
                         segments.values[first:last]))
    metrics = {mid: name for mid, name, _ in queries.tuples(conn, "metrics")}
    return _point_series(rows, set(points) - {0}, metrics, bound["run_id"],
                         bound["with_times"])


class _Cases:
    """The passed test cases of the recent runs (the named query block_cases), by id: each
    one's run's place and its series (variant, partition and environ as one dense number)."""

    def __init__(self, ids, places, variants, partitions, environs):
        order = np.argsort(ids, kind="stable")
        self.ids, self.places = ids[order], places[order]
        halves = np.frombuffer(variants.tobytes(), ">u8").reshape(-1, 2)
        by_series = np.lexsort((environs, partitions, halves[:, 1], halves[:, 0]))
        keys = np.stack([halves[:, 0], halves[:, 1], partitions, environs])[:, by_series]
        new = np.concatenate([[True], (keys[:, 1:] != keys[:, :-1]).any(axis=0)])
        series = np.empty(len(ids), dtype=np.int64)
        series[by_series] = np.cumsum(new) - 1
        self.series = series[order]
        firsts = by_series[new]  # a test case of each series
        self._variants = variants[firsts].tobytes()
        self.partitions, self.environs = partitions[firsts].tolist(), environs[firsts].tolist()

    def variant(self, series: int) -> bytes:
        """Series ``series``' variant: its 16 bytes."""
        return self._variants[16 * series:16 * series + 16]

    def find(self, testcases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(whether each of ``testcases`` is one of these, where it is among them)."""
        at = np.minimum(np.searchsorted(self.ids, testcases), len(self.ids) - 1)
        return self.ids[at] == testcases, at


class _Segments:
    """The values of one check, metric and point list over the recent runs, ordered by
    series, each series' oldest night first (then by test case): series ``i`` is rows
    ``firsts[i]:lasts[i]``."""

    def __init__(self, cases: _Cases, check: str, metric_id: int, point_ids: tuple,
                 parts: list[tuple], nights: _NightsOf):
        self.cases, self.check, self.metric_id = cases, check, metric_id
        self.point_ids, self.nights = point_ids, nights
        at = np.concatenate([part[0] for part in parts])
        series, places, ids = cases.series[at], cases.places[at], cases.ids[at]
        order = np.lexsort((ids, -places, series))
        self.series, self.ids, places = series[order], ids[order], places[order]
        self.values = np.concatenate([part[1] for part in parts], dtype=np.float64)[order]
        starts = np.flatnonzero(np.diff(self.series)) + 1
        self.firsts, self.lasts = [0, *starts.tolist()], [*starts.tolist(), len(ids)]
        #: Each row's run's place, as Python ints (sliced per series, looked up in nights).
        self.places = places.tolist()
        self._night_starts = np.flatnonzero(np.concatenate(
            [[True], (np.diff(self.series) != 0) | (np.diff(places) != 0)]))

    def newest_first_ids(self) -> list[int]:
        """Each series' lowest test case id of its newest night."""
        lasts = np.asarray(self.lasts) - 1
        starts = self._night_starts
        return self.ids[starts[np.searchsorted(starts, lasts, side="right") - 1]].tolist()

    def variants(self) -> list[bytes]:
        """Each series' variant (16 bytes)."""
        return [self.cases.variant(series) for series in self.series[self.firsts].tolist()]

    def where(self, row: int) -> tuple[int, int]:
        """The partition and environ ids of row ``row``'s series."""
        series = self.series[row]
        return self.cases.partitions[series], self.cases.environs[series]


def _segments(conn: Connection, bound: dict, key_figures: bool
              ) -> Iterator[_Segments]:
    """The recent runs' blocks of key figures (or of curves), their values of the passed
    test cases (not failed, not superseded) split into series, per check, metric and
    point list: one at a time (a 100,000-line verdict's rows as Python ints, all at once,
    took 200 MB more)."""
    blocks = queries.arrays_in_parts(conn, "sample_blocks", {**bound, "key_figures": key_figures},
                                     split=("runs", "times"))
    if not blocks:
        return
    # Only the checks that have such blocks; through judged_testcase PostgreSQL guesses
    # 440 test cases for 132,000 and plans nested loops unless told not to.
    checks = sorted({block[0] for block in blocks})
    with queries.planned(conn, queries.HASH_JOINS):
        row = queries.arrays(conn, "block_cases", {**bound, "checks": checks}, one=True)
    if row[0] is None:
        return
    cases = _Cases(*row)
    del row  # its arrays, unsorted: 100 MB for a 100,000-line verdict
    shapes: dict[tuple, list[tuple]] = defaultdict(list)
    for check, metric, point_ids, block_cases, raw in blocks:
        kept, at = cases.find(block_cases)
        values = raw.reshape(len(block_cases), len(point_ids))  # float8[] (0027)
        if kept.all():  # no copy
            shapes[(check, metric, point_ids)].append((at, values))
        elif kept.any():
            shapes[(check, metric, point_ids)].append((at[kept], values[kept]))
    nights = _NightsOf(bound)
    for (check, metric, points), parts in shapes.items():
        yield _Segments(cases, check, metric, points, parts, nights)


class _NightsOf(dict):
    """Places (1: the newest run) → their runs, start times and whether the judged run is
    among them, each built once: most series were measured on the same nights."""

    def __init__(self, bound: dict):
        super().__init__()
        self.runs, self.times, self.judged = bound["runs"], bound["times"], bound["run_id"]

    def __missing__(self, places: tuple[int, ...]) -> tuple[list, tuple, bool]:
        runs = [self.runs[p - 1] for p in places]
        found = self[places] = (runs, tuple(self.times[p - 1] for p in places),
                                self.judged in runs)
        return found


def named(conn: Connection, rows: list[tuple]) -> dict[tuple, Series]:
    """``Series`` by key of rows (newest test case, metric id, point id, values, times,
    measured), named by their newest test case."""
    found = {}
    newest = {row[0]: row[1:] for row in queries.tuples(
        conn, "newest_testcases", (sorted({row[0] for row in rows}),))}
    metrics = {mid: (name, unit) for mid, name, unit in queries.tuples(conn, "metrics")}
    for testcase, metric_id, point_id, values_, times_, measured, *_ in rows:
        check, params, partition, environ, system, nodes = newest[testcase]
        if isinstance(values_, np.ndarray):  # a column of a curve's nights
            values_ = values_.tolist()
        series = Series(check, params, partition, environ, *metrics[metric_id], point_id,
                        system, tuple(values_), tuple(times_) if times_ else None,
                        tuple(nodes.split(",")) if nodes else (), measured)
        found[series.key] = series
    return found


def _point_series(curves, points: set[int], metrics: dict[int, str], run_id: int,
                  with_times: bool) -> list[CurveNights]:
    """Each curve (``_curves``' rows of one variant, partition, environ and metric: one
    per point list its nights listed) at its points in ``points``; times only
    ``with_times``."""
    shapes: dict[tuple, list[tuple]] = defaultdict(list)
    for variant, partition, environ, metric, check, *shape in curves:
        shapes[(variant, partition, environ, metric, check)].append(shape)
    found, kept_of = [], {}
    for (variant, _, _, metric, check), rows in shapes.items():
        if len(rows) > 1:
            merged = _merged(rows, metric, points, run_id, with_times)
            found.append(CurveNights(variant, check, metrics[metric], metric,
                                     any(row[5] for row in merged), None, merged=merged))
            continue
        ((ids, testcases, runs, times, nights),) = rows
        # the columns in ``points``, once per point list (a segment's one tuple: by identity,
        # not by hashing its 123 ids again for each of 12,000 curves)
        kept, kept_ids = kept_of.get(id(ids)) or kept_of.setdefault(id(ids), _kept(ids, points))
        if not kept_ids:
            continue  # none of its points is judged (a scaling curve by ranks, not sizes)
        nights = np.asarray(nights, dtype=np.float64)  # a view of its segment's values
        found.append(CurveNights(variant, check, metrics[metric], metric, run_id in runs,
                                 nights if kept is None else nights[:, kept], kept_ids,
                                 testcases[-1], tuple(times) if with_times else None))
    return found


def _kept(ids: tuple[int, ...], points: set[int]) -> tuple[list[int] | None, tuple[int, ...]]:
    """(the columns of ``ids`` in ``points``, None for all of them; their ids)."""
    kept = [index for index, point in enumerate(ids) if point in points]
    if len(kept) == len(ids):
        return None, ids
    return kept, tuple(ids[index] for index in kept)


def _merged(rows: list[tuple], metric: int, points: set[int], run_id: int,
            with_times: bool) -> list[tuple]:
    """``_point_series`` of one curve whose nights listed different points: each point's
    values from the nights that measured it, oldest first."""
    per_point: dict[int, list[tuple]] = defaultdict(list)
    for ids, testcases, runs, times, nights in rows:
        values_by_night = np.asarray(nights, dtype=np.float64).tolist()
        for testcase, run, started, values_ in zip(testcases, runs, times, values_by_night):
            for point, value in zip(ids, values_):
                if point in points:
                    per_point[point].append((started, run, testcase, value))
    found = []
    for point, got in per_point.items():
        got.sort()
        times = tuple(t for t, *_ in got) if with_times else None
        found.append((got[-1][2], metric, point, tuple(v for *_, v in got), times,
                      any(run == run_id for _, run, _, _ in got)))
    return found


def values(conn: Connection, series: Series | None, same_fingerprint: bool,
           epochs: dict | None = None) -> list[float]:
    """The values of ``series`` (oldest first, the judged run's last); with
    ``same_fingerprint`` only those since the last fingerprint change of the judged run's
    nodes (Conbench's reset at a distribution change: after an upgrade the new level is
    learnt afresh, and the run is inconclusive until enough of it is known)."""
    return timed_values(conn, series, same_fingerprint, epochs)[0]


def timed_values(conn: Connection, series: Series | None, same_fingerprint: bool,
                 epochs: dict | None = None) -> tuple[list[float], tuple | None]:
    """``values`` and when each was measured (None where the series was read without
    times): the findings line the nights of a run's lines up by them."""
    if series is None:
        return [], None
    if not same_fingerprint or not series.values:
        return list(series.values), series.times
    assert series.times is not None, "read(..., with_times=True) for same_fingerprint rules"
    asked = (series.system, series.nodes, series.times[-1])
    epochs = {} if epochs is None else epochs  # series of one run share their nodes' epoch
    if asked not in epochs:
        epochs[asked] = queries.one(conn, "fingerprint_epoch",
                                    (asked[0], list(asked[1]), asked[2]))[0]
    start = epochs[asked]
    kept = [i for i, t in enumerate(series.times) if start is None or t >= start]
    return [series.values[i] for i in kept], tuple(series.times[i] for i in kept)
