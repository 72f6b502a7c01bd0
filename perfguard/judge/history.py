"""A run's series as the judge reads them: for every series the run measured (system,
check, variant, partition, environ, metric and point), its values over the recent runs,
oldest first, the run's own last; optionally only those of the current fingerprint epoch
(since the environment of the judged nodes last changed).

Key figures are aggregated per series in PostgreSQL; curve points come as each test
case's whole sweep (one row of ``curve``) and are split into series here. Both reads are
bounded to the months the recent runs lie in: judging a run costs the same after a year
of nightly runs as after a month.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import NamedTuple

import numpy as np
import psycopg

from perfguard.judge.rules import Rules
from perfguard.store import db

# The passed test cases of the recent runs of the run's checks, each with its run's place
# among them (1: the newest) and its variant (0018: a digest of check and parameters
# stored with each test case; jsonb comparisons took 4 of 16 s at 3.4·10^6 values, the
# digest computed here 1.4 s). Both history reads join them by hash and group by hash,
# their arrays in no order (Python orders them by place): ordered aggregates made
# PostgreSQL sort every value first (3.4·10^6 key figures of a 100,000-line run, on disk:
# 9 of that read's 10 s).
CASES_SQL = """
WITH recent AS (
    SELECT id, started_at, place
    FROM unnest(%(runs)s::bigint[], %(times)s::timestamptz[])
         WITH ORDINALITY AS u(id, started_at, place)),
cases AS (
    SELECT tc.id, r.place, r.started_at, tc.variant, tc.partition_id, tc.environ_id,
           tc.check_name
    FROM recent r JOIN judged_testcase tc ON tc.run_id = r.id AND tc.state = 'pass'
    WHERE tc.check_name = ANY(%(checks)s)
      AND (%(variants)s::uuid[] IS NULL OR tc.variant = ANY(%(variants)s::uuid[])))
"""

#: ``newest`` of KEY_SERIES_SQL is a place shifted by this many bits over a test case id
#: (ids below 2^40: a trillion test cases).
NEWEST_BITS = 40

# Key figures, one row per series: read from the key-figure index alone (its predicate
# point_id = 0) for the recent runs' start times (the months they lie in). Its newest test
# case (``NEWEST_BITS``) names a series: one number, where an array of every test case
# was a third of what a 100,000-line verdict loaded.
KEY_SERIES_SQL = CASES_SQL + f"""
SELECT v.metric_id, array_agg(c.place) AS places,
       min((c.place << {NEWEST_BITS}) | c.id) AS newest, array_agg(v.value) AS values, c.variant
FROM cases c JOIN sample v ON v.testcase_id = c.id
WHERE v.started_at = ANY(%(times)s) AND v.point_id = 0
GROUP BY c.variant, c.partition_id, c.environ_id, v.metric_id
"""

# Curve points: each test case's sweep is one row of `curve` (0015); a curve's nights that
# list the same points come as one row, their values a matrix (nights × points) that
# Python orders and splits into series by one transposition. Grouping the same values as
# 15 million sample rows in PostgreSQL took 17–19 s of a 35 s verdict at 2·10^7 samples.
CURVE_ROWS_SQL = CASES_SQL + """
SELECT c.variant, c.partition_id, c.environ_id, cv.metric_id, c.check_name, cv.point_ids,
       array_agg(c.place) AS places, array_agg(c.id) AS testcases,
       array_agg(cv.point_values) AS nights
FROM cases c JOIN curve cv ON cv.testcase_id = c.id AND cv.started_at = c.started_at
WHERE cv.started_at = ANY(%(times)s)
GROUP BY c.variant, c.partition_id, c.environ_id, cv.metric_id, c.check_name, cv.point_ids
"""

# What names a series: its newest test case's (looked up by id: through the grouped rows
# PostgreSQL's estimates are off by 10^3 and it read every test case to join a few).
NEWEST_SQL = """
SELECT tc.id, tc.check_name, tc.params::text, p.name, e.name, sy.name,
       array_to_string(tc.nodelist, ',')
FROM testcase tc JOIN run r ON r.id = tc.run_id JOIN system sy ON sy.id = r.system_id
JOIN partition p ON p.id = tc.partition_id JOIN environ e ON e.id = tc.environ_id
WHERE tc.id = ANY(%s)
"""

RECENT_RUNS_SQL = """
SELECT array_agg(r.id ORDER BY r.started_at DESC, r.id DESC),
       array_agg(r.started_at ORDER BY r.started_at DESC, r.id DESC)
