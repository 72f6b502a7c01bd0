"""Verdicts: every key figure of a run against the threshold valid when the run started.

The threshold chosen for a sample is the most specific current one of its scope
(partition, environ and variant params narrow it). No threshold means
`no-reference`: visible, never a silent pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from perfguard.errors import PerfguardError
from perfguard.thresholds import Threshold

PASS, FAIL, NO_REFERENCE, TEST_FAILED = "pass", "fail", "no-reference", "test-failed"

# Key figures (point '{}') of the run, plus the curve points that a point-threshold
# names; only those need a threshold lookup (a run may hold 250,000 points).
VERDICT_SQL = """
WITH r AS (
    SELECT run.id, run.started_at, system.name AS system
    FROM run JOIN system ON system.id = run.system_id WHERE run.id = %(run_id)s),
cases AS (
    SELECT tc.id, tc.check_name, tc.params, tc.result, tc.fail_reason,
           p.name AS partition, e.name AS environ
    FROM r JOIN testcase tc ON tc.run_id = r.id
    JOIN partition p ON p.id = tc.partition_id JOIN environ e ON e.id = tc.environ_id),
valid AS (
    SELECT th.* FROM threshold th, r
    WHERE th.system = r.system AND th.valid_from <= r.started_at
      AND (th.valid_to IS NULL OR th.valid_to > r.started_at)),
judged AS (
    SELECT s.testcase_id, s.metric_id, s.value, '{}'::jsonb AS point FROM cases
    JOIN sample s ON s.testcase_id = cases.id AND s.point_id = 0
    UNION
    SELECT s.testcase_id, s.metric_id, s.value, pt.coords
    FROM valid th JOIN metric m ON m.name = th.metric
    JOIN point pt ON pt.coords = th.point
    JOIN cases ON cases.check_name = th.check_name AND cases.params @> th.params
    JOIN sample s ON s.testcase_id = cases.id AND s.metric_id = m.id AND s.point_id = pt.id
    WHERE th.point IS NOT NULL)
SELECT cases.id AS testcase_id, cases.check_name, cases.params, cases.partition,
       cases.environ, cases.result AS test_result, cases.fail_reason, m.name AS metric,
       m.unit, j.value, j.point, th.id AS threshold_id, th.reference, th.lower, th.upper,
       th.bounds, th.direction
FROM judged j JOIN cases ON cases.id = j.testcase_id JOIN metric m ON m.id = j.metric_id
LEFT JOIN LATERAL (
    SELECT v.* FROM valid v
    WHERE v.check_name = cases.check_name AND v.metric = m.name
      AND (v.partition IS NULL OR v.partition = cases.partition)
      AND (v.environ IS NULL OR v.environ = cases.environ)
      AND cases.params @> v.params
      AND ((v.point IS NULL AND j.point = '{}'::jsonb) OR v.point = j.point)
    ORDER BY (v.partition IS NOT NULL)::int + (v.environ IS NOT NULL)::int
             + (SELECT count(*) FROM jsonb_object_keys(v.params)) DESC, v.valid_from DESC
    LIMIT 1) th ON true
ORDER BY cases.check_name, cases.params::text, cases.partition, cases.environ, m.name,
         j.point::text
"""

TESTCASES_WITHOUT_SAMPLES = """
SELECT tc.id AS testcase_id, tc.check_name, tc.params, p.name AS partition,
       e.name AS environ, tc.result AS test_result, tc.fail_reason
FROM testcase tc JOIN partition p ON p.id = tc.partition_id JOIN environ e ON e.id = tc.environ_id
WHERE tc.run_id = %(run_id)s
  AND NOT EXISTS (SELECT 1 FROM sample s WHERE s.testcase_id = tc.id AND s.point_id = 0)
