"""`perfguard verdict N --explain SUBJECT` for a finding (issue 67, item 4): a node, HCA or
the finding's subject shows each line's evidence, how they combine, the bar and why it
paged or not — every number checkable by hand — on the real database with nights ingested
from a real demo report."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import psycopg

from perfguard.judge import findings as fd
from perfguard.judge import run_findings
from perfguard.judge import verdict as vd
from perfguard.store.ingest import RunMeta, ingest_paths
from tests.conftest import perfguard
from tests.system.test_history_verdicts import ingest, night_reports

TEST = re.compile(r"^ +(-?\d+\.\d\d)  (.+)$", re.M)
LINE_Z = re.compile(r"^   \* .*?: z (-?\d+\.\d\d) over", re.M)
ALL_Z = re.compile(r"^   [* ] .*?: z (-?\d+\.\d\d) over", re.M)
RESIDUAL = re.compile(r"; in the residuals' test (-?\d+\.\d\d)")


def _explained(dsn: str, run_id: int, subject: str) -> str:
    shown = perfguard("verdict", str(run_id), "--explain", subject, "--dsn", dsn)
    assert shown.returncode in (0, 1), shown.stdout + shown.stderr
    assert "Traceback" not in shown.stderr
    return shown.stdout


def test_a_paging_finding_is_explained_by_its_node_with_numbers_that_add_up(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """Two nights 5 % worse page the demo pair's finding; `--explain node1` (a node the
    finding names: before, "no line named like") shows its lines' z, its tests, the bar
    and the decision, and the numbers agree: the lines' residuals combine by Stouffer to
    the residuals' test, the evidence is the largest test, the bar is Bonferroni's."""
    reports = night_reports(demo_report, tmp_path, [1.0] * 20 + [0.95] * 2, slower=True)
    runs = ingest(migrated_dsn, reports, "--trigger", "nightly")
    out = _explained(migrated_dsn, runs[-1], "node1")
    assert re.search(r"^finding node1:\S+, node2:\S+ \(device\): PAGE$", out, re.M), out
    assert ALL_Z.findall(out) and LINE_Z.findall(out), out
    residuals = [float(z) for z in RESIDUAL.findall(out)]
    tests = {what: float(value) for value, what in TEST.findall(out)}
    combined = next(value for what, value in tests.items() if "residuals" in what)
    assert residuals and math.isclose(combined, sum(residuals) / math.sqrt(len(residuals)),
                                      abs_tol=0.01 * len(residuals)), out
    evidence = float(re.search(r"; evidence (-?\d+\.\d\d)$", out, re.M).group(1))
    assert math.isclose(evidence, max(tests.values()), abs_tol=0.005), out
    lines = int(re.search(r"/ (\d+) lines in the run's verdict", out).group(1))
    bar = statistics.NormalDist().inv_cdf(1 - fd.DEFAULT_POLICY.alpha / lines)
    assert f"the bar {bar:.2f}" in out, out
    assert re.search(r"^  outcome: pages: worse; evidence z [\d.]+ ≥ the bar [\d.]+; "
                     r"confirmed: \d+ of its \d+ moved line\(s\) held a level", out, re.M), out


def test_an_acknowledged_page_is_explained_as_judged_now_and_as_stored(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The pair's finding paged; acknowledged after, `--explain node1` explains it as
    judged now (ack) and says what the stored verdict said (PAGE, its evidence and bar):
    the record stays what paged. Before, it showed only today's "ack"."""
    reports = night_reports(demo_report, tmp_path, [1.0] * 20 + [0.95] * 2, slower=True)
    runs = ingest(migrated_dsn, reports, "--trigger", "nightly")
    paged = _explained(migrated_dsn, runs[-1], "node1")
    [subject] = re.findall(r"^finding (node1:\S+, node2:\S+) \(device\): PAGE$", paged, re.M)
    assert "as stored:" not in paged, paged  # nothing differs yet
    acked = perfguard("ack", "node1", "--reason", "cable swap", "--dsn", migrated_dsn)
    assert acked.returncode == 0, acked.stdout + acked.stderr
    out = _explained(migrated_dsn, runs[-1], "node1")
    assert re.search(rf"^finding {re.escape(subject)} \(device\): ack$", out, re.M), out
    assert re.search(r"^  as stored: PAGE, evidence z [\d.]+ against its bar [\d.]+; judged "
                     r"now: ack, evidence z [\d.]+$", out, re.M), out
    accepted = perfguard("accept", "*", "--from-run", str(runs[-2]), "--reason", "planned",
                         "--dsn", migrated_dsn)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    out = _explained(migrated_dsn, runs[-1], "node1")  # no finding now: the stored one
    assert re.search(rf"^finding {re.escape(subject)} \(device\), as stored: PAGE\n  .*\n  not a "
                     rf"finding as judged now", out, re.M), out


