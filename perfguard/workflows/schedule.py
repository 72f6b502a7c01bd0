"""The nightly scheduled from the cluster itself: a scrontab block, or (where scrontab is
missing) a recurring batch job in a partition the nightly does not measure."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from croniter import CroniterError, croniter

from perfguard.contract.topology import slurm_partition
from perfguard.errors import PerfguardError, UsageError
from perfguard.judge import fingerprint as fp
from perfguard.site import slurm
from perfguard.site.context import Context
from perfguard.workflows import site_check as check

SCRON_BEGIN = "# >>> perfguard nightly >>>"
SCRON_END = "# <<< perfguard nightly <<<"


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
    env = ctx.slurm_env()
    # the cluster's own Slurm's (one built from source) where it runs one, else the PATH's
    if shutil.which("scrontab", path=(env or os.environ).get("PATH")) is None:
        raise PerfguardError(
            "scrontab is not installed (Debian's slurm-client 22.05 does not ship it): "
            "print the entry with --print-scrontab for a host that has it, or schedule "
            "from Slurm with `perfguard nightly --submit-recurring`")
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
    cancelled = cancelled_jobs(state)
    if os.environ.get("SLURM_JOB_ID") in cancelled:
        return (f"the recurring nightly was cancelled while job {os.environ['SLURM_JOB_ID']} "
                f"ran: no next night submitted")
    # Everything that can refuse is asked first (the schedule, a DSN with a password):
    # the cancel marker goes only once sbatch took the new job, or a refused resubmission
    # would let the running night, cancelled, submit its sequel after all.
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
    cancelled_marker(state).unlink(missing_ok=True)  # scheduled again by hand
    return f"nightly job {result.stdout.strip()} will start at {begin}"


def cancelled_marker(state: Path) -> Path:
    """The running driver jobs whose next night is not to be submitted, one id a line:
    `--cancel-recurring` lets a night in progress finish, and this stops its sequel."""
    return state / "nightly-recurring.cancelled"


def cancelled_jobs(state: Path) -> set[str]:
    try:
        return set(cancelled_marker(state).read_text().split())
    except OSError:
        return set()


def queued_drivers(ctx: Context, fields: str = "%i|%T") -> list[list[str]]:
    """The recurring nightly's driver jobs of this user in Slurm's queue, each as the
    squeue ``fields`` asked (``|``-separated: id, state, …)."""
    listed = slurm.run(ctx, "squeue", "-h", "--me", f"--name={JOB_NAME}", "-o", fields)
    if listed.returncode != 0:
        raise PerfguardError(f"squeue failed: {listed.stderr.strip()} (is slurmctld "
                             f"reachable from here?)")
    return sorted(line.split("|") for line in listed.stdout.splitlines() if line.strip())


def recurring_jobs(ctx: Context) -> dict[str, str]:
    """The recurring nightly's driver jobs of this user in Slurm's queue: id → state."""
    return {job: state for job, state in queued_drivers(ctx)}


def cancel_recurring(ctx: Context, stop_running: bool = False) -> str:
    """Stop the next nights: the pending driver job is cancelled, a running one submits
    no next. The night in progress finishes (its results stored, its report written)
    unless ``stop_running``: then it is asked to stop its checks (nightly.stop_file), and
    still stores and reports what finished. Never scancel on a running driver: Slurm
    kills it KillWait seconds later, before its report is written."""
    from perfguard.workflows.nightly import stop_file

    jobs = recurring_jobs(ctx)
    pending = sorted(j for j, state in jobs.items() if state == "PENDING")
    running = sorted(j for j, state in jobs.items() if state != "PENDING")
    if pending:
        slurm.run(ctx, "scancel", *pending)
    if running:
        marker = cancelled_marker(ctx.state)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("".join(f"{j}\n" for j in sorted(cancelled_jobs(ctx.state)
                                                            | set(running))))
    said = [f"cancelled the pending nightly job {', '.join(pending)}" if pending else
            "no nightly job was pending"]
    if running and stop_running:
        stop_file(ctx.state).write_text(f"perfguard nightly --cancel-recurring --now, "
                                        f"{datetime.now():%Y-%m-%d %H:%M:%S}")
        said.append(f"the running nightly (job {', '.join(running)}) stops its checks, "
                    f"stores and reports what finished, and submits no next night")
    elif running:
        said.append(f"the running nightly (job {', '.join(running)}) finishes and submits "
                    f"no next night (--now stops it too)")
    return "; ".join(said)


# --- what is scheduled ------------------------------------------------------------
RUN_LINE = re.compile(r"^run \d+: .*$", re.M)


def status(ctx: Context) -> str:
    """What is scheduled where: the recurring driver jobs in Slurm's queue (the next
    night, a night running now, whether it was cancelled), perfguard's scrontab entry and
    when it fires next, and the last night's outcome from its log (``STATE/log``)."""
    drivers = queued_drivers(ctx, "%i|%T|%S|%P")
    cancelled = cancelled_jobs(ctx.state)
    said = []
    for job, state, start, partition in drivers:
        if state == "PENDING":
            said.append(f"next night: recurring job {job} in partition {partition}, "
                        f"starts {start}")
        else:
            sequel = ("cancelled: submits no next night" if job in cancelled
                      else "then submits the next")
            said.append(f"running now: recurring job {job} in partition {partition} since "
                        f"{start} ({sequel})")
    if not drivers:
        said.append("recurring job: none queued (`perfguard nightly --submit-recurring`)")
    said.append(scrontab_status(ctx))
    said.append(last_night(ctx.state))
    return "\n".join(said)


def scrontab_status(ctx: Context) -> str:
    """perfguard's scrontab entry and its next firing, or that there is none."""
    env = ctx.slurm_env()
    if shutil.which("scrontab", path=(env or os.environ).get("PATH")) is None:
        return "scrontab: not installed here (Debian's slurm-client 22.05 lacks it)"
    current = _current_scrontab(env or {})
    block = current.split(SCRON_BEGIN, 1)[1].split(SCRON_END, 1)[0] \
        if SCRON_BEGIN in current else ""
    ours = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    if not ours:
        return "scrontab: no perfguard entry (`perfguard nightly --install-scrontab`)"
    schedule = " ".join(ours[0].split()[:5])
    upcoming = next_occurrence(schedule, datetime.now())
    return f"scrontab: perfguard's entry '{schedule}', fires next {upcoming:%Y-%m-%dT%H:%M}"


def last_night(state: Path) -> str:
    """The newest nightly log of this state directory and the run line it ended with."""
    logs = sorted((state / "log").glob("nightly-*.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return f"last night: none logged under {state / 'log'}"
    newest = logs[-1]
    ended = datetime.fromtimestamp(newest.stat().st_mtime)
    outcome = RUN_LINE.findall(newest.read_text(errors="replace"))
    return (f"last night: {newest.name} (last written {ended:%Y-%m-%dT%H:%M}): "
            f"{outcome[-1] if outcome else 'no run line yet (running, or it ended early)'}")
