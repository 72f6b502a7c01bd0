"""Triage that matches (issue 67, item 5): an accepted level or an acknowledgement cleared
(kept, with who and when, listed and shown over the verdicts it touched), and an accept
that covers only the lines its run measured."""

from __future__ import annotations

import getpass
import json
import re
from pathlib import Path

import psycopg

from tests.conftest import perfguard
from tests.system.test_ack_and_history import PAGED
from tests.system.test_history_verdicts import BW_LINE, ingest, night_reports

ME = getpass.getuser()
LEVEL = re.compile(r"new level from run (\d+) accepted")


def _explained(dsn: str, run_id: int, line: str) -> str:
    result = perfguard("verdict", str(run_id), "--explain", line, "--dsn", dsn)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return result.stdout


def _with_a_new_check(report: Path) -> None:
    """The night's report with a check the earlier nights never ran: a copy of the UCX
    bandwidth test case under another name."""
    raw = json.loads(report.read_text())
    cases = raw["runs"][0]["testcases"]
    case = next(c for c in cases if c["name"].startswith("UcxPerftestCheck")
                and "tag_bw" in c.get("display_name", ""))
    new = json.loads(json.dumps(case))
    for key in ("name", "unique_name", "display_name"):
        new[key] = new[key].replace("UcxPerftestCheck", "SiteNewCheck")
    cases.append(new)
    report.write_text(json.dumps(raw))


