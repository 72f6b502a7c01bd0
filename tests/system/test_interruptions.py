"""Interrupted runs and bad rows (issue 49, item 8), and blind lines (item 3), against the
real test cluster and PostgreSQL: each test failed before its change."""

from __future__ import annotations

import json
import os
import re
import signal
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg

from perfguard.present import dashboards
from tests.conftest import perfguard, verdict_rows
from tests.system.test_hardening import run_interrupted
from tests.system.test_history_verdicts import BW_LINE, ingest, store_nights


def _copy(demo_report: Path, target: Path, change) -> Path:
    """The real demo report with ``change`` applied to its JSON (a new session uuid)."""
    raw = json.loads(demo_report.read_text())
    raw["session_info"]["uuid"] = str(uuid.uuid4())
    change(raw)
    target.write_text(json.dumps(raw))
    return target


def test_report_exits_by_the_run_outcome(migrated_dsn: str, demo_report: Path,
                                         tmp_path: Path) -> None:
    """docs/operations.md: `perfguard report` ends with the run line and exits by it, as
    `verdict` does (it exited 0 on a FAIL run)."""
    def one_failed(raw: dict) -> None:
        case = raw["runs"][0]["testcases"][0]
        case.update(result="fail", fail_phase="sanity", fail_reason="core binding differs")

    [run] = ingest(migrated_dsn, [_copy(demo_report, tmp_path / "failed.json", one_failed)])
    verdict = perfguard("verdict", str(run), "--dsn", migrated_dsn)
    report = perfguard("report", str(run), "-o", str(tmp_path / "r.html"), "--dsn",
                       migrated_dsn, state=tmp_path)
    assert f"run {run}: FAIL (" in report.stdout, report.stdout + report.stderr
    assert report.returncode == verdict.returncode == 1, report.stdout + report.stderr


def test_a_nan_fails_its_test_case_and_the_rest_is_stored(migrated_dsn: str, demo_report: Path,
                                                         tmp_path: Path) -> None:
    """One NaN in one test case rejected the whole night's report; now that test case
    fails with the place and the value as its reason, that figure alone not stored (its
    other figures are), and every other test case is stored."""
    cases = json.loads(demo_report.read_text())["runs"][0]["testcases"]
    measured = [case for case in cases if case.get("perfvalues")]

    def one_nan(raw: dict) -> None:
        case = next(c for c in raw["runs"][0]["testcases"] if c.get("perfvalues"))
        case["perfvalues"][next(iter(case["perfvalues"]))][0] = float("nan")


    [run] = ingest(migrated_dsn, [_copy(demo_report, tmp_path / "nan.json", one_nan)])
    with psycopg.connect(migrated_dsn) as conn:
        stored = conn.execute("SELECT tc.result, tc.fail_reason, (SELECT count(*) FROM sample "
                              "s WHERE s.testcase_id = tc.id) FROM testcase tc WHERE "
                              "tc.run_id = %s ORDER BY tc.id", (run,)).fetchall()
    assert len(stored) == len(cases)
    failed = [row for row in stored if row[0] == "fail"]
    assert len(failed) == 1, stored
    said = re.match(r"perfvalues\['[^']+'\]: value nan is not finite \(NaN or infinity\): not "
                    r"stored \((\d+) other figure\(s\) of this test case are\)$", failed[0][1])
    assert said and failed[0][2] == int(said[1]) > 0, failed[0]  # its curve's points too
    assert sum(1 for row in stored if row[2]) == len(measured)
    verdict = perfguard("verdict", str(run), "--dsn", migrated_dsn)
    assert verdict.returncode == 1 and "test-failed: perfvalues[" in verdict.stdout


