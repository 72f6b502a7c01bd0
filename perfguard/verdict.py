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

# The thresholds that apply to a sample, most specific first.
_MATCHING_THRESHOLD = """
    SELECT th.* FROM threshold th
    WHERE th.system = r.s_system AND th.check_name = tc.check_name AND th.metric = m.name
      AND (th.partition IS NULL OR th.partition = p.name)
      AND (th.environ IS NULL OR th.environ = e.name)
      AND tc.params @> th.params
      AND ((th.point IS NULL AND s.point = '{}'::jsonb) OR th.point = s.point)
      AND th.valid_from <= r.started_at AND (th.valid_to IS NULL OR th.valid_to > r.started_at)
    ORDER BY (th.partition IS NOT NULL)::int + (th.environ IS NOT NULL)::int
             + (SELECT count(*) FROM jsonb_object_keys(th.params)) DESC, th.valid_from DESC
    LIMIT 1"""

VERDICT_SQL = f"""
WITH r AS (SELECT run.*, system.name AS s_system FROM run JOIN system ON system.id = run.system_id
           WHERE run.id = %(run_id)s)
SELECT tc.id AS testcase_id, tc.check_name, tc.params, p.name AS partition, e.name AS environ,
       tc.result AS test_result, tc.fail_reason, m.name AS metric, m.unit, s.value, s.point,
       th.id AS threshold_id, th.reference, th.lower, th.upper, th.bounds, th.direction,
       th.unit AS th_unit
FROM r
JOIN testcase tc ON tc.run_id = r.id
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN sample s ON s.testcase_id = tc.id
JOIN metric m ON m.id = s.metric_id
LEFT JOIN LATERAL ({_MATCHING_THRESHOLD}) th ON true
WHERE s.point = '{{}}'::jsonb OR th.id IS NOT NULL
ORDER BY tc.check_name, tc.params::text, p.name, e.name, m.name, s.point::text
"""

TESTCASES_WITHOUT_SAMPLES = """
SELECT tc.id AS testcase_id, tc.check_name, tc.params, p.name AS partition,
       e.name AS environ, tc.result AS test_result, tc.fail_reason
FROM testcase tc JOIN partition p ON p.id = tc.partition_id JOIN environ e ON e.id = tc.environ_id
WHERE tc.run_id = %(run_id)s
  AND NOT EXISTS (SELECT 1 FROM sample s WHERE s.testcase_id = tc.id AND s.point = '{}'::jsonb)
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
