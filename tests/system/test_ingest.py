"""Ingest of real ReFrame reports into the real PostgreSQL: lossless, idempotent, atomic."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from perfguard.judge import run_findings
from perfguard.store import db
from perfguard.store.ingest import RunMeta, ingest_paths
from perfguard.store.report import ReportError, load
from perfguard.store.spool import meta_path, rejected, spooled
from tests.conftest import counts, perfguard


def test_migrations_from_empty_and_reapplied(fresh_dsn: str) -> None:
    with db.connect(fresh_dsn) as conn:
        first = db.upgrade(conn)
        second = db.upgrade(conn)
    assert first == db.migrations() + db.repeatables() and second == []
    status = perfguard("db", "status", "--dsn", fresh_dsn)
    assert status.returncode == 0 and "pending" not in status.stdout


def test_real_report_is_stored_with_every_sample(migrated_dsn: str, demo_report: Path,
                                                 tmp_path: Path) -> None:
    report = load(demo_report)
    [result] = ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta("nightly", ("x",)))
    assert result.stored
    expected_samples = sum(len(tc.samples) for tc in report.testcases)
    stored = counts(migrated_dsn)
    assert stored["run"] == 1 and stored["testcase"] == len(report.testcases)
    assert stored["sample"] == expected_samples
    # The UCX checks store the whole size sweep, not only the key figure.
    with db.connect(migrated_dsn) as conn:
        sizes = conn.execute(
            """SELECT array_agg(DISTINCT (pt.coords->>'size')::int)
               FROM sample s JOIN testcase tc ON tc.id = s.testcase_id
               JOIN metric m ON m.id = s.metric_id JOIN point pt ON pt.id = s.point_id
               WHERE tc.params->>'test' = 'tag_bw' AND m.name = 'bandwidth'
                 AND pt.coords ? 'size'""").fetchone()[0]
        trigger, labels = conn.execute("SELECT trigger, labels FROM run").fetchone()
    assert sorted(sizes) == [8, 4096, 65536, 1048576]
    assert (trigger, labels) == ("nightly", ["x"])


def test_ingest_refreshes_test_case_statistics_only_for_a_run_they_do_not_know(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """Ingest analyzes the test cases before its views read a run only where the run adds
    more than a tenth of what the statistics counted (0020): the first runs of a new
    database, never a small run beside many stored ones."""
    def analyzed(at_least: int) -> int:
        """ANALYZEs of the test cases, once a session's exit has flushed at least
        ``at_least`` into the statistics (up to 20 s)."""
        for _ in range(200):
            with db.connect(migrated_dsn) as conn:
                count = conn.execute("SELECT analyze_count FROM pg_stat_user_tables "
                                     "WHERE relname = 'testcase'").fetchone()[0]
            if count >= at_least:
                return count
            time.sleep(0.1)
        return count

    ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta())
    added = len(load(demo_report).testcases)
    before = analyzed(1)
    assert before >= 1  # the first run, into an empty table
    with db.connect(migrated_dsn) as conn:
        known = conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'testcase'"
                             ).fetchone()[0]
        stale = conn.execute("SELECT analyze_testcases(%s)", (added,)).fetchone()[0]
        fresh = conn.execute("SELECT analyze_testcases(%s)", (int(known // 10),)).fetchone()[0]
        conn.commit()
    assert known == added and (stale, fresh) == (True, False)
    assert analyzed(before + 1) == before + 1  # the stale one only


def test_reingest_changes_nothing(migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta())
    before = counts(migrated_dsn)
    [again] = ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta())
    assert not again.stored and again.run_id is not None
    assert counts(migrated_dsn) == before


def broken_copies(demo_report: Path, tmp_path: Path) -> dict[str, Path]:
    text = demo_report.read_text()
    raw = json.loads(text)
    unknown = json.loads(text)
    unknown["session_info"]["data_version"] = "3.1"
    nan = json.loads(text)
    case = next(tc for run in nan["runs"] for tc in run["testcases"] if tc["perfvalues"])
    key = next(iter(case["perfvalues"]))
    case["perfvalues"][key][0] = float("nan")
    off_schema = json.loads(text)
    off_schema["runs"][0]["testcases"][1]["result"] = 7  # perfguard would read it as "7"
    files = {
        "truncated": text[: len(text) // 2],
        "unknown_version": json.dumps(unknown),
        "nan": json.dumps(nan),
        "not_a_report": json.dumps({"hello": raw["session_info"]["uuid"]}),
        "off_schema": json.dumps(off_schema),
    }
    paths = {}
    for name, content in files.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(content)
    return paths


@pytest.mark.parametrize("kind, message", [
    ("truncated", "not valid JSON at line"),
    ("unknown_version", "unsupported report data_version '3.1'"),
    ("not_a_report", "not a ReFrame run report"),
    ("off_schema", "not a run report as ReFrame's schema describes it "
                   "(reframe/schemas/runreport.json): runs[0].testcases[1].result must be string"),
])
def test_bad_report_is_parked_and_db_unchanged(migrated_dsn: str, demo_report: Path,
                                                tmp_path: Path, kind: str, message: str) -> None:
    bad = broken_copies(demo_report, tmp_path)[kind]
    before = counts(migrated_dsn)
    state = tmp_path / "state"
    result = perfguard("ingest", "--dsn", migrated_dsn, str(bad), state=state)
    assert result.returncode == 1
    assert message in result.stderr and str(bad) in result.stderr
    assert counts(migrated_dsn) == before
    assert spooled(state) == []  # never retried: parked with the reason
    [kept] = rejected(state)
    assert kept.read_bytes() == bad.read_bytes()
    assert message in kept.with_name(kept.name + ".reason").read_text()


def test_db_down_spools_then_retry_stores(migrated_dsn: str, demo_report: Path,
                                          tmp_path: Path) -> None:
    state = tmp_path / "state"
    down = perfguard("ingest", "--dsn", "postgresql://perfguard@127.0.0.1:1/none",
                     str(demo_report), state=state)
    assert down.returncode == 1 and "unreachable" in down.stderr
    [kept] = spooled(state)
    assert kept.name.endswith(f"-{demo_report.name}")
    assert kept.read_bytes() == demo_report.read_bytes()
    retry = perfguard("ingest", "--spool", "--dsn", migrated_dsn, state=state)
    assert retry.returncode == 0, retry.stderr
    assert spooled(state) == []
    assert counts(migrated_dsn)["run"] == 1
    assert (state / "reports" / kept.name).read_bytes() == demo_report.read_bytes()


def test_a_spooled_run_keeps_its_leaf_switches_and_the_verdict_reads_them(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The leaves Slurm's tree had when the run ran travel in the run's metadata beside
    its report: spooled while the database was down and stored a day later, the run is
    judged with them (before, they were read from Slurm after the store, and a spooled
    run had none). Leaves that are not a node → leaf map are refused, naming the file."""
    report = tmp_path / "night.json"
    report.write_bytes(demo_report.read_bytes())
    RunMeta("nightly", (), None, {"node1": "leaf1", "node2": "leaf2"}).save_beside(report)
    state = tmp_path / "state"
    down = perfguard("ingest", "--dsn", "postgresql://perfguard@127.0.0.1:1/none",
                     str(report), state=state)
    assert down.returncode == 1 and len(spooled(state)) == 1, down.stderr
    retry = perfguard("ingest", "--spool", "--dsn", migrated_dsn, state=state)
    assert retry.returncode == 0, retry.stderr
    with db.connect(migrated_dsn) as conn:
        [run_id] = [row[0] for row in conn.execute("SELECT id FROM run")]
        assert run_findings.leaves(conn, run_id) == {"leaf1": {"node1"}, "leaf2": {"node2"}}
    meta_path(report).write_text('{"trigger": "nightly", "leaves": ["leaf1"]}')
    refused = perfguard("ingest", "--dsn", migrated_dsn, str(report), state=state)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert f"{meta_path(report)}: unreadable run metadata" in refused.stderr, refused.stderr
    assert "leaves must map each node to its leaf switch" in refused.stderr


def test_report_parser_rejects_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="cannot read report"):
        load(tmp_path / "nope.json")
