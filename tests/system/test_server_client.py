"""Two-sided checks (server and client steps in one Slurm job) on the embedded cluster."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from perfguard.run.reframe import RunRequest
from perfguard.store.report import load
from reframe_tests.common.server_client import LISTENING, SERVE
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


LISTEN = "import socket, time; s = socket.create_server(('0.0.0.0', {port})); time.sleep(30)"


def test_the_server_step_takes_the_first_free_port_and_names_its_own_pid(tmp_path) -> None:
    """SERVE, as the server step runs it: past a port someone holds, to the next free
    one; it writes its own pid with that port, and the server runs in that process (the
    pid the client's wait looks for)."""
    with busy_port_before_a_free_one() as busy:
        port = busy.getsockname()[1]
        pair = tmp_path / "pair"
        server = subprocess.Popen(
            ["bash", "-c", SERVE, "pg-serve", str(pair), str(port),
             f'{sys.executable} -c "{LISTEN.format(port="$pg_port")}"'])
        try:
            deadline = time.monotonic() + 10
            while not pair.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert pair.read_text().split() == [str(server.pid), str(port + 1)]
        finally:
            server.kill()
            server.wait()


def test_the_client_waits_for_its_own_server_not_any_listener(tmp_path) -> None:
    """LISTENING, as the wait step runs it: another process listening on the port the
    pair file names is not the server (two clusters on one host both had a job 30 and
    took one port: the client measured against the other cluster's server); once the
    named pid listens there, the wait ends and prints the port."""
    with socket.create_server(("0.0.0.0", 0)) as foreign:
        port = foreign.getsockname()[1]
        pair = tmp_path / "pair"
        own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        pair.write_text(f"{own.pid} {port}\n")
        wait = subprocess.Popen(["bash", "-c", LISTENING, "pg-wait", str(pair)],
                                stdout=subprocess.PIPE, text=True)
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                wait.wait(timeout=2)  # a foreign listener on the port: still waiting
        finally:
            own.kill()
            own.wait()
    server = subprocess.Popen([sys.executable, "-c", LISTEN.format(port=port)])
    try:
        pair.write_text(f"{server.pid} {port}\n")
        out, _ = wait.communicate(timeout=20)
        assert out.strip() == str(port)
    finally:
        wait.kill()
        server.kill()
        server.wait()


def test_a_listener_the_server_started_is_the_servers(tmp_path) -> None:
    """A server step whose program starts the listener as its child (a container
    runtime, a site's wrapper script) is listening once that child listens."""
    with busy_port_before_a_free_one() as busy:
        port = busy.getsockname()[1] + 1
    pair = tmp_path / "pair"
    wrapper = subprocess.Popen(  # bash runs the listener as its child, not in its place
        ["bash", "-c", f'{sys.executable} -c "{LISTEN.format(port=port)}"; true'])
    try:
        pair.write_text(f"{wrapper.pid} {port}\n")
        waited = subprocess.run(["bash", "-c", LISTENING, "pg-wait", str(pair)],
                                capture_output=True, text=True, timeout=20)
        assert waited.stdout.strip() == str(port)
    finally:
        subprocess.run(["pkill", "-P", str(wrapper.pid)])
        wrapper.kill()
        wrapper.wait()