FROM run r WHERE r.id IN (SELECT recent_runs(%(run_id)s, %(checks)s, %(runs)s))
"""


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


class CurveNights(NamedTuple):
    """One curve's nights (a variant, partition, environ and metric): what a curve's
    verdict screens before any ``Series`` is named."""
    #: The digest of its check and parameters (0018's testcase.variant).
    variant: object
    check: str
    metric: str
    #: (newest test case, metric id, point id, values, times, measured), one per point
    rows: list[tuple]
    #: The rows' values as one matrix, nights × points in the rows' order, oldest night
    #: first; None where the curve's nights listed different points.
    nights: np.ndarray | None


def read(conn: psycopg.Connection, run_id: int, checks: list[str], points: list[int],
         rules: Rules) -> dict[tuple, Series]:
    """The series of ``checks`` at ``points`` over the recent runs of the judged run's
    system up to it (as many as ``rules`` read; with the times of the values where a rule
    needs them), by ``Series.key`` (check, params as jsonb text, partition, environ,
    metric, point id). A key figure the judged run measured holds at least the values its
    rule judges by (``_key_grouped``), not necessarily all."""
    bound = _recent(conn, run_id, checks, points, rules)
    if bound is None:
        return {}
    rows = []
    if 0 in points:
        rows += key_series(_key_grouped(conn, bound, rules.values_judged()), bound)
    if set(points) - {0}:
        rows += [row for curve in _curves(conn, bound, points) for row in curve.rows]
    return named(conn, rows)


def curves(conn: psycopg.Connection, run_id: int, checks: list[str], points: list[int],
           rules: Rules) -> list[CurveNights]:
    """The curves of ``checks`` at the (curve) ``points``, their series not yet named
    (``named``). Each curve the judged run measured holds at least the values its rule
    judges by, not every value ``read`` gives: they are read from as many newest runs,
    and only the curves that found fewer there (new, or missing a night) again from all
    recent runs. On a nightly schedule that halves what a verdict reads."""
    bound = _recent(conn, run_id, checks, points, rules)
    if bound is None:
        return []
    judged = rules.values_judged()
    return _newest_first(
        bound, judged, lambda bound: _curves(conn, bound, points), lambda curve: curve.variant,
        lambda curve: any(row[5] for row in curve.rows)
        and (curve.nights is None or len(curve.nights) < judged))


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
        {**bound, "variants": sorted(again)})


def _key_grouped(conn: psycopg.Connection, bound: dict, judged: int) -> list[tuple]:
    """KEY_SERIES_SQL's rows, read newest first as ``curves`` reads curves
    (``_newest_first``): a 100,000-line verdict read 66 nights of each series to judge
    by 33."""
    def grouped(bound: dict) -> list[tuple]:
        with db.planned(conn, db.HASH_JOINS):
            return db.packed_arrays(conn.cursor(binary=True)).execute(
                KEY_SERIES_SQL, bound).fetchall()

    place = _judged_place(bound)
    return _newest_first(bound, judged, grouped, lambda row: row[4],
                         lambda row: len(row[1]) < judged and place in row[1])


def _judged_place(bound: dict) -> int | None:
    """The judged run's place among the recent runs (1: the newest)."""
    return bound["runs"].index(bound["run_id"]) + 1 if bound["run_id"] in bound["runs"] \
        else None


def key_series(grouped: list[tuple], bound: dict) -> list[tuple]:
    """Rows of KEY_SERIES_SQL (metric id, run places and values in no order, newest test
    case) as ``named`` takes them (newest test case, metric id, point id 0, values oldest
    first, times where asked, measured). Ordered as one matrix per length, not series by
    series: 100,000 series of 34 nights each."""
    times, with_times = bound["times"], bound["with_times"]
    judged = _judged_place(bound)
    by_length: dict[int, list[tuple]] = defaultdict(list)
    for row in grouped:
        by_length[len(row[1])].append(row)
    found = []
    for rows in by_length.values():
        places = np.array([row[1] for row in rows], dtype=np.int64)
        order = np.argsort(-places, axis=1, kind="stable")  # the oldest (last) place first
        values_ = np.take_along_axis(np.stack([row[3] for row in rows]), order, axis=1)
        places = np.take_along_axis(places, order, axis=1).tolist()
        for row, ordered, night in zip(rows, values_.tolist(), places):
            found.append((row[2] & ((1 << NEWEST_BITS) - 1), row[0], 0, tuple(ordered),
                          tuple(times[p - 1] for p in night) if with_times else None,
                          judged in night))
    return found


def _recent(conn: psycopg.Connection, run_id: int, checks: list[str], points: list[int],
            rules: Rules) -> dict | None:
    """The history queries' parameters: the recent runs and their start times."""
    if not checks or not points:
        return None
    ids, times = conn.execute(RECENT_RUNS_SQL, {
        "run_id": run_id, "checks": checks, "runs": rules.runs_read()}).fetchone()
    if not ids:
        return None
    return {"run_id": run_id, "runs": ids, "checks": checks, "times": times,
            "with_times": rules.needs_times(), "variants": None}


