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
    create_database,
    drop_databases,
    perfguard,
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
    name, dsn = create_database(layout)
    perfguard("db", "upgrade", "--dsn", dsn, check=True)
    replay = catalogue(TEST_ROOT / "replay-job-end")
    result = perfguard("run", "--dsn", dsn, "-n", LATENCY, "-n", BANDWIDTH,
                       "-S", "OsuPt2PtCheck.time_limit=1m", state=TEST_STATE,
                       env={"PERFGUARD_REPLAY": str(replay)})
    yield result, dsn
    drop_databases(layout, [name])


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
    _, dsn = crashed
    state, reason = stored(dsn)["osu_bw"]
    assert state == "test-failed"
    assert re.search(r"job \d+ TIMEOUT", reason), reason


def test_a_check_that_records_failed_steps_judges_the_job_only() -> None:
    steps = [("7.3", "ucx_perftest", "FAILED", "1:0")]
    assert job_problem("7", "COMPLETED", 0, steps, steps_must_succeed=False) is None
