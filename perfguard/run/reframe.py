"""`perfguard run`: ReFrame with the project's site config, test library and one report per run."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from perfguard.cluster.layout import ClusterLayout
from perfguard.errors import PerfguardError, UsageError
from perfguard.site import paths

EMBEDDED_SYSTEM = "local"


@dataclass
class RunRequest:
    state: Path
    system: str = EMBEDDED_SYSTEM
    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    setvars: tuple[str, ...] = ()
    dry_run: bool = False
    extra: tuple[str, ...] = ()
    trigger: str = "manual"
    labels: tuple[str, ...] = ()
    #: The database the checks read their references from and the run is stored in.
    dsn: str | None = None


@dataclass
class RunOutcome:
    returncode: int
    report: Path


def reframe_launcher() -> list[str]:
    """The reframe next to our interpreter (the venv); else ReFrame's entry point through
    our interpreter (the package installed, ReFrame importable but its script elsewhere);
    else the one on PATH."""
    beside = Path(sys.executable).parent / "reframe"
    if beside.exists():
        return [str(beside)]
    if importlib.util.find_spec("reframe") is not None:
        return [sys.executable, "-c", "import sys; from reframe.frontend.cli import main; "
                                      "sys.argv[0] = 'reframe'; sys.exit(main())"]
    found = shutil.which("reframe")
    if not found:
        raise PerfguardError("reframe is not installed: `pip install reframe-hpc` "
                             "(the checkout's ./install.sh does)")
    return [found]


#: Runs' ReFrame stage and output directories are kept this long (the report's evidence).
KEEP_RUN_DIRS_DAYS = float(os.environ.get("PERFGUARD_KEEP_RUN_DIRS_DAYS", "30"))


def report_path(state: Path, system: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S%f")
    return state / "reports" / f"{stamp}-{system}.json"


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


def reframe_command(request: RunRequest, report: Path) -> list[str]:
    directory = run_directory(request.state, report)
    command = [
        *reframe_launcher(),
        "-C", str(paths.DEFAULTS_DIR / "settings.py"),
        "-c", str(paths.TESTS_DIR), "-R",
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
    command += list(request.extra)
    command.append("--dry-run" if request.dry_run else "-r")
    return command


def run_environment(request: RunRequest) -> dict[str, str]:
    """What reframe and its jobs need: the test library importable, our cluster's Slurm,
    the run's database (the one its references come from is the one it is stored in),
    and temporary files under the state directory (ReFrame's early log, rfm-*.log)."""
    env = dict(os.environ)
    env["PERFGUARD_STATE_DIR"] = str(request.state)
    if paths.CHECKOUT is not None:  # an installed package is importable as it is
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(paths.CHECKOUT), env.get("PYTHONPATH", "")) if p)
    env["TMPDIR"] = str(request.state / "tmp")
    if request.dsn:
        env["PERFGUARD_DSN"] = request.dsn
    if request.system == EMBEDDED_SYSTEM:
        layout = ClusterLayout.load(request.state)
        if layout is None and not request.dry_run:
            raise PerfguardError(
                f"system 'local' is the embedded cluster, but none is set up under "
                f"{request.state}: run `perfguard cluster up` first")
        if layout is not None:
            env["SLURM_CONF"] = layout.client_env()["SLURM_CONF"]
    return env


def run_reframe(request: RunRequest) -> RunOutcome:
    """Run reframe once; the request's DSN is resolved here, once, for the whole run."""
    from perfguard.store import db

    if request.dsn is not None or not request.dry_run:
        request.dsn = db.resolve_dsn(request.state, request.dsn)
    report = report_path(request.state, request.system)
    report.parent.mkdir(parents=True, exist_ok=True)
    command = reframe_command(request, report)
    workdir = request.state / "work"
    for directory in (workdir, request.state / "log", request.state / "tmp"):
        directory.mkdir(parents=True, exist_ok=True)
    prune_run_directories(request.state)
    process = subprocess.Popen(command, env=run_environment(request), cwd=workdir)
    returncode = _wait_passing_on_termination(process)
    if not report.exists() and returncode == 0 and not request.dry_run:
        raise UsageError(f"no check selected on system {request.system}"
                         + "".join(f" -n {n}" for n in request.names)
                         + "".join(f" -t {t}" for t in request.tags)
                         + ": nothing ran (`reframe -l` with the same filters lists them)")
    if not report.exists() and not request.dry_run:
        raise PerfguardError(f"reframe exited with {returncode} and wrote no report "
                             f"({report}); see {request.state / 'log' / 'reframe.log'}")
    return RunOutcome(returncode, report)


def _wait_passing_on_termination(process: subprocess.Popen) -> int:
    """Wait for reframe; a SIGTERM to us (scancel, kill, a CI timeout) is passed on, so
    reframe stops, writes the report of every test that finished, and we store it.
    Ctrl-C reaches reframe from the terminal itself; we only keep waiting."""
    if threading.current_thread() is not threading.main_thread():
        return process.wait()
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM,
                                              lambda *_: process.send_signal(signal.SIGTERM)),
                signal.SIGINT: signal.signal(signal.SIGINT, lambda *_: None)}
    try:
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


@dataclass
class Completed:
    """A run that went through reframe and, unless it could not be stored, ingest."""
    returncode: int
    report: Path
    run_id: int | None
    message: str = ""

    @property
    def stored(self) -> bool:
        return self.run_id is not None


def run_and_store(request: RunRequest, dsn: str | None, ingest: bool = True) -> Completed:
    """Run reframe, then store the report (spooled with the reason when it cannot be)."""
    from perfguard.store.ingest import RunMeta, ingest_paths

    request.dsn = dsn or request.dsn
    outcome = run_reframe(request)
    if request.dry_run or not ingest:
        return Completed(outcome.returncode, outcome.report, None, "not ingested")
    RunMeta(request.trigger, request.labels, library_revision()).save_beside(outcome.report)
    [result] = ingest_paths(request.state, request.dsn, [outcome.report], RunMeta())
    return Completed(outcome.returncode, outcome.report, result.run_id, result.message)


def run_and_ingest(request: RunRequest, dsn: str | None, ingest: bool) -> int:
    """`perfguard run`: run, ingest, print the verdict; exit code reframe's or the verdict's."""
    from perfguard.judge import verdict as vd
    from perfguard.store import db

    done = run_and_store(request, dsn, ingest)
    if request.dry_run or not ingest:
        print(f"report: {done.report}")
        return done.returncode
    if not done.stored:
        print(f"perfguard: error: {done.message}", file=sys.stderr)
        print(f"report kept: {done.report}; retry with `perfguard ingest --spool`",
              file=sys.stderr)
        return done.returncode or 1
    with db.connect(request.dsn) as conn:
        lines = vd.judge_and_record(conn, done.run_id)
        result = vd.outcome(conn, done.run_id)
    print(f"\nperfguard verdict for run {done.run_id} (report {done.report}):")
    print(vd.render(lines))
    # The stored verdict decides (run_outcome): skips and expected failures do not fail it.
    return 1 if result.failed else 0
