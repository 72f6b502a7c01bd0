"""The admin workflows: the nightly acceptance run (locked, notified, scheduled) and the
after-upgrade comparison; the fabric sweep has its own (perfguard.sweep.workflow)."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from croniter import CroniterError, croniter

from perfguard.contract.topology import slurm_partition
from perfguard.errors import AlreadyRunning, PerfguardError, UsageError
from perfguard.judge import fingerprint as fp
from perfguard.judge import verdict as vd
from perfguard.run.pipeline import RunVerdict, run_pipeline
from perfguard.run.reframe import RunRequest
from perfguard.site import check, slurm
from perfguard.site.context import Context
from perfguard.store import db

SCRON_BEGIN = "# >>> perfguard nightly >>>"
SCRON_END = "# <<< perfguard nightly <<<"


# --- nightly ---------------------------------------------------------------------
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


def nightly(ctx: Context, tags: tuple[str, ...], system: str,
            labels: tuple[str, ...] = ()) -> RunVerdict:
    with nightly_lock(ctx.state, system):
        outcome = run_pipeline(ctx, RunRequest(system=system, tags=tags, trigger="nightly",
                                               labels=labels))
    outcome.text = f"perfguard nightly on {system}: run {outcome.completed.run_id}\n" \
                   f"{outcome.text}"
    return _with_report(ctx, outcome)


def _with_report(ctx: Context, outcome: RunVerdict, baseline: str | None = None
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
                for line in outcome.lines if line.status in vd.FAILING]
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


# --- scrontab ----------------------------------------------------------------------
def scrontab_entry(ctx: Context, schedule: str, arguments: list[str],
                   partition: str | None = None) -> str:
    """A scrontab block that runs `perfguard nightly` from the cluster itself."""
    state = ctx.state
    environment = ctx.scheduled_environment()
    exported = " ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items())
    command = " ".join([shlex.quote(str(Path(sys.executable).parent / "perfguard")),
                        "nightly", *map(shlex.quote, arguments)])
    lines = [SCRON_BEGIN, "#SCRON --job-name=perfguard-nightly",
             f"#SCRON --output={state / 'log' / 'nightly-%j.log'}"]
    if partition:
        lines.append(f"#SCRON --partition={partition}")
    lines += [f"{schedule} cd {shlex.quote(str(state))} && env {exported} {command}",
              SCRON_END]
    return "\n".join(lines) + "\n"


def _current_scrontab(env: dict) -> str:
    result = subprocess.run(["scrontab", "-l"], capture_output=True, text=True, env=env)
    return result.stdout if result.returncode == 0 else ""


def _without_our_block(text: str) -> str:
    kept, inside = [], False
    for line in text.splitlines():
        if line.strip() == SCRON_BEGIN:
            inside = True
        elif line.strip() == SCRON_END:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept).strip()


def install_scrontab(ctx: Context, entry: str | None) -> str:
    """Replace perfguard's block in the user's scrontab (None removes it)."""
    if shutil.which("scrontab") is None:
        raise PerfguardError(
            "scrontab is not installed (Debian's slurm-client 22.05 does not ship it): "
            "print the entry with --print-scrontab for a host that has it, or schedule "
            "from Slurm with `perfguard nightly --submit-recurring`")
    env = ctx.slurm_env()
    others = _without_our_block(_current_scrontab(env or {}))
    content = "\n".join(part for part in (others, (entry or "").strip()) if part) + "\n"
    target = ctx.state / "scrontab"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    result = subprocess.run(["scrontab", str(target)], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise PerfguardError(f"scrontab refused the entry: {result.stderr.strip()} (Slurm "
                             f"needs ScronParameters=enable in slurm.conf)")
    return content


# --- recurring batch job (Slurm-native, where scrontab is missing) --------------------
JOB_NAME = "perfguard-nightly"


def next_occurrence(schedule: str, after: datetime) -> datetime:
    """The first minute after ``after`` that the 5-field cron ``schedule`` matches, as cron
    reads it (croniter: a restricted day of month and day of week match either one)."""
    if len(schedule.split()) != 5:
        raise UsageError(f"schedule {schedule!r}: expected 5 cron fields "
                         f"(minute hour day month weekday)")
    try:
        return croniter(schedule, after).get_next(datetime)
    except (CroniterError, ValueError) as exc:
        raise UsageError(f"schedule {schedule!r} is not a cron schedule: {exc}") from None


def measured_partitions(ctx: Context, system: str) -> list[str]:
    """The Slurm partitions a nightly on ``system`` (``sys`` or ``sys:part``) measures
    (``slurm.DEFAULT``: the default partition), from the system's topology file."""
    found = check.find_system(ctx, system)
    return [slurm_partition(p.access) or slurm.DEFAULT
            for p in check.selected_partitions(found, system)]


def driver_partition(ctx: Context, system: str, asked: str | None) -> str:
    """Where the scheduled nightly's driver job runs: ``asked`` (else the embedded
    cluster's service partition), a partition Slurm has that shares no node with one the
    nightly measures. A driver on a measured node holds it while the checks that need
    every node (collectives, exclusive) wait for it until the time limit."""
    from perfguard.cluster.layout import SERVICE_PARTITION

    partition = asked or (SERVICE_PARTITION if ctx.embedded is not None else None)
    if partition is None:
        raise UsageError("--partition: name the partition the nightly's driver job runs in, "
                         "a service or login partition whose nodes the checks do not "
                         "measure (or schedule it from a login node with cron or a systemd "
                         "timer: docs/operations.md)")
    found = slurm.nodes(ctx)
    if partition not in found.partitions:
        raise UsageError(f"--partition {partition}: Slurm has no such partition (it has "
                         f"{', '.join(found.named())})")
    for measured in measured_partitions(ctx, system):
        shared = found.partitions[partition] & found.partitions.get(measured, set())
        if shared:
            raise UsageError(
                f"--partition {partition}: the nightly's driver job would hold "
                f"{fp.compact_nodes(shared)} of partition "
                f"{measured or 'default'}, which the nightly measures; its checks would wait "
                f"for those nodes until their time limit. Name a service or login partition "
                f"(or schedule from a login node with cron or a systemd timer)")
    return partition


