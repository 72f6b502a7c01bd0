"""ReFrame invoked with the site's configuration, the check library, the run's references
and one report per run, in the command's context (perfguard.site.context)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from perfguard import paths
from perfguard.contract.references import REFERENCES_ENV
from perfguard.contract.topology import find_system
from perfguard.errors import PerfguardError, UsageError
from perfguard.site.context import Context

#: The system a run names when it names none: the embedded cluster's.
DEFAULT_SYSTEM = "local"


@dataclass
class RunRequest:
    system: str = DEFAULT_SYSTEM
    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    setvars: tuple[str, ...] = ()
    dry_run: bool = False
    extra: tuple[str, ...] = ()
    trigger: str = "manual"
    labels: tuple[str, ...] = ()
    #: Directories of a site's own checks, searched beside the shipped library (the site
    #: directory's ``checks/`` always is: `check_directories`).
    checks: tuple[str, ...] = ()
    #: Where reframe's own output goes (None: this process's stdout and stderr).
    output: Path | None = None
    #: A file whose appearance stops reframe as a stall does (what finished is stored):
    #: `perfguard nightly --cancel-recurring --now` writes the nightly's.
    stop_file: Path | None = None
    #: sbatch options for every job of the run (``--reservation=R``, ``--qos=Q``,
    #: ``--account=A``): ReFrame's ``-J``, written after the partition's ``access`` into
    #: each job script, so they win over a site default there.
    job_options: tuple[str, ...] = ()

    @property
    def listing(self) -> bool:
        """ReFrame is asked to list (``-- --list``), not to run: nothing is run or stored."""
        return any(a.split("=")[0] in LISTING_OPTIONS for a in self.extra)


#: ReFrame's options that list checks instead of running them (they exclude ``-r``).
LISTING_OPTIONS = frozenset({"-l", "--list", "-L", "--list-detailed", "--list-tags",
                             "--describe", "--show-config", "--detect-host-topology",
                             "--list-stored-sessions", "--list-stored-testcases"})


class NothingSelected(UsageError):
    """ReFrame selected no test case: the filters match none, or (``--distribute``) none
    of the nodes can take a job."""


@dataclass
class RunOutcome:
    returncode: int
    report: Path
    #: Why perfguard stopped reframe (it made no progress, a signal), or None.
    stalled: str | None = None


def reframe_launcher() -> list[str]:
    """ReFrame's command line through our interpreter (``perfguard.run.reframe_cli``: the
    same ``reframe``, loading checks without the cost of its ignored deprecation
    warnings); else the ``reframe`` on PATH (ReFrame not importable here)."""
    if importlib.util.find_spec("reframe") is not None:
        return [sys.executable, "-m", "perfguard.run.reframe_cli"]
    found = shutil.which("reframe")
    if not found:
        raise PerfguardError("reframe is not installed: `pip install reframe-hpc` "
                             "(the checkout's ./install.sh does)")
    return [found]


#: A run whose reframe writes nothing under its run directory while none of its jobs is in
#: Slurm's queue for this long is stopped (what finished is stored): docs/operations.md.
STALL_MINUTES_ENV = "PERFGUARD_STALL_MINUTES"
DEFAULT_STALL_MINUTES = 30.0

#: Seconds between looks for a run's stop file (RunRequest.stop_file).
STOP_POLL_S = 3.0

#: Runs' ReFrame stage and output directories are kept this long (the report's evidence).
KEEP_RUN_DIRS_DAYS = float(os.environ.get("PERFGUARD_KEEP_RUN_DIRS_DAYS", "30"))


def report_path(state: Path, system: str) -> Path:
    """A new report's path; ``system`` may name a partition (``sys:part``)."""
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S%f")
    return state / "reports" / f"{stamp}-{system.replace(':', '-')}.json"


def run_directory(state: Path, report: Path) -> Path:
    """This run's own ReFrame stage and output directories (two runs at once never share
    a stage directory), on the state's shared storage where every node sees them."""
    return state / "shared" / "runs" / report.stem


def prune_run_directories(state: Path, keep_days: float = KEEP_RUN_DIRS_DAYS) -> list[Path]:
    """Remove runs' stage and output directories older than ``keep_days``."""
    root = state / "shared" / "runs"
    cutoff = time.time() - keep_days * 86400
    old = [d for d in root.iterdir() if d.is_dir() and d.stat().st_mtime < cutoff] \
        if root.is_dir() else []
    for directory in old:
        shutil.rmtree(directory, ignore_errors=True)
    return old


