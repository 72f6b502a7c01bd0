"""Acks and accepts that do what they say, and verdicts that stay as judged (issue 49,
items 4 and 5), on the real database with nights ingested from a real demo report."""

from __future__ import annotations

import getpass
import re
from pathlib import Path

import psycopg

from tests.conftest import perfguard
from tests.system.test_history_verdicts import BW_LINE, ingest, night_reports

ME = getpass.getuser()
#: A `perfguard verdict` findings line that pages: its cause.
PAGED = re.compile(r"^  PAGE  (\S+(?:, \S+)*): \d+ of \d+ line\(s\) worse", re.M)


def _findings_section(html: str) -> str:
    """The report's status badge and findings, what the night said (the rest carries the
    time it was written)."""
    status = html[html.index('id="status"'):html.index('<div class="meta">')]
    counts = html[html.index('id="counts"'):html.index("</header>")]
    findings = html[html.index('<section id="findings">'):html.index('id="attention"')]
    return status + counts + findings


def _outcome(dsn: str, run_id: int) -> tuple:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT outcome, why FROM run_outcome WHERE run_id = %s",
                            (run_id,)).fetchone()


def test_ack_of_a_node_mutes_the_pair_finding_and_the_paged_night_stays_as_judged(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """Two nights 5 % worse page one finding naming both nodes of the demo's pair.
    `ack node1` mutes it from the next verdict on (the next faulty night passes, the
    finding shown as ack); the paged night's stored verdict, its `perfguard verdict` and
    its HTML report stay FAIL, the ack shown over it; `--rejudge` stores a new verdict
    with its time, the first one kept."""
    reports = night_reports(demo_report, tmp_path, [1.0] * 20 + [0.95] * 3, slower=True)
    runs = ingest(migrated_dsn, reports[:22], "--trigger", "nightly")
    paging = perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn)
    assert paging.returncode == 1, paging.stdout
    [subject] = PAGED.findall(paging.stdout)
    assert "node1:" in subject and "node2:" in subject, subject  # the pair: both nodes
    before = tmp_path / "before.html"
    written = perfguard("report", str(runs[-1]), "-o", str(before), "--dsn", migrated_dsn,
                        state=tmp_path)
    assert written.returncode == 1, written.stdout + written.stderr  # the run's outcome
    judged = _outcome(migrated_dsn, runs[-1])

    acked = perfguard("ack", "node1", "--reason", "cable swap on Friday", "--dsn",
                      migrated_dsn)
    assert acked.returncode == 0, acked.stdout + acked.stderr

    # the next faulty night: judged with the ack, shown, no page
    [next_run] = ingest(migrated_dsn, reports[22:], "--trigger", "nightly")
    muted = perfguard("verdict", str(next_run), "--dsn", migrated_dsn)
    assert muted.returncode == 0, muted.stdout
    assert re.search(rf"^  ack   {re.escape(subject)}: .*; acknowledged by {ME} on "
                     rf"\d{{4}}-\d\d-\d\d: cable swap on Friday$", muted.stdout, re.M), \
        muted.stdout

    assert f"mutes: {subject}" in acked.stdout, acked.stdout  # said, and true

    # the paged night: as judged, the ack over it
    again = perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn)
    assert again.returncode == 1, again.stdout
    assert PAGED.findall(again.stdout) == [subject], again.stdout
    assert re.search(rf"^        acknowledged since by {ME} on \d{{4}}-\d\d-\d\d: cable swap "
                     rf"on Friday \(#\d+\)$", again.stdout, re.M), again.stdout
    assert re.search(rf"^run {runs[-1]}: FAIL \(1 finding\(s\) paged: ", again.stdout, re.M)
    assert _outcome(migrated_dsn, runs[-1]) == judged
    after = tmp_path / "after.html"
    written = perfguard("report", str(runs[-1]), "-o", str(after), "--dsn", migrated_dsn,
                        state=tmp_path)
    assert written.returncode == 1, written.stdout + written.stderr  # the run's outcome
    assert _findings_section(after.read_text()) == _findings_section(before.read_text())

    # judged again only when asked: a new verdict with its time, the first one kept
    rejudged = perfguard("verdict", str(runs[-1]), "--rejudge", "--dsn", migrated_dsn)
    assert rejudged.returncode == 0, rejudged.stdout
    assert re.search(rf"^run {runs[-1]}: as re-judged by {ME} on \S+ \S+ \S+$",
                     rejudged.stdout, re.M), rejudged.stdout
    assert re.search(r"^  earlier: judged on \S+ \S+ \S+: FAIL \(1 finding\(s\) paged: ",
                     rejudged.stdout, re.M), rejudged.stdout
    assert re.search(rf"^run {runs[-1]}: PASS \(", rejudged.stdout, re.M), rejudged.stdout
    with psycopg.connect(migrated_dsn) as conn:
        kept = conn.execute(
            "SELECT v.outcome, count(DISTINCT l.metric), bool_or(f.paged) FROM verdict v "
            "JOIN superseded_verdict_line l ON l.verdict_id = v.id "
            "JOIN superseded_finding f ON f.verdict_id = v.id WHERE v.run_id = %s "
            "GROUP BY v.id", (runs[-1],)).fetchall()
    assert len(kept) == 1 and kept[0][0] == "fail" and kept[0][2], kept