def test_a_finding_at_the_bar_two_runs_running_pages_naming_the_run_before(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The pair 20 % slower one night and 50 % the next: its lines' two nights do not
    agree, so none holds a level; the finding was at the bar on both nights, and pages on
    the second, naming the first night's run, evidence and bar (before, it said "one
    night: confirm on the next" on both nights and passed). A run stored between them
    and never judged (a sweep's: no findings) is passed over."""
    reports = night_reports(demo_report, tmp_path, [1.0] * 20 + [0.8, 1.0, 0.5], slower=True)
    runs = ingest(migrated_dsn, reports[:-2], "--trigger", "nightly")
    between = json.loads(reports[-2].read_text())  # its one test case measured nothing
    between["runs"][0]["testcases"] = [case for case in between["runs"][0]["testcases"]
                                       if not case.get("perfvalues")][:1]
    reports[-2].write_text(json.dumps(between))
    [stored] = ingest_paths(tmp_path, migrated_dsn, [reports[-2]], RunMeta("sweep"))
    assert stored.stored, stored
    runs += ingest(migrated_dsn, reports[-1:], "--trigger", "nightly")
    first = re.findall(r"^  outcome: does not page: worse; evidence z ([\d.]+) ≥ the bar "
                       r"([\d.]+); not confirmed: .*; nor at the bar on the run before$",
                       _explained(migrated_dsn, runs[-2], "node1"), re.M)
    assert len(first) == 1, _explained(migrated_dsn, runs[-2], "node1")
    [(night_1, bar_1)] = first
    out = _explained(migrated_dsn, runs[-1], "node1")
    assert runs[-1] - runs[-2] == 2, runs  # the sweep's run lies between them
    assert re.search(rf"^  outcome: pages: worse; evidence z [\d.]+ ≥ the bar [\d.]+; "
                     rf"confirmed: at the bar on the run before too \(run {runs[-2]}: evidence "
                     rf"z {night_1} ≥ its bar {bar_1}\); 0 of its \d+ moved line\(s\) held a "
                     rf"level", out, re.M), out


def test_a_watch_finding_says_why_it_did_not_page_and_an_unknown_subject_is_refused(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The fault's first night: the finding is shown (watch) and its explanation says why
    it does not page, with its numbers; a subject no finding or line names
    is refused in one line that says where to look."""
    reports = night_reports(demo_report, tmp_path, [1.0] * 20 + [0.95], slower=True)
    runs = ingest(migrated_dsn, reports, "--trigger", "nightly")
    out = _explained(migrated_dsn, runs[-1], "node2")
    assert re.search(r"^finding .*node2:\S+.*: watch$", out, re.M), out
    [decided] = re.findall(r"^  outcome: does not page: (.*)$", out, re.M)
    assert re.search(r"evidence z [\d.]+ < the bar|not confirmed: \d+ of its \d+ moved",
                     decided), out  # each failed condition named with its numbers
    summary = tmp_path / "summary.md"
    written = perfguard("report", str(runs[-1]), "-o", str(tmp_path / "r.html"), "--markdown",
                        str(summary), "--dsn", migrated_dsn, state=tmp_path)
    assert written.returncode in (0, 1), written.stdout + written.stderr
    assert re.search(r"^- \*\*watch\*\* .*node2:\S+.*worse by a median", summary.read_text(),
                     re.M), summary.read_text()  # the CI summary shows what is watched
    html = (tmp_path / "r.html").read_text()
    assert re.search(r'<li data-paged="false"><span class="state [\w-]+">watch</span>\s+'
                     r'[^<]*node2:\S+[^<]*worse by a median', html), html  # and the report
    unknown = perfguard("verdict", str(runs[-1]), "--explain", "node99", "--dsn",
                        migrated_dsn)
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    assert "no finding of run" in unknown.stderr and "node99" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_the_run_before_tells_where_each_test_case_ran_there(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """What a finding's confirmation reads of a pair line Slurm gave another node: each
    line's test case's nodes in the system's run judged before (``run_evidence``'s
    ``nodes_before``), by its variant, as that run stored them, not tonight's; a test
    case stored with no nodes there, and every line of the first run, have none."""
    reports = night_reports(demo_report, tmp_path, [1.0] * 2)
    first, tonight = (json.loads(report.read_text()) for report in reports)
    [case, *_] = [case for case in tonight["runs"][0]["testcases"]
                  if len(set(case.get("perfguard_nodelist") or [])) == 2]
    ran_before = tuple(sorted(case["perfguard_nodelist"]))
    case["perfguard_nodelist"] = [ran_before[0], "node9"]  # the job's own record
    [nowhere, *_] = [other for other in first["runs"][0]["testcases"]
                     if other.get("perfvalues") and other["name"] != case["name"]]
    nowhere["perfguard_nodelist"] = nowhere["job_nodelist"] = []
    for report, data in zip(reports, (first, tonight)):
        report.write_text(json.dumps(data))
    runs = ingest(migrated_dsn, reports, "--trigger", "nightly")
    with psycopg.connect(migrated_dsn) as conn:
        policy = run_findings.policy()
        lines = [vd.verdict(conn, run) for run in runs]
        evidence = [run_findings.run_evidence(
                        conn, run_findings.previous_judged_run(conn, run), found, policy)
                    for run, found in zip(runs, lines)]
        stored_before = run_findings.testcase_nodes(conn, runs[0])
    assert all(one.nodes_before is None for one in evidence[0])
    before = {vd.variant_of(line): one.nodes_before for line, one in zip(lines[1], evidence[1])}
    now = {vd.variant_of(line): line.nodes for line in lines[1] if line.nodes}
    moved = {key for key in now if now[key] == (ran_before[0], "node9")}
    unknown = {key for key, nodes in stored_before.items() if not nodes}
    assert moved and unknown and not moved & unknown, (moved, unknown)
    assert {before[key] for key in moved} == {ran_before}, before
    assert {before[key] for key in unknown if key in before} == {None}, before
    # every other measured line finds its test case's nodes of the run before
    assert all(before[key] == stored_before[key] for key in now.keys() - unknown), before