def check_directories(request: RunRequest, site: Path | None) -> list[Path]:
    """Where ReFrame looks for checks: the shipped library, the site directory's
    ``checks/`` (a site's STREAM, HPL or application benchmarks, on the same base), then
    what ``--checks`` names."""
    found = [paths.TESTS_DIR]
    if site is not None and (site / "checks").is_dir():
        found.append(site / "checks")
    for given in request.checks:
        directory = Path(given).expanduser().resolve()
        if not directory.is_dir():
            raise UsageError(f"--checks {given}: no such directory (a directory of ReFrame "
                             f"check files; docs/writing-checks.md)")
        found.append(directory)
    return found


def reframe_command(request: RunRequest, report: Path, directory: Path,
                    checks: list[Path] | None = None) -> list[str]:
    searched = []
    for folder in checks or [paths.TESTS_DIR]:
        searched += ["-c", str(folder)]
    command = [
        *reframe_launcher(),
        "-C", str(paths.DEFAULTS_DIR / "settings.py"),
        *searched, "-R",
        "--system", request.system,
        "--stage", str(directory / "stage"), "--output", str(directory / "output"),
        "--report-file", str(report),
        # ReFrame's own JUnit beside the JSON report: CI systems show test results from it
        "--report-junit", str(report.with_suffix(".xml")),
    ]
    for name in request.names:
        command += ["-n", name]
    for tag in request.tags:
        command += ["-t", tag]
    for setvar in request.setvars:
        command += ["-S", setvar]
    for option in request.job_options:  # ReFrame's -J NAME=VALUE: #SBATCH --NAME=VALUE
        command += ["-J", option.removeprefix("--")]
    command += list(request.extra)
    if not request.listing:
        command.append("--dry-run" if request.dry_run else "-r")
    return command


def with_system_variables(ctx: Context, request: RunRequest) -> RunRequest:
    """The request with its system's ``check_variables`` (the topology file's: what a
    night costs there) before its own ``-S``, so that a command's ``-S`` still wins."""
    system = find_system(paths.topology_files(ctx.state), request.system)
    if system is None or not system.check_variables:
        return request
    return replace(request, setvars=(*system.setvars, *request.setvars))


def colour_wanted(stream_is_terminal: bool, environ: dict[str, str]) -> bool:
    """ReFrame's colours only for a person at a terminal: never into a file, a pipe, a
    log or mail, nor where ``NO_COLOR`` is set (no-color.org)."""
    return stream_is_terminal and not environ.get("NO_COLOR")


def run_environment(ctx: Context, references: Path | None) -> dict[str, str]:
    """What reframe and its jobs need: the test library importable, the context's Slurm,
    the run's references, and temporary files under the state directory (ReFrame's early
    log, rfm-*.log)."""
    env = dict(ctx.slurm_env() or os.environ)
    env["PERFGUARD_STATE_DIR"] = str(ctx.state)
    if paths.CHECKOUT is not None:  # an installed package is importable as it is
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(paths.CHECKOUT), env.get("PYTHONPATH", "")) if p)
    env["TMPDIR"] = str(ctx.state / "tmp")
    env.pop(REFERENCES_ENV, None)
    if references is not None:
        env[REFERENCES_ENV] = str(references)
    if not colour_wanted(sys.stdout.isatty(), env):
        env["RFM_COLORIZE"] = "n"
    return env