def _curves(conn: psycopg.Connection, bound: dict, points: list[int]) -> list[CurveNights]:
    # Through judged_testcase the planner guesses 440 test cases for 132,000.
    with db.planned(conn, db.HASH_JOINS):
        grouped = db.packed_arrays(conn.cursor(binary=True)).execute(
            CURVE_ROWS_SQL, bound).fetchall()
    rows = [(*row[:6], *_by_night(*row[6:], bound)) for row in grouped]
    metrics = dict(conn.execute("SELECT id, name FROM metric").fetchall())
    return [CurveNights(variant, check, metrics[metric], series, nights)
            for variant, check, metric, series, nights
            in _point_series(rows, set(points) - {0}, bound["run_id"], bound["with_times"])]


def named(conn: psycopg.Connection, rows: list[tuple]) -> dict[tuple, Series]:
    """``Series`` by key of rows (newest test case, metric id, point id, values, times,
    measured), named by their newest test case."""
    found = {}
    newest = {row[0]: row[1:] for row in conn.execute(
        NEWEST_SQL, (sorted({row[0] for row in rows}),))}
    metrics = {mid: (name, unit) for mid, name, unit in conn.execute(
        "SELECT id, name, unit FROM metric")}
    for testcase, metric_id, point_id, values_, times_, measured in rows:
        check, params, partition, environ, system, nodes = newest[testcase]
        if isinstance(values_, np.ndarray):  # a column of a curve's nights
            values_ = values_.tolist()
        series = Series(check, params, partition, environ, *metrics[metric_id], point_id,
                        system, tuple(values_), tuple(times_) if times_ else None,
                        tuple(nodes.split(",")) if nodes else (), measured)
        found[series.key] = series
    return found


def _by_night(places: tuple, testcases: tuple, nights: np.ndarray, bound: dict) -> tuple:
    """A curve row's test cases, runs, start times and nights (a matrix) oldest first, as
    ordered aggregates gave them (by start, run, test case), from its unordered arrays."""
    order = np.lexsort((testcases, np.negative(places)))
    places = [places[i] for i in order]
    return ([testcases[i] for i in order], [bound["runs"][p - 1] for p in places],
            [bound["times"][p - 1] for p in places], np.asarray(nights)[order])


def _point_series(curves, points: set[int], run_id: int, with_times: bool) -> list[tuple]:
    """Per curve (rows of CURVE_ROWS_SQL of one variant, partition, environ and metric),
    its variant, check, metric id, the rows (newest test case, metric, point, values, times,
    measured) of its points in ``points`` and their values as a matrix (nights × those
    points; None where the nights listed different points); times only ``with_times``."""
    shapes: dict[tuple, list[tuple]] = defaultdict(list)
    for variant, partition, environ, metric, check, *shape in curves:
        shapes[(variant, partition, environ, metric, check)].append(shape)
    found = []
    for (variant, _, _, metric, check), rows in shapes.items():
        if len(rows) > 1:
            found.append((variant, check, metric,
                          _merged(rows, metric, points, run_id, with_times), None))
            continue
        ((ids, testcases, runs, times, nights),) = rows
        kept = [index for index, point in enumerate(ids) if point in points]
        nights = np.asarray(nights, dtype=np.float64)
        nights = nights if len(kept) == len(ids) else nights[:, kept]
        measured, times = run_id in runs, tuple(times) if with_times else None
        found.append((variant, check, metric, [
            (testcases[-1], metric, ids[index], nights[:, column], times, measured)
            for column, index in enumerate(kept)], nights))
    return found


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


def values(conn: psycopg.Connection, series: Series | None, same_fingerprint: bool,
           epochs: dict | None = None) -> list[float]:
    """The values of ``series`` (oldest first, the judged run's last); with
    ``same_fingerprint`` only those since the last fingerprint change of the judged run's
    nodes (Conbench's reset at a distribution change: after an upgrade the new level is
    learnt afresh, and the run is inconclusive until enough of it is known)."""
    if series is None:
        return []
    if not same_fingerprint or not series.values:
        return list(series.values)
    assert series.times is not None, "read(..., with_times=True) for same_fingerprint rules"
    asked = (series.system, series.nodes, series.times[-1])
    epochs = {} if epochs is None else epochs  # series of one run share their nodes' epoch
    if asked not in epochs:
        epochs[asked] = conn.execute("SELECT fingerprint_epoch(%s, %s, %s)",
                                     (asked[0], list(asked[1]), asked[2])).fetchone()[0]
    start = epochs[asked]
    return [v for v, t in zip(series.values, series.times) if start is None or t >= start]