def test_rejected_reports_are_capped_listed_and_purged(migrated_dsn: str, demo_report: Path,
                                                      tmp_path: Path) -> None:
    """A rejected report was kept whole (two 200 MB probes left 401 MB): now its first
    $PERFGUARD_REJECTED_MAX_MB, the rest cut off and said; `spool list` and `spool purge`."""
    state = tmp_path / "state"
    big = tmp_path / "big.json"
    big.write_text(demo_report.read_text()[:-10] + " " * (3 * 2 ** 20))  # truncated, 3 MiB
    result = perfguard("ingest", "--dsn", migrated_dsn, str(big), state=state,
                       env={"PERFGUARD_REJECTED_MAX_MB": "1"})
    assert result.returncode == 1 and "not valid JSON" in result.stderr
    [kept] = (state / "spool" / "rejected").glob("*-big.json")
    assert kept.stat().st_size == 2 ** 20
    reason = kept.with_name(kept.name + ".reason").read_text()
    whole = f"{big.stat().st_size / 2 ** 20:.1f}"  # 3 MiB and the demo report's start
    assert f"[truncated: kept the first 1 of {whole} MiB, $PERFGUARD_REJECTED_MAX_MB]" in reason
    down = perfguard("ingest", "--dsn", "postgresql://perfguard@127.0.0.1:1/none",
                     str(demo_report), state=state)
    assert down.returncode == 1
    listed = perfguard("spool", "list", state=state, check=True).stdout
    assert re.search(r"^rejected +1\.0 MiB  \S+-big\.json: .*not valid JSON", listed, re.M)
    assert re.search(rf"^waiting .*-{demo_report.name}: .*unreachable", listed, re.M), listed
    assert listed.splitlines()[-1].startswith("1 waiting to be stored, 1 rejected")
    purged = perfguard("spool", "purge", state=state, check=True).stdout
    assert purged.splitlines()[-1] == "1 report(s) removed (1.0 MiB)"
    assert perfguard("spool", "list", state=state).stdout.splitlines()[-1].startswith(
        "1 waiting to be stored, 0 rejected")
    perfguard("spool", "purge", "--waiting", state=state, check=True)
    assert perfguard("spool", "list", state=state).stdout.strip() == \
        "0 waiting to be stored, 0 rejected"


def test_an_interrupted_run_is_interrupted_never_failed(layout, migrated_dsn: str) -> None:
    """SIGINT (Ctrl-C) during `perfguard run`: the test case that finished is stored and
    passes, the one still running is `aborted` (neither passed nor failed), the run is
    INTERRUPTED with exit 4 and nothing pages (before: the aborted case was test-failed
    and the run FAIL, exit 1)."""
    returncode, out = run_interrupted(
        layout, migrated_dsn, lambda run: os.killpg(run.pid, signal.SIGINT))  # as Ctrl-C
    assert returncode == 4, out
    assert "interrupted by SIGINT" in out and re.search(r"^run \d+: INTERRUPTED \(1 test "
                                                        r"case\(s\) aborted", out, re.M), out
    with psycopg.connect(migrated_dsn) as conn:
        stored = dict(conn.execute("SELECT check_name, state FROM judged_testcase").fetchall())
        paged = conn.execute("SELECT count(*) FROM finding WHERE paged").fetchone()[0]
        outcome = conn.execute("SELECT outcome, failed FROM run_outcome").fetchall()
    assert stored.pop("UcxPerftestCheck") == "aborted", out
    assert stored.pop("MpiHelloCheck") == "pass" and set(stored.values()) <= {"pass"}, out
    assert paged == 0 and outcome == [("interrupted", False)]
    [line] = [row["verdict"] for row in verdict_rows(out.split("perfguard verdict for run")[-1])
              if row["check"] == "UcxPerftestCheck"]
    assert line.startswith("aborted: aborted due to ForceExitError"), line


def test_a_blind_line_says_so_in_verdict_report_and_dashboard(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """A line too noisy to see a change of 25 % (CV 30 % here, 67 % on a busy host) was
    "inconclusive" or "pass" night after night with no word that it is blind; now the
    verdict, the HTML report and the dashboard's "Blind lines" panel say so, and for how
    many nights."""
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 14, cv=0.3, seed=3)
    explained = perfguard("verdict", str(runs[-1]), "--explain", BW_LINE, "--dsn",
                          migrated_dsn).stdout
    nights = re.search(r"blind for (\d+) nights?: noise ±(\d+\.\d)% hides any change under 3σ",
                       explained)
    assert nights and 1 <= int(nights[1]) <= 4, explained
    table = perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn).stdout
    assert re.search(r"^blind: \d+ line\(s\) too noisy to tell a change of 25 % from noise, "
                     r"the longest for \d night\(s\) in a row", table, re.M), table
    assert f"(blind {nights[1]} night" in table
    html = tmp_path / "r.html"
    perfguard("report", str(runs[-1]), "-o", str(html), "--dsn", migrated_dsn, state=tmp_path)
    page = html.read_text()
    assert re.search(r'id="blind"><p><b>Blind: \d+ of \d+ lines</b>', page), page[:3000]
    assert f"{BW_LINE}: <span class=\"detail\">blind for {nights[1]} night" in page
    [query] = [q for q in dashboards.queries() if q.panel.startswith("Blind lines")]
    now = datetime.now(timezone.utc)
    sql = dashboards.expand(query.sql, {"system": "local"}, now - timedelta(days=30), now)
    with psycopg.connect(migrated_dsn) as conn:
        counts = conn.execute(sql).fetchall()
        stored = conn.execute("SELECT count(*) FROM verdict_line WHERE run_id = %s AND "
                              "blind_nights > 0", (runs[-1],)).fetchone()[0]
    assert counts[-1][1] == stored > 0 and counts[0][1] == 0, counts
