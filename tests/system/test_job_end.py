"""A complete table followed by a crash, or by a hang until the time limit, is not a pass.

The benchmark's real recorded output is replayed (tests/data/replay) through the check's
real job script and Slurm; only the program's end differs: exit 134 (an abort in
MPI_Finalize) or a hang that Slurm's time limit ends.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import psycopg
import pytest

from reframe_tests.common.launch import job_problem
from tests.conftest import (
    DATA,
    TEST_ROOT,
    TEST_STATE,
    perfguard,
    run_into_a_new_database,
    verdict_rows,
)

LATENCY = "^OsuPt2PtCheck%hca=lo%benchmark=osu_latency%transfer=H-H%placement=inter"
BANDWIDTH = "^OsuPt2PtCheck%hca=lo%benchmark=osu_bw%transfer=H-H%placement=inter"


def catalogue(directory: Path) -> Path:
    """Real recordings of osu_latency and osu_bw (2 nodes): one aborts after its complete
    table, the other hangs after it."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("osu_latency_2n2t", "osu_bw_2n2t"):
        for suffix in (".txt", ".stderr.txt"):
            shutil.copy(DATA / "replay" / f"{name}{suffix}", directory)
    (directory / "recordings.json").write_text(json.dumps([
        {"program": "osu_latency", "nnodes": 2, "ntasks": 2, "exit": 134,
         "stdout": "osu_latency_2n2t.txt", "stderr": "osu_latency_2n2t.stderr.txt"},
        {"program": "osu_bw", "nnodes": 2, "ntasks": 2, "hold_s": 600,
         "stdout": "osu_bw_2n2t.txt", "stderr": "osu_bw_2n2t.stderr.txt"}]))
    return directory


@pytest.fixture(scope="module")
def crashed(layout):
    replay = catalogue(TEST_ROOT / "replay-job-end")
    with run_into_a_new_database(
            layout, "the crashing and hanging jobs' run",
            lambda dsn: perfguard("run", "--dsn", dsn, "-n", LATENCY, "-n", BANDWIDTH,
                                  "-S", "OsuPt2PtCheck.time_limit=1m", state=TEST_STATE,
                                  env={"PERFGUARD_REPLAY": str(replay)})) as outcome:
        yield outcome


def stored(dsn: str) -> dict[str, tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return {params["benchmark"]: (state, reason) for params, state, reason in conn.execute(
            "SELECT params, state, fail_reason FROM judged_testcase "
            "WHERE check_name = 'OsuPt2PtCheck'")}


def test_complete_table_then_abort_is_test_failed(crashed) -> None:
    result, dsn = crashed
    assert result.returncode == 1, result.stdout + result.stderr
    state, reason = stored(dsn)["osu_latency"]
    assert state == "test-failed"
    # sacct reports the aborted task's step FAILED; srun's exit code is the signal's (6)
    assert re.search(r"job \d+ FAILED with exit code \d+; step \d+\.\d+ \(replay.py\) FAILED",
                     reason), reason
    [row] = [r for r in verdict_rows(result.stdout) if "osu_latency" in r["variant"]]
    assert re.match(r"test-failed: job \d+ FAILED", row["verdict"]), row


def test_hang_after_the_table_ends_as_timeout(crashed) -> None:
    """Said as the time limit it reached, not as srun's "Terminated" of the ranks the
    limit ended (which read like a crash), and not cut before the limit in the table."""
    result, dsn = crashed
    state, reason = stored(dsn)["osu_bw"]
    assert state == "test-failed"
    assert re.search(r"job \d+ reached its time limit \(1 min\): a step hung", reason), reason
    assert "Terminated" not in reason
    [row] = [r for r in verdict_rows(result.stdout) if "osu_bw" in r["variant"]]
    assert re.match(r"test-failed: job \d+ reached its time limit \(1 min\)", row["verdict"])


def test_a_check_that_records_failed_steps_judges_the_job_only() -> None:
    steps = [("7.3", "ucx_perftest", "FAILED", "1:0")]
    assert job_problem("7", "COMPLETED", 0, steps, steps_must_succeed=False) is None


def test_a_crashed_rank_ends_the_job_at_once_and_is_named(layout, migrated_dsn) -> None:
    """Rank 0 dies of SIGSEGV after its table while rank 1 waits (as in MPI): srun's
    --kill-on-bad-exit (and the embedded KillOnBadExit=1) ends the step in seconds, not at
    the 5-minute limit, and the verdict names the rank, node and signal."""
    replay = TEST_ROOT / "replay-crashed-rank"
    replay.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "replay" / "osu_latency_2n2t.txt", replay)
    (replay / "recordings.json").write_text(json.dumps([
        {"program": "osu_latency", "nnodes": 2, "ntasks": 2, "hold_s": 600,
         "crash": {"rank": 0, "signal": "SIGSEGV"}, "stdout": "osu_latency_2n2t.txt"}]))
    result = perfguard("run", "--dsn", migrated_dsn, "-n", LATENCY,
                       "-S", "OsuPt2PtCheck.time_limit=5m", state=TEST_STATE,
                       env={"PERFGUARD_REPLAY": str(replay)})
    assert result.returncode == 1, result.stdout + result.stderr
    state, reason = stored(migrated_dsn)["osu_latency"]
    assert state == "test-failed"
    assert re.search(r"rank 0 on node\d: Segmentation fault", reason), reason
    report = Path(re.search(r"\(report (\S+)\)", result.stdout).group(1))
    [case] = [c for c in json.loads(report.read_text())["runs"][0]["testcases"]
              if c["name"].startswith("OsuPt2PtCheck")]
    assert case["time_run"] < 120, case["time_run"]  # the limit was 300 s
    # the HTML report shows the tail of the failed job's stderr: srun's words
    html = TEST_ROOT / "crashed-rank.html"
    perfguard("report", "--dsn", migrated_dsn, "-o", str(html), state=TEST_STATE)
    assert re.search(r"srun: error: node\d: task 0: Segmentation fault", html.read_text())
