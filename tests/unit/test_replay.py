"""The replay program's ordering of a recorded failure, run as the job step runs it.

A recording whose ranks exit non-zero (OMB's title, then a segfault) is replayed right
only if rank 0 prints before any rank fails: srun kills the step's other ranks on the
first failing exit, and a rank 0 killed before printing is a different failure (no
title) than the recorded one. CI lost that race once on a loaded host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPLAY = Path(__file__).parents[2] / "reframe_tests" / "common" / "replay.py"


def start_rank(catalogue: Path, workdir: Path, rank: int) -> subprocess.Popen:
    env = {**os.environ, "SLURM_PROCID": str(rank), "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0",
           "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NUM_TASKS": "2"}
    return subprocess.Popen([sys.executable, str(REPLAY), str(catalogue), "osu_latency"],
                            cwd=workdir, env=env, stdout=subprocess.PIPE, text=True)


def test_a_failing_rank_exits_only_after_rank_0_printed(tmp_path: Path) -> None:
    (tmp_path / "title.txt").write_text("# OSU MPI-CUDA Latency Test v7.4\n")
    (tmp_path / "recordings.json").write_text(json.dumps(
        [{"program": "osu_latency", "nnodes": 1, "ntasks": 2, "stdout": "title.txt",
          "exit": 139}]))
    rank1 = start_rank(tmp_path, tmp_path, 1)
    with pytest.raises(subprocess.TimeoutExpired):
        rank1.wait(timeout=2)  # rank 0 has not printed: rank 1 must not fail yet
    rank0 = start_rank(tmp_path, tmp_path, 0)
    assert rank0.communicate(timeout=30)[0].startswith("# OSU MPI-CUDA Latency Test")
    assert rank0.returncode == 139
    assert rank1.wait(timeout=30) == 139
    rank1.stdout.close()
