"""Starting, finding and stopping the daemons of the embedded cluster, by pid."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from perfguard.errors import PerfguardError

# The Debian package that provides each binary the embedded cluster runs.
REQUIRED_BINARIES = {
    "munged": "munge",
    "mariadbd": "mariadb-server",
    "mariadb-install-db": "mariadb-server",
    "slurmdbd": "slurmdbd",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sinfo": "slurm-client",
    "sacct": "slurm-client",
    "sbatch": "slurm-client",
    "srun": "slurm-client",
    "sacctmgr": "slurm-client",
    "scontrol": "slurm-client",
    "mariadb": "mariadb-client",
    "psql": "postgresql-client",
    "mpicc": "libopenmpi-dev",
    "unshare": "util-linux",
    "runuser": "util-linux",
}
#: The Slurm programs of those: taken from a Slurm built from source when the cluster is
#: given its prefix (never a mix of its daemons and the distribution's clients).
SLURM_PACKAGES = frozenset({"slurmdbd", "slurmctld", "slurmd", "slurm-client"})
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
SETUP_COMMAND = "./install.sh"


def require_root() -> None:
    if os.geteuid() != 0:
        raise PerfguardError(
            "the embedded cluster needs root: it creates UTS/mount namespaces for "
            "the virtual nodes and runs slurmd as root. "
            "Run it as root (e.g. `sudo .venv/bin/perfguard cluster up`)."
        )


def require_binaries(slurm_dirs: Sequence[Path] = ()) -> None:
    """Every program the cluster runs is there: Slurm's in ``slurm_dirs`` when given (a
    Slurm built from source: its bin/ and sbin/), the rest on the PATH."""
    own = [exe for exe, pkg in REQUIRED_BINARIES.items() if pkg in SLURM_PACKAGES]
    if slurm_dirs:
        path = os.pathsep.join(map(str, slurm_dirs))
        absent = [exe for exe in own if not shutil.which(exe, path=path)]
        if absent:
            raise PerfguardError(
                f"--slurm-prefix {Path(slurm_dirs[0]).parent}: no {', '.join(absent)} in its "
                f"bin/ or sbin/; install the Slurm built there (`make install` after "
                f"`configure --prefix` that directory) or name another prefix")
    missing = sorted({pkg for exe, pkg in REQUIRED_BINARIES.items()
                      if not (slurm_dirs and exe in own) and not shutil.which(exe)})
    if not (POSTGRES_BIN / "postgres").exists():
        missing.append("postgresql")
    if missing:
        raise PerfguardError(
            f"Debian package(s) missing: {', '.join(missing)}. "
            f"Install them with the set-up command `{SETUP_COMMAND}`."
        )


#: Where Linux keeps the ports it hands out to outgoing connections.
EPHEMERAL_PORTS_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_ports(source: Path = EPHEMERAL_PORTS_FILE) -> range | None:
    """The kernel's ephemeral ports: any client connection (psql, srun, slurmd's own)
    may take one of them at any moment, so a daemon that is to listen there can find it
    taken. CI's fourth worker once put a cluster at 32800 and lost its ports that way.
    None where the kernel does not say (not Linux, no /proc)."""
    try:
        low, high = (int(word) for word in source.read_text().split())
    except (OSError, ValueError):
        return None
    return range(low, high + 1)


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces and
    parentheses): the state first, field 3; None once the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def _is_zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] == "Z"


def start_ticks(pid: int) -> str | None:
    """When the process started (clock ticks after boot, field 22 of /proc/PID/stat): with
    its pid, who it is. A pid alone names whoever the kernel gave that number last; pids
    wrap (pid_max 32768) many times in one test suite."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None else None


def record_pid(pid_file: Path, pid: int) -> None:
    """The pid file of a daemon we started: its pid and its start time."""
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(f"{pid} {start_ticks(pid) or '-'}\n")


def read_pid(pid_file: Path) -> int | None:
    """The recorded daemon's pid while that daemon runs; None once it ended, even when the
    kernel has given its number to another process since (stopping that one would kill
    another cluster's node). A pid file without a start time (written before perfguard
    recorded one) is taken at its word."""
    try:
        pid, *started = pid_file.read_text().split()
        pid = int(pid)
    except (OSError, ValueError):
        return None
    if started and start_ticks(pid) != started[0]:
        return None
    return pid


def spawn(argv: Sequence[str], log_file: Path, pid_file: Path,
          env: dict[str, str] | None = None) -> int:
    """Start a foreground daemon detached from our session and record its pid."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=env,
        )
    record_pid(pid_file, proc.pid)
    return proc.pid


def wait_until(condition: Callable[[], bool], timeout: float, what: str,
               log_file: Path | None = None, interval: float = 0.2,
               daemon: int | None = None) -> None:
    """Wait for ``condition``, at most ``timeout`` seconds; ``daemon``: the pid of the
    daemon that should bring it about: once it has exited, waiting on is pointless (a
    slurmdbd that cannot start its storage plugin exits at once, and was waited for a
    whole minute)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if daemon is not None and not pid_alive(daemon):
            raise PerfguardError(f"gave up waiting for {what}: the daemon (pid {daemon}) "
                                 f"exited{_log_hint(log_file)}")
        time.sleep(interval)
    raise PerfguardError(f"timed out after {timeout:.0f}s waiting for {what}"
                         f"{_log_hint(log_file)}")


def _log_hint(log_file: Path | None) -> str:
    """``; see LOG`` and its last lines, where there is a log."""
    hint = f"; see {log_file}" if log_file else ""
    if log_file and log_file.exists():
        lines = log_file.read_text(errors="replace").splitlines()[-5:]
        hint += "\n  " + "\n  ".join(lines) if lines else ""
    return hint


def terminate(pids: Sequence[int], timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL whatever is still alive after ``timeout``."""
    alive = [p for p in pids if pid_alive(p)]
    for pid in alive:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if pid_alive(p)]
    for pid in alive:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if pid_alive(p)]


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def namespace_id(pid: int, kind: str = "uts") -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def pids_in_namespace(ns_id: str, kind: str = "uts") -> list[int]:
    """Every process in a namespace: a virtual node's slurmd, slurmstepds and job tasks."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and namespace_id(int(entry.name), kind) == ns_id:
            found.append(int(entry.name))
    return found


def run(argv: Sequence[str], env: dict[str, str] | None = None, check: bool = True,
        timeout: float = 60, input: str | None = None) -> subprocess.CompletedProcess:
    """Run a helper command; a failure names the command and its output."""
    try:
        result = subprocess.run(list(argv), env=env, capture_output=True, text=True,
                                timeout=timeout, input=input)
    except subprocess.TimeoutExpired as exc:
        raise PerfguardError(f"`{' '.join(argv)}` did not finish within {timeout}s") from exc
    except FileNotFoundError as exc:
        raise PerfguardError(f"`{argv[0]}` is not installed: run `{SETUP_COMMAND}`") from exc
    if check and result.returncode != 0:
        output = (result.stderr or result.stdout).strip()
        raise PerfguardError(f"`{' '.join(argv)}` failed ({result.returncode}): {output}")
    return result