def test_an_accept_covers_the_lines_its_run_measured_and_a_cleared_one_none(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """`accept node1 --from-run R`: a check that first ran nights after R is not judged
    against R's level (before, its lines read "new level from run R accepted" though R
    never measured them). `accept --clear ID` withdraws the level: later verdicts no longer
    apply it, `accept --list` keeps it with who cleared it and when, and the verdict
    judged with it shows the clearing over it."""
    reports = night_reports(demo_report, tmp_path, [1.0] * 12, slower=True)
    for late in reports[10:]:
        _with_a_new_check(late)
    runs = ingest(migrated_dsn, reports[:10], "--trigger", "nightly")
    assert perfguard("accept", "--list", "--dsn", migrated_dsn).stdout.startswith(
        "none (`perfguard accept LINES --from-run N"), "an empty list says so"
    perfguard("accept", "node1", "--from-run", str(runs[8]), "--reason", "new cable",
              "--dsn", migrated_dsn, check=True)
    runs += ingest(migrated_dsn, reports[10:11], "--trigger", "nightly")
    assert LEVEL.search(_explained(migrated_dsn, runs[10], BW_LINE))  # measured in run 8
    new_line = BW_LINE.replace("UcxPerftestCheck", "SiteNewCheck")
    late = _explained(migrated_dsn, runs[10], new_line)
    assert "decision:" in late and not LEVEL.search(late), late

    [level_id] = [int(n) for n in re.findall(r"^#(\d+) node1 ", perfguard(
        "accept", "--list", "--dsn", migrated_dsn).stdout, re.M)]
    cleared = perfguard("accept", "--clear", str(level_id), "--dsn", migrated_dsn)
    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    assert f"cleared #{level_id} (node1)" in cleared.stdout, cleared.stdout
    again = perfguard("accept", "--clear", str(level_id), "--dsn", migrated_dsn)
    assert again.returncode == 2 and f"no accepted level #{level_id} in force" in again.stderr

    runs += ingest(migrated_dsn, reports[11:], "--trigger", "nightly")
    assert not LEVEL.search(_explained(migrated_dsn, runs[11], BW_LINE))
    listed = perfguard("accept", "--list", "--dsn", migrated_dsn).stdout
    assert re.search(rf"^#{level_id} node1 from run {runs[8]}: by {ME} on \S+: new cable; "
                     rf"cleared by {ME} on \d{{4}}-\d\d-\d\d$", listed, re.M), listed
    shown = perfguard("verdict", str(runs[10]), "--dsn", migrated_dsn).stdout
    assert re.search(rf"^cleared since: node1: new level from run {runs[8]} accepted by {ME}"
                     rf" on \S+: new cable \(#{level_id}; cleared by {ME} on \S+\)$",
                     shown, re.M), shown
    with psycopg.connect(migrated_dsn) as conn:  # kept, not deleted
        assert conn.execute("SELECT cleared_by FROM accepted_level WHERE id = %s",
                            (level_id,)).fetchone() == (ME,)


def test_a_cleared_acknowledgement_is_listed_and_shown_over_the_verdicts_it_muted(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """`ack --clear ID`: the acknowledgement is kept with who cleared it and when (`ack
    --list` shows it apart from those in force), and the verdict it muted shows under its
    finding that it was cleared since (before, nothing said so)."""
    reports = night_reports(demo_report, tmp_path, [1.0] * 20 + [0.95] * 3, slower=True)
    runs = ingest(migrated_dsn, reports[:22], "--trigger", "nightly")
    [subject] = PAGED.findall(perfguard("verdict", str(runs[-1]), "--dsn",
                                        migrated_dsn).stdout)
    acked = perfguard("ack", subject, "--reason", "cable swap", "--dsn", migrated_dsn)
    [ack_id] = re.findall(r"^acknowledged #(\d+):", acked.stdout, re.M)
    [muted] = ingest(migrated_dsn, reports[22:], "--trigger", "nightly")
    perfguard("ack", "--clear", ack_id, "--dsn", migrated_dsn, check=True)
    shown = perfguard("verdict", str(muted), "--dsn", migrated_dsn)
    assert re.search(rf"^        acknowledgement #{ack_id} cleared since by {ME} on "
                     rf"\d{{4}}-\d\d-\d\d$", shown.stdout, re.M), shown.stdout
    listed = perfguard("ack", "--list", "--dsn", migrated_dsn).stdout
    assert re.search(rf"^cleared #{ack_id} local {re.escape(subject)}: by {ME} on \S+: cable "
                     rf"swap; cleared by {ME} on \d{{4}}-\d\d-\d\d$", listed, re.M), listed


def _on_system(reports: list[Path], system: str, days_later: int = 0) -> list[Path]:
    """The night reports as another system's (``system``), ``days_later`` days later."""
    for report in reports:
        raw = json.loads(report.read_text())
        raw["session_info"]["time_start_unix"] += 86400 * days_later
        for case in raw["runs"][0]["testcases"]:
            case["system"] = f"{system}:" + case["system"].partition(":")[2]
        report.write_text(json.dumps(raw))
    return reports


def test_an_ack_without_a_system_acknowledges_on_the_system_whose_finding_it_names(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """At a site whose system is not the demo's ``local``, `perfguard ack SUBJECT` acts on
    the one system whose open findings the subject names, here ``ndr4x4``'s though a
    quiet ``local`` ran since (before, it looked on ``local`` and refused every ack there:
    "names no open finding on local"); where two systems' findings are named, it is
    refused naming both."""
    for folder in ("ndr", "quiet", "local"):
        (tmp_path / folder).mkdir()
    faulty = night_reports(demo_report, tmp_path / "ndr", [1.0] * 20 + [0.95] * 2,
                           slower=True)
    runs = ingest(migrated_dsn, _on_system(faulty, "ndr4x4"), "--trigger", "nightly")
    [subject] = PAGED.findall(perfguard("verdict", str(runs[-1]), "--dsn",
                                        migrated_dsn).stdout)
    quiet = night_reports(demo_report, tmp_path / "quiet", [1.0] * 12, seed=8)
    ingest(migrated_dsn, _on_system(quiet, "local", days_later=1), "--trigger", "nightly")
    refused = perfguard("ack", subject, "--system", "local", "--reason", "cable swap",
                        "--dsn", migrated_dsn)
    assert refused.returncode == 2 and "names no open finding on local" in refused.stderr
    acked = perfguard("ack", subject, "--reason", "cable swap", "--dsn", migrated_dsn)
    assert acked.returncode == 0, acked.stdout + acked.stderr
    assert re.match(rf"acknowledged #\d+: {re.escape(subject)} on ndr4x4; ", acked.stdout)
    again = night_reports(demo_report, tmp_path / "local", [1.0] * 20 + [0.95] * 2,
                          seed=9, slower=True)
    ingest(migrated_dsn, _on_system(again, "local", days_later=30), "--trigger", "nightly")
    both = perfguard("ack", subject, "--reason", "cable swap", "--dsn", migrated_dsn)
    assert both.returncode == 2, both.stdout + both.stderr
    assert f"{subject!r} names open findings on 2 systems (local, ndr4x4): give --system" \
        in both.stderr, both.stderr