def run_reframe(ctx: Context, request: RunRequest,
                references: Callable[[Path], Path] | None = None) -> RunOutcome:
    """Run reframe once, in its own stage and output directories. ``references`` writes
    the run's references file into the run directory (the checks read it, named in
    $PERFGUARD_REFERENCES); without it the checks run without references."""
    report = report_path(ctx.state, request.system)
    report.parent.mkdir(parents=True, exist_ok=True)
    directory = run_directory(ctx.state, report)
    request = with_system_variables(ctx, request)
    command = reframe_command(request, report, directory, check_directories(request, ctx.site))
    workdir = ctx.state / "work"
    for needed in (workdir, ctx.state / "log", ctx.state / "tmp"):
        needed.mkdir(parents=True, exist_ok=True)
    prune_run_directories(ctx.state)
    written = None if request.dry_run or references is None else references(directory)
    env = run_environment(ctx, written)
    if request.output is not None:
        env["RFM_COLORIZE"] = "n"
        request.output.parent.mkdir(parents=True, exist_ok=True)
    with open(request.output, "w") if request.output else _inherited() as out:
        # SIGINT ignored in reframe: a Ctrl-C reaches it as one SIGTERM from us (below),
        # never twice (the terminal's to the process group and ours), which could cut its
        # report
        process = subprocess.Popen(
            command, env=env, cwd=workdir, stdout=out,
            stderr=subprocess.STDOUT if out else None,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        watchdog = StallWatchdog(directory, env, stall_minutes(), request.stop_file)
        interruption = Interruption(process)
        returncode = _wait_passing_on_termination(process, watchdog, interruption)
    if request.listing:
        return RunOutcome(returncode, report)
    if watchdog.stall and report.exists():
        failed_by_stall(report, watchdog.stopped)
    if not report.exists() and returncode == 0 and not request.dry_run:
        raise NothingSelected(f"no check selected on system {request.system}"
                         + "".join(f" -n {n}" for n in request.names)
                         + "".join(f" -t {t}" for t in request.tags)
                         + ": nothing ran (`reframe -l` with the same filters lists them)")
    if not report.exists() and not request.dry_run:
        raise PerfguardError(f"reframe exited with {returncode} and wrote no report "
                             f"({report}); see {ctx.state / 'log' / 'reframe.log'}"
                             + (f"; {watchdog.stopped}" if watchdog.stopped else ""))
    return RunOutcome(returncode, report, watchdog.stopped or interruption.said())


@contextmanager
def _inherited() -> Iterator[None]:
    """reframe writes where perfguard writes."""
    yield None


def stall_minutes() -> float:
    """``$PERFGUARD_STALL_MINUTES`` (default 30): how long a run may make no progress."""
    text = os.environ.get(STALL_MINUTES_ENV, str(DEFAULT_STALL_MINUTES))
    try:
        minutes = float(text)
    except ValueError:
        minutes = -1.0
    if not minutes > 0:
        raise UsageError(f"{STALL_MINUTES_ENV}={text!r}: expected a positive number of "
                         f"minutes")
    return minutes


class StallWatchdog:
    """Ends a reframe that makes no progress, so a scheduled nightly cannot run forever.

    Progress is a file written under the run's stage and output directories (job output,
    a build or a Spack install writing its log, a new test's stage) or one of the run's
    jobs in Slurm's queue (a job pending behind the site's other jobs is no stall). With
    neither for ``minutes``, reframe is sent SIGTERM: it ends its tests, writes the report
    of those that finished, and perfguard stores it.
    """

    def __init__(self, directory: Path, env: dict[str, str], minutes: float,
                 stop_file: Path | None = None) -> None:
        self.directory, self.env, self.limit_s = directory, env, minutes * 60
        self.stall_poll_s = min(30.0, max(1.0, self.limit_s / 4))
        #: A stop request is looked for more often than a stall (a file's existence).
        self.poll_s = min(self.stall_poll_s, STOP_POLL_S) if stop_file else self.stall_poll_s
        self.stop_file = stop_file
        self.last_progress = self.last_check = time.monotonic()
        self.newest = 0.0
        self.stopped: str | None = None
        #: Stopped because reframe made no progress (not on request).
        self.stall = False

    def should_stop(self) -> bool:
        """A stop was asked for (the stop file is there) and reframe runs its tests, or
        reframe stalled."""
        if self.stop_file is not None and self.stop_file.exists() and self._testing():
            asked = self.stop_file.read_text().strip() or "a stop request"
            self.stopped = (f"stopped on request ({asked}): perfguard stopped reframe and "
                            f"stored the tests that finished")
            print(f"perfguard: {self.stopped}", file=sys.stderr, flush=True)
            return True
        if self.stop_file is not None:  # polled more often than a stall is looked for
            if time.monotonic() - self.last_check < self.stall_poll_s:
                return False
            self.last_check = time.monotonic()
        return self.stalled()

    def _testing(self) -> bool:
        """Whether reframe staged a test (stage/SYSTEM/PARTITION/ENVIRON/TEST): it then
        handles SIGTERM (cancels its jobs, writes the report). While it still loads the
        checks, SIGTERM would kill it with no report: a stop request waits."""
        return any(True for _ in (self.directory / "stage").glob("*/*/*/*"))

    def _newest_write(self) -> float:
        newest = 0.0
        for root, dirs, files in os.walk(self.directory):
            for name in (*dirs, *files):
                try:
                    newest = max(newest, os.stat(os.path.join(root, name)).st_mtime)
                except OSError:
                    continue
        return newest

    def _jobs_queued(self) -> bool:
        """Any job whose working directory is under this run's directory, in the queue."""
        try:
            queue = subprocess.run(["squeue", "-h", "--me", "-o", "%Z"], env=self.env,
                                   capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return True  # Slurm cannot say: not a stall of ours
        if queue.returncode != 0:
            return True
        return any(line.strip().startswith(str(self.directory))
                   for line in queue.stdout.splitlines())

    def stalled(self) -> bool:
        """Whether reframe has made no progress for the limit (checked every poll)."""
        newest = self._newest_write()
        # Until reframe has staged a test it is loading the checks (minutes on a loaded
        # host, writing nothing), and SIGTERM would kill it with no report: no stall yet.
        if newest > self.newest or not self._testing() or self._jobs_queued():
            self.newest = max(newest, self.newest)
            self.last_progress = time.monotonic()
            return False
        idle = time.monotonic() - self.last_progress
        if idle < self.limit_s:
            return False
        self.stopped = (f"reframe made no progress for {idle / 60:.1f} min (nothing written "
                        f"under {self.directory}, none of its jobs in Slurm's queue): "
                        f"perfguard stopped it and stored the tests that finished; the "
                        f"limit is ${STALL_MINUTES_ENV} ({self.limit_s / 60:g} min)")
        print(f"perfguard: {self.stopped}", file=sys.stderr, flush=True)
        self.stall = True
        return True


def failed_by_stall(report: Path, why: str) -> None:
    """A test that hung until the watchdog stopped reframe failed: ReFrame reports it
    ``abort`` (as for a Ctrl-C, which pages nobody), so it is rewritten ``fail`` with the
    stall as its reason, and the run fails."""
    raw = json.loads(report.read_text())
    for run in raw.get("runs", []):
        for case in run.get("testcases", []):
            if case.get("result") == "abort":
                case.update(result="fail", fail_phase="run", fail_reason=why)
    report.write_text(json.dumps(raw))


class Interruption:
    """SIGINT or SIGTERM to perfguard during a run: passed on to reframe as one SIGTERM
    (ReFrame then aborts the tests still running, ignores further signals and writes the
    report of every test, the aborted ones ``abort``); the first signal is remembered."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.received: str | None = None

    def __call__(self, signum: int, _frame: object = None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum).name
            print(f"perfguard: {self.received}: stopping reframe; the tests that finished "
                  f"are stored, the others are aborted", file=sys.stderr, flush=True)
            self.process.send_signal(signal.SIGTERM)

    def said(self) -> str | None:
        """What the verdict says first about a run stopped by a signal."""
        if self.received is None:
            return None
        return (f"interrupted by {self.received}: perfguard stopped reframe; the test cases "
                f"that finished are stored and judged, the others are aborted (neither "
                f"passed nor failed)")


def _wait_passing_on_termination(process: subprocess.Popen,
                                 watchdog: StallWatchdog | None = None,
                                 interruption: Interruption | None = None) -> int:
    """Wait for reframe; a SIGTERM or SIGINT to us (scancel, kill, a CI timeout, Ctrl-C)
    is passed on as one SIGTERM (``Interruption``), so reframe stops, writes the report of
    every test, and we store it. A reframe the watchdog finds stalled is sent SIGTERM the
    same way (SIGKILL a minute later)."""
    on_main = threading.current_thread() is threading.main_thread()
    interruption = interruption or Interruption(process)
    previous = {signum: signal.signal(signum, interruption)
                for signum in (signal.SIGTERM, signal.SIGINT)} if on_main else {}
    try:
        while watchdog is not None:
            try:
                return process.wait(timeout=watchdog.poll_s)
            except subprocess.TimeoutExpired:
                if watchdog.should_stop():
                    process.send_signal(signal.SIGTERM)
                    break
        try:
            return process.wait(timeout=60 if watchdog is not None else None)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def library_revision() -> str | None:
    """The test library's git revision, marked dirty when the checkout has local changes;
    an installed package: its version."""
    if paths.CHECKOUT is None:
        from importlib.metadata import version
        return f"perfguard {version('perfguard')}"
    try:
        rev = subprocess.run(["git", "-C", str(paths.CHECKOUT), "describe", "--always",
                              "--dirty"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return rev.stdout.strip() or None
