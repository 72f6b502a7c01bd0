"""Verdicts from the database: pass, fail, inconclusive without history, and the change vs a
baseline."""

from __future__ import annotations

import json
from pathlib import Path

from perfguard.present import text as tx
from perfguard.store.ingest import RunMeta, ingest_paths
from tests.conftest import perfguard, verdict_rows

BW = ["--system", "local", "--check", "UcxPerftestCheck", "--param", "test=tag_bw",
      "--metric", "bandwidth", "--unit", "MiB/s", "--direction", "higher"]


def test_verdict_pass_fail_and_inconclusive_without_history(migrated_dsn: str, demo_report: Path,
                                            tmp_path: Path) -> None:
    [stored] = ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta())
    plain = perfguard("verdict", "--dsn", migrated_dsn)
    assert plain.returncode == 0
    assert "inconclusive: not yet judged: history 0 of 8 runs" in plain.stdout
    assert max(len(line) for line in plain.stdout.splitlines()) <= 120
    assert " fail" not in plain.stdout.split("verdict:")[0]
    # No figure had a history or a threshold: the run line says so, not PASS (issue 69).
    assert plain.stdout.splitlines()[-1].startswith(
        f"run {stored.run_id}: NOTHING-JUDGED (no figure judged yet: "), plain.stdout

    # A bound set after the run does not judge it: thresholds are matched by validity time.
    perfguard("thresholds", "set", "--dsn", migrated_dsn, *BW, "--reference", "1e9",
              "--lower=-10%", check=True)
    later = perfguard("verdict", str(stored.run_id), "--dsn", migrated_dsn)
    assert later.returncode == 0


def test_verdict_fails_when_threshold_valid_at_run_time_is_missed(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    perfguard("thresholds", "set", "--dsn", migrated_dsn, *BW, "--reference", "1e9",
              "--lower=-10%", check=True)
    perfguard("thresholds", "set", "--dsn", migrated_dsn, "--system", "local", "--check",
              "UcxPerftestCheck", "--param", "test=tag_lat", "--metric", "latency",
              "--unit", "us", "--direction", "lower", "--reference", "1e6", "--upper", "10%",
              check=True)
    import psycopg
    with psycopg.connect(migrated_dsn) as conn:  # make the thresholds predate the run
        conn.execute("UPDATE threshold SET valid_from = '2000-01-01'")
    ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta())
    result = perfguard("verdict", "--dsn", migrated_dsn)
    assert result.returncode == 1
    states = {}
    for row in verdict_rows(result.stdout):
        if row["check"] == "UcxPerftestCheck" and "%memory=host" in row["variant"]:
            test = row["variant"].split("%test=")[1].split()[0]
            states.setdefault(test, set()).add(row["verdict"].split(":")[0])
    assert "fail" in states["tag_bw"]
    assert states["tag_lat"] <= {"pass", "inconclusive"} and "fail" not in states["tag_lat"]
    assert "1 fail" in result.stdout


def test_verdict_with_baseline_shows_change(migrated_dsn: str, demo_report: Path,
                                            tmp_path: Path) -> None:
    import json
    ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta(labels=("pre-upgrade",)))
    raw = json.loads(demo_report.read_text())
    raw["session_info"]["uuid"] = "00000000-0000-4000-8000-000000000001"
    raw["session_info"]["time_start_unix"] += 3600
    for run in raw["runs"]:
        for case in run["testcases"]:
            for entry in case["perfvalues"].values():
                entry[0] *= 2
    after = tmp_path / "after.json"
    after.write_text(json.dumps(raw))
    ingest_paths(tmp_path, migrated_dsn, [after], RunMeta())
    result = perfguard("verdict", "--baseline", "pre-upgrade", "--dsn", migrated_dsn)
    assert "baseline" in result.stdout.splitlines()[1]
    assert max(len(line) for line in result.stdout.splitlines()) <= 120
    assert result.stdout.count("+100.0%") >= 4


