"""The nightly acceptance run: one at a time per state directory, its HTML report, and
the notifications (webhook, mail)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from perfguard import states
from perfguard.errors import AlreadyRunning, PerfguardError
from perfguard.judge import verdict as vd
from perfguard.run.reframe import RunRequest
from perfguard.site.context import Context
from perfguard.store import db
from perfguard.workflows.pipeline import RunVerdict, run_pipeline


@contextmanager
def nightly_lock(state: Path, system: str) -> Iterator[None]:
    """One nightly per state directory at a time; a second is refused, naming the first.
    Manual runs, upgrade checks and sweeps take no lock: each has its own directories."""
    path = state / "nightly.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "a process that has not written its name yet"
            raise AlreadyRunning(f"another nightly is running ({holder}; lock {path}): "
                                 f"this one did not start") from None
        lock.truncate(0)
        lock.write(f"pid {os.getpid()} on {os.uname().nodename}, system {system}, since "
                   f"{datetime.now():%Y-%m-%d %H:%M:%S}")
        lock.flush()
        try:
            yield
        finally:
            lock.truncate(0)


def stop_file(state: Path) -> Path:
    """Written by `perfguard nightly --cancel-recurring --now`: the nightly running in
    this state directory stops its checks, stores and reports what finished."""
    return state / "nightly.stop"


def nightly(ctx: Context, tags: tuple[str, ...], system: str,
            labels: tuple[str, ...] = (), job_options: tuple[str, ...] = ()) -> RunVerdict:
    with nightly_lock(ctx.state, system):
        stop_file(ctx.state).unlink(missing_ok=True)  # asked of an earlier night
        outcome = run_pipeline(ctx, RunRequest(system=system, tags=tags, trigger="nightly",
                                               labels=labels, job_options=job_options,
                                               stop_file=stop_file(ctx.state)))
    outcome.text = f"perfguard nightly on {system}: run {outcome.completed.run_id}\n" \
                   f"{outcome.text}"
    return with_report(ctx, outcome)


def with_report(ctx: Context, outcome: RunVerdict, baseline: str | None = None
                 ) -> RunVerdict:
    """Write the run's HTML report and name it in the text (mail, webhook). A report that
    cannot be written is said so; the verdict stands without it."""
    from perfguard.present import htmlreport

    if not outcome.completed.stored:
        return outcome
    try:
        with db.connect(ctx.dsn) as conn:
            before = vd.resolve_run(conn, baseline) if baseline else None
        outcome.html = htmlreport.write_for_run(ctx.state, ctx.dsn, outcome.completed.run_id,
                                                before)
        outcome.text += f"\n\nHTML report: {outcome.html}"
    except (PerfguardError, OSError, ValueError) as exc:
        outcome.text += f"\n\nHTML report not written: {exc}"
    return outcome


def summary(outcome: RunVerdict, system: str) -> dict:
    """The webhook's JSON payload."""
    counts = vd.counts(outcome.lines)
    failures = [{"check": line.check, "params": line.params, "partition": line.partition,
                 "metric": line.metric, "value": line.value, "reference": line.reference,
                 "status": line.status, "detail": line.detail}
                for line in outcome.lines if line.status in states.FAILING]
    return {"system": system, "run_id": outcome.completed.run_id,
            "status": outcome.status.lower(), "counts": counts,
            "failures": failures, "report": str(outcome.completed.report),
            "html_report": str(outcome.html) if outcome.html else None}


def notify_webhook(url: str, payload: dict) -> None:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise PerfguardError(f"webhook {url} failed: {exc}") from exc


def notify_mail(command: str, subject_status: str, text: str) -> None:
    result = subprocess.run(command, shell=True, input=f"{subject_status}\n\n{text}\n",
                            text=True, capture_output=True, timeout=60)
    if result.returncode != 0:
        raise PerfguardError(f"mail command `{command}` failed ({result.returncode}): "
                             f"{result.stderr.strip()}")
