"""Two-sided checks (server and client steps in one Slurm job) on the embedded cluster."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from perfguard.run.reframe import RunRequest
from perfguard.store.report import load
from reframe_tests.common.server_client import SERVE
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


LISTEN = ("import socket, time; time.sleep({delay}); "
          "s = socket.create_server(('0.0.0.0', {port})); time.sleep(30)")


@contextlib.contextmanager
def serving(pair, first_port: int, command: str) -> Iterator[subprocess.Popen]:
    """SERVE, as the server step runs it, on this host, its stderr in PAIR.err; stopped
    with what it started."""
    with open(f"{pair}.err", "w") as err:
        step = subprocess.Popen(["bash", "-c", SERVE, "pg-serve", str(pair),
                                 str(first_port), command], stderr=err,
                                start_new_session=True)
    try:
        yield step
    finally:
        os.killpg(step.pid, signal.SIGKILL)
        step.wait()


def within(seconds: float, ready) -> bool:
    """Whether ``ready()`` comes true within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def announced(pair, timeout: float = 30) -> str:
    """The port the step said, or "" if it said none within ``timeout``."""
    said = within(timeout, lambda: pair.exists() and pair.read_text().strip())
    return pair.read_text().strip() if said else ""


def listener_pid(port: int) -> int:
    shown = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True,
                           text=True).stdout
    return int(shown.split("pid=")[1].split(",")[0])


def test_the_server_step_takes_the_first_free_port_and_says_it_once_listening(
        tmp_path) -> None:
    """Past a port someone holds, to the next free one; the port is said only once the
    step's own server listens there."""
    with busy_port_before_a_free_one() as busy:
        port = busy.getsockname()[1]
        pair = tmp_path / "pair"
        python = f'{sys.executable} -c "{LISTEN.format(delay=1, port="$pg_port")}"'
        with serving(pair, port, python):
            time.sleep(0.5)
            assert not pair.exists()  # not yet listening: nothing said
            assert announced(pair) == str(port + 1)


def test_another_process_on_the_port_is_not_the_server_and_a_lost_bind_moves_on(
        tmp_path) -> None:
    """Another process binds the port the step took, before its server does (two
    clusters on one host both had a job 30 and took one port: the client measured
    against the other cluster's server): that listener is not the server, the server's
    failed bind ends it, and the step starts it again on the next free port."""
    with busy_port_before_a_free_one() as busy:
        port = busy.getsockname()[1] + 1
    pair, started = tmp_path / "pair", tmp_path / "started"
    python = f'{sys.executable} -c "{LISTEN.format(delay=3, port="$pg_port")}"'
    with serving(pair, port, f"touch {started}; {python}"):
        assert within(30, started.exists)  # the step took the port, then started it
        with socket.create_server(("0.0.0.0", port)):  # before the server's bind()
            said = announced(pair)
            assert said and int(said) > port
            assert listener_pid(int(said)) != listener_pid(port)
    assert f"before it listened on port {port}" in Path(f"{pair}.err").read_text()


def test_a_listener_the_server_started_is_the_servers(tmp_path) -> None:
    """A server command whose program starts the listener as its child (a container
    runtime, a site's wrapper script) is listening once that child listens."""
    with busy_port_before_a_free_one() as busy:
        port = busy.getsockname()[1] + 1
    pair = tmp_path / "pair"
    listener = tmp_path / "listen.py"
    listener.write_text(LISTEN.format(delay=0, port=port))
    wrapper = f"bash -c '{sys.executable} {listener}; true'"  # python: bash's child
    with serving(pair, port, wrapper):
        assert announced(pair) == str(port)


def test_a_listener_on_the_port_not_the_servers_is_named(tmp_path) -> None:
    """A server that does not listen while another process does on its port: the step
    names that listener, so the pair that then fails says why."""
    with busy_port_before_a_free_one() as busy:
        port = busy.getsockname()[1] + 1
    pair, started = tmp_path / "pair", tmp_path / "started"
    errors = Path(f"{pair}.err")
    with serving(pair, port, f"touch {started}; sleep 60"):  # a "server" that never binds
        assert within(30, started.exists)
        with socket.create_server(("0.0.0.0", port)):
            assert within(30, lambda: "a listener not this server's" in errors.read_text())
    assert not pair.exists()
    assert f"port {port}: a listener not this server's" in errors.read_text()
    assert "pid=" in errors.read_text()
