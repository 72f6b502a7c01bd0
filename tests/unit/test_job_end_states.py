"""How a job's end is read, pure: Slurm's job and step states and exit codes become the
reason a run is not a pass."""

from __future__ import annotations

import pytest

from reframe_tests.common.launch import job_problem


@pytest.mark.parametrize("state, code, steps, expected", [
    ("COMPLETED", 0, [("7", "rfm_job", "COMPLETED", "0:0"), ("7.0", "osu_bw", "COMPLETED",
                                                             "0:0")], None),
    ("COMPLETED", 0, [("7.0", "perfguard-helper", "FAILED", "1:0"),
                      ("7.1", "osu_bw", "COMPLETED", "0:0")], None),
    ("COMPLETED", 0, [("7.1", "osu_bw", "FAILED", "0:11")], "step 7.1 (osu_bw) FAILED 0:11"),
    ("COMPLETED", 0, [("7.1", "osu_bw", "RUNNING", "")], None),
    ("TIMEOUT", 0, [], "job 7 TIMEOUT with exit code 0"),
    ("OUT_OF_MEMORY", 0, [], "job 7 OUT_OF_MEMORY"),
    ("CANCELLED by 0", 0, [], "job 7 CANCELLED"),
    ("FAILED", 17, [("7.batch", "batch", "FAILED", "17:0")], "job 7 FAILED with exit code 17"),
])
def test_job_problem(state, code, steps, expected) -> None:
    problem = job_problem("7", state, code, steps)
    assert (problem is None) if expected is None else (expected in problem), problem
