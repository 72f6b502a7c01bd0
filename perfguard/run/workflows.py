"""The admin workflows: the nightly acceptance run and the after-upgrade comparison."""

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
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from croniter import CroniterError, croniter

from perfguard.cluster.layout import ClusterLayout
from perfguard.errors import AlreadyRunning, PerfguardError, UsageError
from perfguard.judge import fingerprint as fp
from perfguard.judge import rules as judge
from perfguard.judge import verdict as vd
from perfguard.run.reframe import Completed, RunRequest, run_and_store
from perfguard.site import paths
from perfguard.store import db
from perfguard.sweep import analysis as sw

SCRON_BEGIN = "# >>> perfguard nightly >>>"
SCRON_END = "# <<< perfguard nightly <<<"


@dataclass
class Outcome:
    """What a workflow tells the admin (and the webhook): run, verdict lines, status."""
    completed: Completed
    lines: list[vd.Line]
    text: str
    #: The run's HTML report (and its Markdown summary beside it), once written.
    html: Path | None = None
    #: The stored run's outcome (the database's run_outcome); None: not stored.
    result: vd.RunOutcome | None = None

    @property
    def failed(self) -> bool:
        """As the database says (skips and expected failures are not failures); a run
        that could not be stored fails."""
        return self.result is None or self.result.failed


def run_context_environment(state: Path) -> dict[str, str]:
    """What a scheduled nightly needs to find again: its state and site directories."""
    environment = {"PERFGUARD_STATE_DIR": str(state)}
    site = paths.site_dir()
    if site is not None:
        environment["PERFGUARD_SITE"] = str(site)
    return environment


def _verdict(completed: Completed, dsn: str, baseline: str | None = None,
             nodes: set[str] | None = None) -> tuple[list, str, vd.RunOutcome | None]:
    """The run's verdict; with a baseline also the change and the fingerprint diff, the
    latter restricted to ``nodes`` when the run was restricted to them."""
    if not completed.stored:
        return [], (f"run not stored: {completed.message}; the report is kept in the spool "
                    f"({completed.report.name})"), None
    with db.connect(dsn) as conn:
        lines = vd.judge_and_record(conn, completed.run_id)
        result = vd.outcome(conn, completed.run_id)
        if baseline is None:
            return lines, vd.render(lines), result
        before_id = vd.resolve_run(conn, baseline)
        vd.with_baseline(lines, vd.verdict(conn, before_id))
        after = fp.fingerprints(conn, completed.run_id)
        compared = sorted(nodes or after, key=fp.natural_key)
        before = fp.fingerprints_as_of(conn, before_id, compared)
        changes = fp.diff(before, {n: facts for n, facts in after.items() if n in compared})
    return lines, (vd.render(lines, show_baseline=True)
                   + f"\n\nfingerprint changes since run {before_id} (each node against its "
                     f"own state then):\n" + fp.render(changes)), result


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


def nightly(state: Path, dsn: str | None, tags: tuple[str, ...], system: str,
            labels: tuple[str, ...] = ()) -> Outcome:
    dsn = db.resolve_dsn(state, dsn)
    with nightly_lock(state, system):
        completed = run_and_store(RunRequest(state=state, system=system, tags=tags,
                                             trigger="nightly", labels=labels), dsn)
    lines, text, result = _verdict(completed, dsn)
    header = f"perfguard nightly on {system}: run {completed.run_id}"
    return _with_report(Outcome(completed, lines, f"{header}\n{text}", result=result), state,
                        dsn)


def _with_report(outcome: Outcome, state: Path, dsn: str, baseline: str | None = None
                 ) -> Outcome:
    """Write the run's HTML report and name it in the text (mail, webhook). A report that
    cannot be written is said so; the verdict stands without it."""
    from perfguard.present import htmlreport

    if not outcome.completed.stored:
        return outcome
    try:
        with db.connect(dsn) as conn:
            before = vd.resolve_run(conn, baseline) if baseline else None
        outcome.html = htmlreport.write_for_run(state, dsn, outcome.completed.run_id, before)
        outcome.text += f"\n\nHTML report: {outcome.html}"
    except (PerfguardError, OSError, ValueError) as exc:
        outcome.text += f"\n\nHTML report not written: {exc}"
    return outcome


