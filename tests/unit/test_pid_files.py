"""A pid file names the daemon we started, not whoever the kernel gave its number since."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from perfguard.cluster.procs import pid_alive, read_pid, record_pid, start_ticks


def test_a_recorded_daemon_is_found_while_it_runs_and_not_after(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record_pid(pid_file, daemon.pid)
        assert read_pid(pid_file) == daemon.pid and pid_alive(read_pid(pid_file))
    finally:
        daemon.kill()
        daemon.wait()
    assert read_pid(pid_file) is None


def test_a_number_the_kernel_gave_to_another_process_is_not_the_daemon(tmp_path: Path) -> None:
    """The recycled case, made at will: the file's pid is a live process (this one), its
    start time another's. `cluster down` took such a pid for its slurmd and stopped it."""
    pid_file = tmp_path / "slurmd-node3.pid"
    started = int(start_ticks(os.getpid()))
    pid_file.write_text(f"{os.getpid()} {started + 1}\n")
    assert pid_alive(os.getpid()) and read_pid(pid_file) is None
    pid_file.write_text(f"{os.getpid()} {started}\n")
    assert read_pid(pid_file) == os.getpid()


def test_a_pid_file_from_before_start_times_is_taken_at_its_word(tmp_path: Path) -> None:
    pid_file = tmp_path / "old.pid"
    pid_file.write_text(f"{os.getpid()}\n")
    assert read_pid(pid_file) == os.getpid()
    pid_file.write_text("")
    assert read_pid(pid_file) is None
