"""Whole-curve verdicts: every message size of a sweep against its own history.

A key figure is one size (OMB's largest for bandwidth, smallest for latency); a
firmware or driver change often hurts only a band of sizes (the rendezvous protocol,
eager-to-rendezvous switch, a PCIe setting). Each size of each curve of the run is
judged like a key figure (perfguard.judge, the same rule and direction) and the curve is
summarised as ranges: "regressed at 64 KiB–1 MiB by 5.1–6.0 %; 8 B–4 KiB unchanged".
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from perfguard.judge import history
from perfguard.judge import rules as judge
from perfguard.store import db

# Every sized curve point of the run's checks, back in time from the run, one row per
# series and size with its values oldest first (the run's own last): aggregated in SQL,
# as a year of nightly runs of 2,000 test cases is millions of values.
CURVES_SQL = """
SELECT v.check_name, v.params::text AS params, v.partition, v.environ, v.metric, v.unit,
       (v.point->>'size')::bigint AS size, d.better, v.system,
       array_agg(v.value ORDER BY v.started_at, v.run_id) AS values,
       array_agg(v.started_at ORDER BY v.started_at, v.run_id) AS times,
       (array_agg(array_to_string(v.nodelist, ',') ORDER BY v.started_at DESC,
                  v.run_id DESC))[1] AS last_nodes,
       bool_or(v.run_id = cur.id) AS measured
FROM run cur JOIN system sy ON sy.id = cur.system_id
JOIN series_value v ON v.system = sy.name AND v.started_at <= cur.started_at
JOIN metric_direction d ON d.check_name = v.check_name AND d.metric = v.metric
WHERE cur.id = %(run_id)s AND v.point_id <> 0 AND v.point ? 'size'
  AND jsonb_typeof(v.point->'size') = 'number'
  AND v.check_name = ANY(%(checks)s)
  AND v.run_id IN (SELECT recent_runs(%(run_id)s, %(checks)s, %(runs)s))
GROUP BY v.check_name, v.params::text, v.partition, v.environ, v.metric, v.unit, size,
         d.better, v.system
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
        states = {j.state for j in self.sizes.values()}
        for state in (judge.REGRESSION, judge.IMPROVEMENT, judge.INCONCLUSIVE):
            if state in states:
                return state
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
                 rules: judge.Rules = judge.DEFAULT_RULES) -> list[Curve]:
    """The run's sized curves, each size judged against its own history."""
    values: dict[tuple, dict[int, list[history.Value]]] = defaultdict(dict)
    meta: dict[tuple, tuple[str, str]] = {}
    params_of: dict[str, tuple] = {}
    # The run's checks as a parameter: as a subquery correlated with the run, PostgreSQL
    # ran it once per sample (40 s for a run of 2,000 test cases).
    checks = [c for (c,) in conn.execute(
        "SELECT DISTINCT check_name FROM testcase WHERE run_id = %s", (run_id,))]
    query = {"run_id": run_id, "checks": checks, "runs": rules.runs_read()}
    with db.hash_joins(conn):
        rows = conn.cursor(row_factory=dict_row).execute(CURVES_SQL, query).fetchall()
    for row in rows:
        if not row["measured"]:
            continue  # a size this run did not measure
        params = params_of.setdefault(row["params"],
                                      tuple(sorted(json.loads(row["params"]).items())))
        key = (row["check_name"], params, row["partition"], row["environ"], row["metric"])
        nodes = tuple(row["last_nodes"].split(",")) if row["last_nodes"] else ()
        values[key][row["size"]] = [history.Value(t, v, row["system"], nodes)
                                    for t, v in zip(row["times"], row["values"])]
        meta[key] = (row["unit"], row["better"])
    curves = []
    for key, sizes in values.items():
        check, params, partition, environ, metric = key
        unit, better = meta[key]
        rule = rules.for_metric(check, metric)
        judged = {}
        for size in sizes:
            series = history.values(conn, values[key][size], rule.same_fingerprint)
            judged[size] = judge.judge_series(series, better, rule)
        curves.append(Curve(check, dict(params), partition, environ, metric, unit, better,
                            judged))
    return sorted(curves, key=lambda c: (c.check, str(sorted(c.params.items())), c.metric))