def summary(outcome: Outcome, system: str) -> dict:
    """The webhook's JSON payload."""
    counts = vd.counts(outcome.lines)
    failures = [{"check": line.check, "params": line.params, "partition": line.partition,
                 "metric": line.metric, "value": line.value, "reference": line.reference,
                 "status": line.status, "detail": line.detail}
                for line in outcome.lines if line.status in vd.FAILING]
    return {"system": system, "run_id": outcome.completed.run_id,
            "status": "fail" if outcome.failed else "pass", "counts": counts,
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
def scrontab_entry(state: Path, schedule: str, arguments: list[str],
                   partition: str | None = None) -> str:
    """A scrontab block that runs `perfguard nightly` from the cluster itself."""
    layout = ClusterLayout.load(state)
    environment = run_context_environment(state)
    if layout is not None:
        environment.update(SLURM_CONF=str(layout.slurm_conf), PERFGUARD_DSN=layout.dsn)
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


def install_scrontab(state: Path, entry: str | None) -> str:
    """Replace perfguard's block in the user's scrontab (None removes it)."""
    if shutil.which("scrontab") is None:
        raise PerfguardError(
            "scrontab is not installed (Debian's slurm-client 22.05 does not ship it): "
            "print the entry with --print-scrontab for a host that has it, or schedule "
            "from Slurm with `perfguard nightly --submit-recurring`")
    layout = ClusterLayout.load(state)
    env = layout.client_env() if layout else None
    others = _without_our_block(_current_scrontab(env or {}))
    content = "\n".join(part for part in (others, (entry or "").strip()) if part) + "\n"
    target = state / "scrontab"
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


def submit_recurring(state: Path, schedule: str, arguments: list[str],
                     at: str | None = None, partition: str | None = None) -> str:
    """Submit the nightly as a batch job that, once done, submits its next occurrence.

    One pending job at a time (earlier pending ones are cancelled); ``at`` overrides the
    first start (any sbatch --begin value, e.g. now+30).
    """
    layout = ClusterLayout.load(state)
    env = layout.client_env() if layout else None
    begin = at or next_occurrence(schedule, datetime.now()).strftime("%Y-%m-%dT%H:%M:%S")
    perfguard = shlex.quote(str(Path(sys.executable).parent / "perfguard"))
    exported = run_context_environment(state)
    if layout is not None:
        exported.update(SLURM_CONF=str(layout.slurm_conf), PERFGUARD_DSN=layout.dsn)
    prefix = "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in exported.items())
    again = [perfguard, "nightly", "--submit-recurring", "--schedule", shlex.quote(schedule),
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


def cancel_recurring(state: Path) -> None:
    layout = ClusterLayout.load(state)
    subprocess.run(["scancel", f"--name={JOB_NAME}"], capture_output=True,
                   env=layout.client_env() if layout else None)


# --- after an upgrade -----------------------------------------------------------------
def excluded_nodes(state: Path, keep: str) -> tuple[set[str], str]:
    """The nodes ``keep`` names, and the partition's other nodes as a list for
    sbatch --exclude."""
    layout = ClusterLayout.load(state)
    env = layout.client_env() if layout else None
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


def upgrade_check(state: Path, dsn: str | None, baseline: str, nodes: str | None,
                  tags: tuple[str, ...], system: str) -> Outcome:
    dsn = db.resolve_dsn(state, dsn)
    with db.connect(dsn) as conn:
        vd.resolve_run(conn, baseline)  # a wrong baseline fails before anything runs
    extra: tuple[str, ...] = ()
    setvars: tuple[str, ...] = ()
    kept: set[str] | None = None
    if nodes:
        kept, others = excluded_nodes(state, nodes)
        extra = ("-J", f"exclude={others}") if others else ()
        # shapes that need more nodes than given are skipped before anything is submitted
        setvars = (f"nodes_available={len(kept)}",)
    completed = run_and_store(RunRequest(state=state, system=system, tags=tags, extra=extra,
                                         setvars=setvars,
                                         trigger="upgrade", labels=("post-upgrade",)), dsn)
    lines, text, result = _verdict(completed, dsn, baseline, kept)
    header = (f"perfguard upgrade check on {system}"
              + (f" (nodes {nodes})" if nodes else "")
              + f": run {completed.run_id} against baseline {baseline}")
    return _with_report(Outcome(completed, lines, f"{header}\n{text}", result=result), state,
                        dsn, baseline)


# --- fabric sweep ---------------------------------------------------------------------


@dataclass
class SweepOutcome:
    run_id: int
    findings: list
    drained: list[str]
    text: str


def fabric_sweep(state: Path, dsn: str | None, system: str, nodes: str | None = None,
                 drain: bool = False) -> SweepOutcome:
    """Sweep, retest the failing pairs with half as many at once, blame, store, drain."""
    dsn = db.resolve_dsn(state, dsn)
    criteria = sw.load_criteria(paths.site_file("sweep.yaml"), system)
    setvars: tuple[str, ...] = ()
    if nodes:
        kept, _ = excluded_nodes(state, nodes)
        setvars = (f"FabricSweepCheck.nodes={','.join(sorted(kept, key=fp.natural_key))}",)
    first = _sweep_run(state, dsn, system, setvars, ("sweep",))
    with db.connect(dsn) as conn:
        found = sw.measurements(conn, first)
    if not found:
        raise PerfguardError(f"sweep run {first} measured no pair: `perfguard verdict {first}` "
                             f"says why (skipped or failed test cases)")
    with db.connect(dsn) as conn:
        own = sw.history_limits(conn, first, judge.load_rules(vd.rules_file()))
    rates = _line_rates(system)
    state_of = sw.Sweep(found, sw.limits(found, rates, criteria), pair_limits=own)
    load = ""
    for _ in range(criteria.retests):
        suspects = state_of.failing()
        if not suspects:
            break
        # the suspects one at a time, each kind's best pair measured again beside them
        pairs = sorted({f"{m.server}:{m.client}"
                        for m in suspects + state_of.references(suspects)})
        load = sw.host_load()
        again = _sweep_run(state, dsn, system,
                           (f"FabricSweepCheck.pairs={','.join(pairs)}",
                            "FabricSweepCheck.at_once=1"),
                           ("sweep-retest", f"sweep:{first}"))
        with db.connect(dsn) as conn:
            state_of = state_of.retested(sw.measurements(conn, again), criteria, rates)
    findings = [sw.Finding(f.kind, f.subject, f.hca, f"{f.evidence}; {load}" if load
                           else f.evidence) for f in sw.blame(state_of)]
    drained = _drain(state, first, findings) if drain else []
    with db.connect(dsn) as conn:
        sw.store_findings(conn, first, findings, set(drained))
    return SweepOutcome(first, findings, drained,
                        sw.render(first, system, state_of, findings, drained))


def _sweep_run(state: Path, dsn: str, system: str, setvars: tuple[str, ...],
               labels: tuple[str, ...]) -> int:
    completed = run_and_store(RunRequest(state=state, system=system, tags=("sweep",),
                                         setvars=setvars, trigger="sweep", labels=labels), dsn)
    if not completed.stored:
        raise PerfguardError(f"sweep run not stored: {completed.message}; the report is kept "
                             f"in the spool ({completed.report.name})")
    return completed.run_id


def _line_rates(system: str) -> dict[str, float]:
    """HCA → line rate in MiB/s, from the system's topology file (none: no such floor)."""
    from perfguard.contract.topology import load_systems

    rates = {}
    for known in load_systems(paths.site_folder("systems")):
        if known.name == system:
            for part in known.partitions:
                for hca in part.node.hcas:
                    if hca.data_rate_gbps:
                        rates[hca.name] = hca.data_rate_gbps * 1e9 / 8 / 2**20
    return rates


def _slurm(state: Path, *argv: str) -> subprocess.CompletedProcess:
    layout = ClusterLayout.load(state)
    return subprocess.run(list(argv), capture_output=True, text=True,
                          env=layout.client_env() if layout else None)


def _drain(state: Path, run_id: int, findings: list) -> list[str]:
    """Blamed nodes (and nodes of blamed HCAs) to DRAIN, the reason naming the sweep."""
    drained = []
    for finding in findings:
        node = finding.node
        if node is None or node in drained:
            continue
        reason = f"{sw.DRAIN_MARK} sweep run {run_id}: {finding.kind} {finding.subject} " \
                 f"{finding.evidence}"[:200]
        result = _slurm(state, "scontrol", "update", f"NodeName={node}", "State=DRAIN",
                        f"Reason={reason}")
        if result.returncode != 0:
            raise PerfguardError(f"cannot drain {node}: {result.stderr.strip()}")
        drained.append(node)
    return drained


def drained_by_perfguard(state: Path) -> dict[str, str]:
    """Nodes drained with a reason perfguard wrote: node → reason."""
    listing = _slurm(state, "sinfo", "-h", "-N", "-o", "%N|%T|%E")
    if listing.returncode != 0:
        raise PerfguardError(f"sinfo failed: {listing.stderr.strip()}")
    found = {}
    for line in listing.stdout.splitlines():
        node, node_state, reason = (line.split("|", 2) + ["", ""])[:3]
        if reason.startswith(sw.DRAIN_MARK) and "drain" in node_state.lower():
            found[node] = reason
    return found


def resume_drained(state: Path) -> list[str]:
    """RESUME the nodes perfguard drained; nodes drained by anyone else stay as they are."""
    nodes = sorted(drained_by_perfguard(state), key=fp.natural_key)
    for node in nodes:
        result = _slurm(state, "scontrol", "update", f"NodeName={node}", "State=RESUME")
        if result.returncode != 0:
            raise PerfguardError(f"cannot resume {node}: {result.stderr.strip()}")
    return nodes
