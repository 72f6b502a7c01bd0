"""Two-sided checks (server and client steps in one Slurm job) on the embedded cluster."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

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



@contextlib.contextmanager
def port_held_by_a_connection() -> Iterator[int]:
    """A port no one listens on but an open connection holds as its local end (what any
    outgoing connection does with an ephemeral port), its successor free right now."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        while True:
            client = socket.socket()
            client.bind(("127.0.0.1", 0))
            port = client.getsockname()[1]
            try:
                socket.create_server(("0.0.0.0", port + 1)).close()
                break
            except OSError:
                client.close()
        with client:
            client.connect(listener.getsockname())
            accepted, _ = listener.accept()
            with accepted:
                yield port


def test_a_port_a_connection_holds_is_skipped(layout) -> None:
    """A port held by a connection, not a listener, is busy too: bind() refuses it. The
    probe read only listeners (`ss -l`), took such a port in a suite run, and the server
    failed: "UCX ERROR server failed. bind() failed: Address already in use"."""
    with port_held_by_a_connection() as port:
        outcome = run_checks(RunRequest(
            names=("^UcxPerftestCheck.*%test=tag_lat%memory=host",),
            setvars=("iterations=1000", f"first_port={port}", "message_sizes=8")))
    [case] = [c for c in load(outcome.report).testcases if c.check == "UcxPerftestCheck"]
    assert case.result == "pass", case.fail_reason
    stdout = job_file(outcome.report, "UcxPerftestCheck", "rfm_job.out")
    assert f"port={port + 1}" in stdout and f"port={port} " not in stdout