ORDER BY tc.check_name, tc.params::text
"""


@dataclass
class Line:
    check: str
    params: dict[str, Any]
    partition: str
    environ: str
    metric: str
    value: float | None
    unit: str
    point: dict[str, Any]
    reference: float | None
    low: float | None
    high: float | None
    status: str
    detail: str = ""
    baseline: float | None = None

    @property
    def change(self) -> float | None:
        if self.baseline in (None, 0) or self.value is None:
            return None
        return (self.value - self.baseline) / abs(self.baseline)

    @property
    def key(self) -> tuple:
        return (self.check, tuple(sorted(self.params.items())), self.partition, self.environ,
                self.metric, tuple(sorted(self.point.items())))


def resolve_run(conn: psycopg.Connection, ref: str | None) -> int:
    """A run id, a session uuid, a label (newest run carrying it), or None for the latest."""
    if ref is None or ref == "latest":
        row = conn.execute("SELECT id FROM run ORDER BY started_at DESC, id DESC LIMIT 1"
                           ).fetchone()
    elif ref.isdigit():
        row = conn.execute("SELECT id FROM run WHERE id = %s", (int(ref),)).fetchone()
    else:
        row = conn.execute(
            "SELECT id FROM run WHERE session_uuid::text = %(r)s OR %(r)s = ANY(labels) "
            "ORDER BY started_at DESC LIMIT 1", {"r": ref}).fetchone()
    if row is None:
        raise PerfguardError(f"no run matches {ref or 'latest'!r}" if ref else
                             "the database holds no runs yet: `perfguard run` first")
    return row[0]


def verdict(conn: psycopg.Connection, run_id: int) -> list[Line]:
    cursor = conn.cursor(row_factory=dict_row)
    lines = [_line(row) for row in cursor.execute(VERDICT_SQL, {"run_id": run_id})]
    for row in cursor.execute(TESTCASES_WITHOUT_SAMPLES, {"run_id": run_id}):
        lines.append(Line(row["check_name"], row["params"], row["partition"], row["environ"],
                          "-", None, "", {}, None, None, None,
                          PASS if row["test_result"] == "pass" else TEST_FAILED,
                          row["fail_reason"] or ""))
    return lines


def _line(row: dict) -> Line:
    value = row["value"]
    if row["threshold_id"] is None:
        low = high = ref = None
        status = NO_REFERENCE
    else:
        th = Threshold(system="", check=row["check_name"], metric=row["metric"],
                       reference=row["reference"], direction=row["direction"],
                       lower=row["lower"], upper=row["upper"], bounds=row["bounds"])
        ref = th.reference
        low, high = th.limits()
        inside = (low is None or value >= low) and (high is None or value <= high)
        status = PASS if inside else FAIL
    if row["test_result"] not in ("pass", "success") and status != FAIL:
        status = TEST_FAILED if row["test_result"] == "fail" else status
    return Line(row["check_name"], row["params"], row["partition"], row["environ"],
                row["metric"], value, row["unit"], row["point"], ref, low, high, status,
                row["fail_reason"] or "")


def with_baseline(lines: list[Line], baseline: list[Line]) -> list[Line]:
    before = {line.key: line.value for line in baseline}
    for line in lines:
        line.baseline = before.get(line.key)
    return lines


def failed(lines: list[Line]) -> bool:
    return any(line.status in (FAIL, TEST_FAILED) for line in lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def render(lines: list[Line], show_baseline: bool = False) -> str:
    header = ["check", "partition/environ", "metric", "value", "unit", "reference", "bounds",
              "verdict"]
    if show_baseline:
        header[5:5] = ["baseline", "change"]
    rows = [header]
    for line in lines:
        name = line.check + "".join(f" %{k}={v}" for k, v in sorted(line.params.items()))
        metric = line.metric + ("" if not line.point else
                                " @" + ",".join(f"{k}={v}" for k, v in line.point.items()))
        bounds = "-" if line.low is None and line.high is None else \
            f"[{_num(line.low)}, {_num(line.high)}]"
        row = [name, f"{line.partition}/{line.environ}", metric, _num(line.value), line.unit,
               _num(line.reference), bounds, line.status]
        if show_baseline:
            change = "-" if line.change is None else f"{line.change:+.1%}"
            row[5:5] = [_num(line.baseline), change]
        rows.append(row)
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    text = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    counts = {s: sum(1 for line in lines if line.status == s)
              for s in (PASS, FAIL, NO_REFERENCE, TEST_FAILED)}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    return "\n".join(text + ["", f"verdict: {summary}"])
