"""`perfguard run`: ReFrame with the project's site config, test library and one report per run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from perfguard import paths
from perfguard.cluster.layout import ClusterLayout
from perfguard.errors import PerfguardError

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


@dataclass
class RunOutcome:
    returncode: int
    report: Path


def reframe_executable() -> str:
    """The reframe next to our interpreter (the venv), else the one on PATH."""
    beside = Path(sys.executable).parent / "reframe"
    if beside.exists():
        return str(beside)
    found = shutil.which("reframe")
    if not found:
        raise PerfguardError("reframe is not installed: run `./install.sh`")
    return found


def report_path(state: Path, system: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S%f")
    return state / "reports" / f"{stamp}-{system}.json"


def reframe_command(request: RunRequest, report: Path) -> list[str]:
    command = [
        reframe_executable(),
        "-C", str(paths.SITE_CONFIG_DIR / "settings.py"),
        "-c", str(paths.TESTS_DIR), "-R",
        "--system", request.system,
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
    """What reframe and its jobs need: the test library importable, our cluster's Slurm."""
    env = dict(os.environ)
    env["PERFGUARD_STATE_DIR"] = str(request.state)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(paths.REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    if request.system == EMBEDDED_SYSTEM:
        layout = ClusterLayout.load(request.state)
        if layout is None and not request.dry_run:
            raise PerfguardError(
                f"system 'local' is the embedded cluster, but none is set up under "
                f"{request.state}: run `perfguard cluster up` first")
        if layout is not None:
            env.update({k: v for k, v in layout.client_env().items()
                        if k in ("SLURM_CONF", "PERFGUARD_DSN")})
    return env


def run_reframe(request: RunRequest) -> RunOutcome:
    report = report_path(request.state, request.system)
    report.parent.mkdir(parents=True, exist_ok=True)
    command = reframe_command(request, report)
    workdir = request.state / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    (request.state / "log").mkdir(exist_ok=True)  # ReFrame's log file (site config)
    process = subprocess.Popen(command, env=run_environment(request), cwd=workdir)
    returncode = _wait_passing_on_termination(process)
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
    """The test library's git revision, marked dirty when the checkout has local changes."""
    try:
        rev = subprocess.run(["git", "-C", str(paths.REPO_ROOT), "describe", "--always",
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
    from perfguard import db
    from perfguard.ingest import RunMeta, ingest_paths

    outcome = run_reframe(request)
    if request.dry_run or not ingest:
        return Completed(outcome.returncode, outcome.report, None, "not ingested")
    RunMeta(request.trigger, request.labels, library_revision()).save_beside(outcome.report)
    [result] = ingest_paths(request.state, db.resolve_dsn(request.state, dsn),
                            [outcome.report], RunMeta())
    return Completed(outcome.returncode, outcome.report, result.run_id, result.message)


def run_and_ingest(request: RunRequest, dsn: str | None, ingest: bool) -> int:
    """`perfguard run`: run, ingest, print the verdict; exit code reframe's or the verdict's."""
    from perfguard import db
    from perfguard import verdict as vd

    done = run_and_store(request, dsn, ingest)
    if request.dry_run or not ingest:
        print(f"report: {done.report}")
        return done.returncode
    if not done.stored:
        print(f"perfguard: error: {done.message}", file=sys.stderr)
        print(f"report kept: {done.report}; retry with `perfguard ingest --spool`",
              file=sys.stderr)
        return done.returncode or 1
    with db.connect(db.resolve_dsn(request.state, dsn)) as conn:
        lines = vd.judge_and_record(conn, done.run_id)
    print(f"\nperfguard verdict for run {done.run_id} (report {done.report}):")
    print(vd.render(lines))
    # The verdict decides: skipped and expected-failure test cases do not fail a run.
    return 1 if vd.failed(lines) or (done.returncode != 0 and not lines) else 0