def test_an_ack_never_rewrites_the_stored_verdict_of_the_night_that_paged(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The finding's exact cause acknowledged: the paged night's verdict is FAIL as it was
    judged (before, `perfguard verdict` judged it again and stored PASS over it, and FAIL
    again after `ack --clear`), and says what was acknowledged since."""
    runs = ingest(migrated_dsn, night_reports(demo_report, tmp_path, [1.0] * 20 + [0.95] * 2,
                                              slower=True), "--trigger", "nightly")
    judged = _outcome(migrated_dsn, runs[-1])
    assert judged[0] == "fail"
    [subject] = PAGED.findall(perfguard("verdict", str(runs[-1]), "--dsn",
                                        migrated_dsn).stdout)
    perfguard("ack", subject, "--reason", "cable swap", "--dsn", migrated_dsn, check=True)
    shown = perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn)
    assert shown.returncode == 1, shown.stdout
    assert _outcome(migrated_dsn, runs[-1]) == judged
    assert "acknowledged since by" in shown.stdout, shown.stdout


def test_ack_names_an_open_finding_or_what_it_contains_else_it_is_refused(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """`ack --list` with none says so; a cause no open finding names is refused with the
    open findings listed (exit 2, nothing stored); a line of the pair finding is taken,
    and says that the finding still pages; the exact device too."""
    none = perfguard("ack", "--list", "--dsn", migrated_dsn)
    assert none.returncode == 0 and none.stdout.startswith("none"), none.stdout
    runs = ingest(migrated_dsn, night_reports(demo_report, tmp_path, [1.0] * 20 + [0.95] * 2,
                                              slower=True), "--trigger", "nightly")
    [subject] = PAGED.findall(perfguard("verdict", str(runs[-1]), "--dsn",
                                        migrated_dsn).stdout)
    refused = perfguard("ack", "node9", "--reason", "typo", "--dsn", migrated_dsn)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "'node9' names no open finding on local" in refused.stderr
    assert f"open findings: {subject} (run {runs[-1]})" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert perfguard("ack", "--list", "--dsn", migrated_dsn).stdout.startswith("none")

    line = perfguard("ack", BW_LINE, "--reason", "known UCX issue", "--dsn", migrated_dsn)
    assert line.returncode == 0, line.stderr
    assert "mutes: no open finding whole" in line.stdout, line.stdout
    assert f"still pages: {subject}" in line.stdout, line.stdout
    device = subject.split(", ")[0]  # node1:lo
    exact = perfguard("ack", device, "--reason", "cable swap", "--dsn", migrated_dsn)
    assert exact.returncode == 0 and f"mutes: {subject}" in exact.stdout, exact.stdout
    listed = perfguard("ack", "--list", "--dsn", migrated_dsn).stdout
    assert f" local {BW_LINE}: by {ME} " in listed and f" local {device}: by {ME} " in listed


def test_after_accept_a_second_fault_pages(migrated_dsn: str, demo_report: Path,
                                           tmp_path: Path) -> None:
    """A planned change costs 5 % (three nights, accepted); two nights at the new level,
    then a second fault of 10 % more: the new level is judged against its own runs as
    soon as three exist (the accepted runs meanwhile), so the fault pages on its second
    night. Before, the lines were "not yet judged" for 8 nights and nothing paged."""
    factors = [1.0] * 20 + [0.95] * 5 + [0.95 * 0.9] * 2
    reports = night_reports(demo_report, tmp_path, factors, slower=True)
    runs = ingest(migrated_dsn, reports[:23], "--trigger", "nightly")
    perfguard("accept", "*", "--from-run", str(runs[20]), "--reason", "firmware 20.41 costs "
              "5 %", "--dsn", migrated_dsn, check=True)
    with psycopg.connect(migrated_dsn) as conn:  # accepted the morning after night 22
        conn.execute("UPDATE accepted_level SET at = (SELECT started_at + interval '8 hours' "
                     "FROM run WHERE id = %s)", (runs[22],))
    runs += ingest(migrated_dsn, reports[23:], "--trigger", "nightly")
    level = perfguard("verdict", str(runs[24]), "--dsn", migrated_dsn)
    assert level.returncode == 0, level.stdout  # the new level itself: no page
    explained = perfguard("verdict", str(runs[-1]), "--explain", BW_LINE, "--dsn",
                          migrated_dsn).stdout
    assert re.search(rf"decision: regression — new level from run {runs[20]} accepted by {ME}"
                     rf" on \d{{4}}-\d\d-\d\d: firmware 20\.41 costs 5 %; -\d+\.\d% vs the "
                     rf"median of \d runs of the accepted level", explained), explained
    fault = perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn)
    assert fault.returncode == 1, fault.stdout
    assert PAGED.search(fault.stdout), fault.stdout
