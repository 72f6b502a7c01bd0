"""Two-sided checks (server and client steps in one Slurm job) on the embedded cluster."""

from __future__ import annotations

import socket

from perfguard.run.reframe import RunRequest
from perfguard.store.report import load
from tests.conftest import job_file, run_checks


def busy_port_before_a_free_one() -> socket.socket:
    """A listening socket on a port whose successor is free right now: the test asserts
    the probe lands on port + 1, so that port must not be someone else's (an ephemeral
    port chosen at random may have a listening neighbour)."""
    while True:
        busy = socket.create_server(("0.0.0.0", 0))
        try:
            socket.create_server(("0.0.0.0", busy.getsockname()[1] + 1)).close()
            return busy
        except OSError:
            busy.close()


def test_busy_port_is_skipped_not_waited_for(layout) -> None:
    """The probe moves past a port someone else holds, and the server and client are
    started on the port it moved to (expanded when run, not when the line was written)."""
    with busy_port_before_a_free_one() as busy:
        port = busy.getsockname()[1]
        outcome = run_checks(RunRequest(
            names=("^UcxPerftestCheck.*%test=tag_lat%memory=host",),
            setvars=("iterations=1000", f"first_port={port}",
                     "message_sizes=8")))
    [case] = [c for c in load(outcome.report).testcases if c.check == "UcxPerftestCheck"]
    assert case.result == "pass", case.fail_reason
    stdout = job_file(outcome.report, "UcxPerftestCheck", "rfm_job.out")
    assert f"port={port + 1}" in stdout and f"port={port} " not in stdout

