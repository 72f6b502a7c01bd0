"""Issue 69 item 4, what a new site reads when something is off: a misspelled database
name is named as such (not blamed on the passfile), a run in which no figure was judged
does not say PASS, and a failure's reason reaches the HTML report whole (the rank, node
and signal at its end)."""

from __future__ import annotations

from pathlib import Path

from perfguard.judge import verdict as vd
from perfguard.present import htmlreport
from perfguard.present import text as tx
from perfguard.states import FAIL, INCONCLUSIVE, NO_REFERENCE, PASS, SKIPPED, TEST_FAILED
from perfguard.store.db import _connect_hint

NOT_YET = "not yet judged: history 0 of 8 runs (the last 3 runs, this one included, are " \
          "judged against it)"


def line(metric: str, status: str, detail: str = "", check: str = "OsuPt2PtCheck"
         ) -> vd.Line:
    return vd.Line(check, {"benchmark": "osu_bw"}, "compute", "gnu", metric,
                   None if metric == "-" else 1.0, "MB/s", {}, None, None, None, status,
                   detail=detail)


def test_a_misspelled_database_is_named_not_blamed_on_the_passfile(tmp_path: Path) -> None:
    """The passfile has the DBA's line for database perfguard; the DSN names perfguad:
    libpq finds no password, and the hint names the database, the line and the fix."""
    passfile = tmp_path / "pgpass"
    passfile.write_text("# the DBA's\ndb.example.org:5432:perfguard:pg_owner:secret\n")
    passfile.chmod(0o600)
    dsn = f"postgresql://pg_owner@db.example.org:5432/perfguad?passfile={passfile}"
    hint = _connect_hint(dsn, "fe_sendauth: no password supplied")
    assert f"the DSN's database is 'perfguad', the passfile {passfile} has line 2 for " \
           f"database 'perfguard': check the database in the DSN" in hint, hint
    assert "has no line" not in hint
    other_user = dsn.replace("pg_owner@", "someone@").replace("perfguad", "perfguard")
    assert "the DSN's user is 'someone'" in _connect_hint(other_user, "no password supplied")
    elsewhere = dsn.replace("pg_owner@db.example.org", "x@other.example.org")
    assert "has no line for this host, port, database and user" in \
        _connect_hint(elsewhere, "fe_sendauth: no password supplied")


def test_a_run_that_judged_no_figure_says_so_instead_of_pass() -> None:
    """A first night: every figure learning its history (or without a reference): the run
    line says NOTHING-JUDGED and why, not ``run 1: PASS``; one judged figure, a run of
    sanity checks alone, or a failed run keep their word."""
    passed = vd.RunOutcome(False, "no line failed or regressed")
    first = [line("bandwidth", INCONCLUSIVE, NOT_YET), line("latency", INCONCLUSIVE, NOT_YET),
             line("msg rate", NO_REFERENCE), line("-", PASS, check="MpiHelloCheck"),
             line("-", SKIPPED, "osu_bw is not on PATH")]
    said = tx.run_line(passed, 1, first)
    assert said == ("run 1: NOTHING-JUDGED (no figure judged yet: 2 not yet judged: history "
                    "0 of 8 runs, 1 no-reference; no line failed or regressed)"), said
    assert tx.run_line(passed, 2, [*first, line("bandwidth", PASS)]) == \
        "run 2: PASS (no line failed or regressed)"
    assert tx.run_line(passed, 3, [line("-", PASS, check="MpiHelloCheck")]).startswith(
        "run 3: PASS (")
    failed = vd.RunOutcome(True, "1 of 3 lines failed", vd.OUTCOME_FAIL)
    assert tx.run_line(failed, 4, [*first, line("-", TEST_FAILED, "job 4 FAILED")]) \
        .startswith("run 4: FAIL (")


def test_a_long_failure_reason_reaches_the_html_report_whole() -> None:
    """The verdict's cell in the HTML report was cut at 220 characters and its first line:
    the rank, node and signal that end a failure's reason were lost."""
    reason = ("sanity error: job 4711 FAILED with exit code 139; step 4711.0 (osu_latency) "
              "FAILED 139:0 after the benchmark printed its title and before any result, "
              "in the stage directory /work/site/stage/local/compute/gnu/OsuPt2PtCheck_4711"
              ":\nrank 1 on node2: Segmentation fault (core dumped)")
    failed = line("-", TEST_FAILED, reason)
    from datetime import datetime, timezone
    run = {"id": 7, "system": "local", "started_at": datetime.now(timezone.utc),
           "labels": [], "trigger": "manual", "reframe_version": "4.7"}
    report = htmlreport.Report(run=run,
                               lines=[failed, line("bandwidth", FAIL)], baseline_id=None,
                               changes=[])
    page = htmlreport.render_html(report)
    assert "rank 1 on node2: Segmentation fault (core dumped)" in page
