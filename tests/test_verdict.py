"""Verdicts from the database: pass, fail, no-reference, and the change vs a baseline."""

from __future__ import annotations

from pathlib import Path

from perfguard.ingest import RunMeta, ingest_paths
from tests.conftest import perfguard

BW = ["--system", "local", "--check", "UcxPerftestCheck", "--param", "test=tag_bw",
      "--metric", "bandwidth", "--unit", "MiB/s"]


def test_verdict_pass_fail_and_no_reference(migrated_dsn: str, demo_report: Path,
                                            tmp_path: Path) -> None:
    [stored] = ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta())
    plain = perfguard("verdict", "--dsn", migrated_dsn)
    assert plain.returncode == 0
    assert "no-reference" in plain.stdout and " fail" not in plain.stdout.split("verdict:")[0]

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
              "--unit", "us", "--reference", "1e6", "--upper", "10%", check=True)
    import psycopg
    with psycopg.connect(migrated_dsn) as conn:  # make the thresholds predate the run
        conn.execute("UPDATE threshold SET valid_from = '2000-01-01'")
    ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta())
    result = perfguard("verdict", "--dsn", migrated_dsn)
    assert result.returncode == 1
    rows = {word: line for line in result.stdout.splitlines()
            if line.startswith("UcxPerftestCheck") for word in line.split()
            if word.startswith("%test=")}
    assert rows["%test=tag_bw"].rstrip().endswith("fail")
    assert rows["%test=tag_lat"].rstrip().endswith("pass")
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
    assert result.stdout.count("+100.0%") >= 4