def submit_recurring(ctx: Context, schedule: str, arguments: list[str],
                     at: str | None = None, partition: str | None = None) -> str:
    """Submit the nightly as a batch job that, once done, submits its next occurrence.

    One pending job at a time (earlier pending ones are cancelled); ``at`` overrides the
    first start (any sbatch --begin value, e.g. now+30). ``partition`` (driver_partition)
    is the driver's, every night: the next night's submission names it again.
    """
    state, env = ctx.state, ctx.slurm_env()
    begin = at or next_occurrence(schedule, datetime.now()).strftime("%Y-%m-%dT%H:%M:%S")
    perfguard = shlex.quote(str(Path(sys.executable).parent / "perfguard"))
    exported = ctx.scheduled_environment()
    prefix = "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in exported.items())
    again = [perfguard, "nightly", "--submit-recurring", "--schedule", shlex.quote(schedule),
             *(["--partition", shlex.quote(partition)] if partition else []),
             *map(shlex.quote, arguments)]
    script = (f"cd {shlex.quote(str(state))}; "
              f"{prefix} {perfguard} nightly {' '.join(map(shlex.quote, arguments))}; "
              f"{prefix} {' '.join(again)}")
    subprocess.run(["scancel", f"--name={JOB_NAME}", "--state=PENDING"], env=env,
                   capture_output=True)
    command = ["sbatch", "--parsable", f"--job-name={JOB_NAME}", f"--begin={begin}",
               f"--output={state / 'log' / 'nightly-%j.log'}",
               "--wrap", script]
    if partition:
        command.insert(2, f"--partition={partition}")
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise PerfguardError(f"sbatch refused the nightly job: {result.stderr.strip()}")
    return f"nightly job {result.stdout.strip()} will start at {begin}"


def cancel_recurring(ctx: Context) -> None:
    subprocess.run(["scancel", f"--name={JOB_NAME}"], capture_output=True,
                   env=ctx.slurm_env())


# --- after an upgrade -----------------------------------------------------------------
def excluded_nodes(ctx: Context, keep: str) -> tuple[set[str], str]:
    """The nodes ``keep`` names, and the partition's other nodes as a list for
    sbatch --exclude."""
    env = ctx.slurm_env()
    wanted = subprocess.run(["scontrol", "show", "hostnames", keep], capture_output=True,
                            text=True, env=env)
    every = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True,
                           env=env)
    if wanted.returncode != 0 or every.returncode != 0:
        raise PerfguardError(f"cannot resolve nodes {keep!r}: "
                             f"{(wanted.stderr or every.stderr).strip()}")
    keep_set = set(wanted.stdout.split())
    unknown = keep_set - set(every.stdout.split())
    if unknown:
        raise PerfguardError(f"--nodes names nodes Slurm does not know: {sorted(unknown)}")
    return keep_set, ",".join(sorted(set(every.stdout.split()) - keep_set, key=fp.natural_key))


def upgrade_check(ctx: Context, baseline: str, nodes: str | None,
                  tags: tuple[str, ...], system: str, accept: str | None = None) -> RunVerdict:
    with db.connect(ctx.dsn) as conn:
        vd.resolve_run(conn, baseline)  # a wrong baseline fails before anything runs
    extra: tuple[str, ...] = ()
    setvars: tuple[str, ...] = ()
    kept: set[str] | None = None
    if nodes:
        kept, others = excluded_nodes(ctx, nodes)
        extra = ("-J", f"exclude={others}") if others else ()
        # shapes that need more nodes than given are skipped before anything is submitted
        setvars = (f"nodes_available={len(kept)}",)
    outcome = run_pipeline(ctx, RunRequest(system=system, tags=tags, extra=extra,
                                           setvars=setvars, trigger="upgrade",
                                           labels=("post-upgrade",)), baseline, kept)
    outcome.text = (f"perfguard upgrade check on {system}"
                    + (f" (nodes {nodes})" if nodes else "")
                    + f": run {outcome.completed.run_id} against baseline {baseline}\n"
                    + outcome.text)
    if accept and outcome.completed.run_id is not None:
        outcome.text += "\n" + accept_new_level(ctx, outcome.completed.run_id, kept, accept)
    return _with_report(ctx, outcome, baseline)


def accept_new_level(ctx: Context, run_id: int, nodes: set[str] | None, reason: str) -> str:
    """The upgrade's run as the new level of what it measured (every line, or the lines of
    the upgraded nodes): later runs are judged against it, as `perfguard accept` does."""
    subjects = sorted(nodes, key=fp.natural_key) if nodes else ["*"]
    with db.connect(ctx.dsn) as conn:
        for subject in subjects:
            vd.accept(conn, subject, run_id, reason)
    return (f"accepted: {', '.join(subjects)} judged against the level of run {run_id} from "
            f"now on ({reason}); `perfguard accept --list` shows it")
