"""Two-sided checks (server and client steps in one Slurm job) on the embedded cluster."""

from __future__ import annotations

import socket

from perfguard.report import load
from perfguard.run import RunRequest, run_reframe
from tests.conftest import TEST_STATE, job_file


def test_busy_port_is_skipped_not_waited_for(layout) -> None:
    """The probe moves past a port someone else holds, and the server and client are
    started on the port it moved to (expanded when run, not when the line was written)."""
    with socket.create_server(("0.0.0.0", 0)) as busy:
        port = busy.getsockname()[1]
        outcome = run_reframe(RunRequest(
            state=TEST_STATE, names=("^UcxPerftestCheck.*%test=tag_lat%memory=host",),
            setvars=("iterations=1000", f"first_port={port}",
                     "message_sizes=8")))
    [case] = [c for c in load(outcome.report).testcases if c.check == "UcxPerftestCheck"]
    assert case.result == "pass", case.fail_reason
    stdout = job_file(outcome.report, "UcxPerftestCheck", "rfm_job.out")
    assert f"port={port + 1}" in stdout and f"port={port} " not in stdout