def test_skipped_expected_failure_and_retried_cases_do_not_fail_a_run(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """ReFrame's skip/xfail are their own states; of a retried case only its last attempt
    is judged (its failed first attempt does not fail the run), as in the dashboards."""
    import json
    import uuid

    import psycopg

    raw = json.loads(demo_report.read_text())
    raw["session_info"]["uuid"] = str(uuid.uuid4())
    cases = raw["runs"][0]["testcases"]
    hello = next(c for c in cases if c["name"].startswith("MpiHelloCheck"))
    skipped = {**hello, "name": "SkippedCheck", "unique_name": "SkippedCheck",
               "result": "skip", "fail_reason": "needs 8 nodes, partition has 4",
               "perfvalues": {}}
    xfailed = {**hello, "name": "KnownIssueCheck", "unique_name": "KnownIssueCheck",
               "result": "xfail", "fail_reason": "known issue"}
    first_try = {**hello, "result": "fail", "fail_phase": "run", "fail_reason": "node lost"}
    raw["runs"][0]["testcases"] = [first_try, skipped, xfailed,
                                   *[c for c in cases if c is not hello]]
    raw["runs"].append({**raw["runs"][0], "runid": 1, "testcases": [{**hello, "run_index": 1}]})
    report = tmp_path / "states.json"
    report.write_text(json.dumps(raw))
    [stored] = ingest_paths(tmp_path, migrated_dsn, [report], RunMeta())
    assert stored.run_id is not None, stored.message

    result = perfguard("verdict", str(stored.run_id), "--dsn", migrated_dsn)
    assert result.returncode == 0, result.stdout
    # the state, then ": why" for cases without a figure
    rows = {row["check"]: row["verdict"].split(":")[0] for row in verdict_rows(result.stdout)}
    assert rows["SkippedCheck"] == "skipped [1]" and rows["KnownIssueCheck"] == "expected-failure"
    assert rows["MpiHelloCheck"] == "pass"
    assert "1 expected-failure" in result.stdout and "1 skipped" in result.stdout
    with psycopg.connect(migrated_dsn) as conn:
        states = dict(conn.execute(
            "SELECT check_name || ':' || run_index, state FROM judged_testcase "
            "WHERE run_id = %s", (stored.run_id,)).fetchall())
    assert states["MpiHelloCheck:1"] == "pass" and "MpiHelloCheck:0" not in states


def test_each_key_figure_names_the_point_of_its_curve_it_is(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The verdict names which point of its curve a key figure is (the report and
    --explain say "the size … point of its curve"), read from the sweeps kept whole: the
    same points the samples give, for every key figure that is one of its curve's points
    (the UCX bandwidth and latency figures of the real demo run)."""
    from perfguard.judge import verdict as vd
    from perfguard.store import db

    [stored] = ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta())
    with db.connect(migrated_dsn) as conn:
        lines = vd.with_key_points(conn, stored.run_id, vd.verdict(conn, stored.run_id))
        from_samples = conn.execute(
            """SELECT tc.check_name, tc.params::text, m.name,
                      ((array_agg(pt.coords ORDER BY pt.id))[1])::text
               FROM testcase tc JOIN run r ON r.id = tc.run_id
               JOIN sample k ON k.testcase_id = tc.id AND k.point_id = 0
               JOIN sample s ON s.testcase_id = tc.id AND s.metric_id = k.metric_id
                            AND s.point_id <> 0 AND s.value = k.value
               JOIN metric m ON m.id = k.metric_id JOIN point pt ON pt.id = s.point_id
               WHERE r.id = %s GROUP BY 1, 2, 3""", (stored.run_id,)).fetchall()
    named = {(line.check, line.metric, line.params.get("test")): line.key_point
             for line in lines if line.key_point}
    expected = {(check, metric, json.loads(params).get("test")): json.loads(coords)
                for check, params, metric, coords in from_samples}
    assert len(expected) >= 4 and named == expected, (named, expected)
    assert any(tx.key_point_text(line).startswith(" (the size ") for line in lines)


