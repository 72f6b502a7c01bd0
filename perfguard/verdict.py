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

from perfguard.errors import PerfguardError, UsageError

PASS, FAIL, NO_REFERENCE, TEST_FAILED = "pass", "fail", "no-reference", "test-failed"
#: A test case that did not run (shape, provider, failed dependency): neither passed nor
#: failed. One that failed the way a reference said it would: expected-failure.
SKIPPED, EXPECTED_FAILURE = "skipped", "expected-failure"
#: Every state, in the order the summary counts them; only FAILING ones fail a run.
STATES = (PASS, FAIL, TEST_FAILED, NO_REFERENCE, EXPECTED_FAILURE, SKIPPED)
FAILING = (FAIL, TEST_FAILED)

# Key figures come from the key_verdict view (the one matching rule, shared with the
# dashboards); curve points are judged only where a point-threshold names them.
VERDICT_SQL = """
SELECT k.testcase_id, k.check_name, k.params, k.partition, k.environ,
       k.testcase_state, k.fail_reason, k.metric, k.unit, k.value,
       '{}'::jsonb AS point, k.threshold_id, k.reference, k.lower_limit, k.upper_limit,
       k.status
FROM key_verdict k WHERE k.run_id = %(run_id)s
UNION ALL
SELECT tc.id, tc.check_name, tc.params, p.name, e.name, tc.state, tc.fail_reason,
       m.name, m.unit, s.value, pt.coords, th.id, th.reference, th.lower_limit,
       th.upper_limit,
       CASE WHEN (th.lower_limit IS NULL OR s.value >= th.lower_limit)
             AND (th.upper_limit IS NULL OR s.value <= th.upper_limit)
            THEN 'pass' ELSE 'fail' END
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN judged_testcase tc ON tc.run_id = r.id
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN LATERAL (
    SELECT t.* FROM threshold_limit t
    WHERE t.system = sy.name AND t.check_name = tc.check_name AND t.point IS NOT NULL
      AND (t.partition IS NULL OR t.partition = p.name)
      AND (t.environ IS NULL OR t.environ = e.name) AND tc.params @> t.params
      AND t.valid_from <= r.started_at AND (t.valid_to IS NULL OR t.valid_to > r.started_at)
    ) th ON true
JOIN metric m ON m.name = th.metric
JOIN point pt ON pt.coords = th.point
JOIN sample s ON s.testcase_id = tc.id AND s.metric_id = m.id AND s.point_id = pt.id
WHERE r.id = %(run_id)s
ORDER BY 2, 3, 4, 5, 8
"""

TESTCASES_WITHOUT_SAMPLES = """
SELECT tc.id AS testcase_id, tc.check_name, tc.params, p.name AS partition,
       e.name AS environ, tc.state AS testcase_state, tc.fail_reason
FROM judged_testcase tc JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
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
    elif ref.isascii() and ref.isdigit() and len(ref) < 19:  # a bigint, not "²" or 10^30
        row = conn.execute("SELECT id FROM run WHERE id = %s", (int(ref),)).fetchone()
    else:
        row = conn.execute(
            "SELECT id FROM run WHERE session_uuid::text = %(r)s OR %(r)s = ANY(labels) "
            "ORDER BY started_at DESC LIMIT 1", {"r": ref}).fetchone()
    if row is None:
        if ref:
            raise UsageError(f"no run matches {ref!r} (give a run id, session uuid or label)")
        raise PerfguardError("the database holds no runs yet: `perfguard run` first")
    return row[0]


def verdict(conn: psycopg.Connection, run_id: int) -> list[Line]:
    cursor = conn.cursor(row_factory=dict_row)
    lines = [_line(row) for row in cursor.execute(VERDICT_SQL, {"run_id": run_id})]
    for row in cursor.execute(TESTCASES_WITHOUT_SAMPLES, {"run_id": run_id}):
        lines.append(Line(row["check_name"], row["params"], row["partition"], row["environ"],
                          "-", None, "", {}, None, None, None, row["testcase_state"],
                          row["fail_reason"] or ""))
    return lines


def _line(row: dict) -> Line:
    """A missed threshold stays a fail; otherwise a test case that did not pass shows its
    own state (its figures are not to be trusted as a pass)."""
    status = row["status"]
    if row["testcase_state"] != PASS and status != FAIL:
        status = row["testcase_state"]
    return Line(row["check_name"], row["params"], row["partition"], row["environ"],
                row["metric"], row["value"], row["unit"], row["point"], row["reference"],
                row["lower_limit"], row["upper_limit"], status, row["fail_reason"] or "")


def with_baseline(lines: list[Line], baseline: list[Line]) -> list[Line]:
    before = {line.key: line.value for line in baseline}
    for line in lines:
        line.baseline = before.get(line.key)
    return lines


def failed(lines: list[Line]) -> bool:
    """A run fails on a real failure only: skipped and expected failures do not count."""
    return any(line.status in FAILING for line in lines)


def counts(lines: list[Line]) -> dict[str, int]:
    return {state: sum(1 for line in lines if line.status == state) for state in STATES}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _verdict_cell(line: Line) -> str:
    """The state, and for a test case that did not run to a figure, why (its first line:
    "test-failed: node node2 failed (NODE_FAIL)", "skipped: needs 8 nodes, …")."""
    if line.status in (PASS, FAIL) or not line.detail.strip():
        return line.status
    why = line.detail.strip().splitlines()[0].removeprefix("sanity error: ")
    return f"{line.status}: {why[:120]}{'…' if len(why) > 120 else ''}"


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
               _num(line.reference), bounds, _verdict_cell(line)]
        if show_baseline:
            change = "-" if line.change is None else f"{line.change:+.1%}"
            row[5:5] = [_num(line.baseline), change]
        rows.append(row)
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    text = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    summary = ", ".join(f"{n} {s}" for s, n in counts(lines).items() if n or s in FAILING)
    return "\n".join(text + ["", f"verdict: {summary}"])
