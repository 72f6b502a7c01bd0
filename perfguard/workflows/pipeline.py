"""One pipeline for every command that runs checks: run → store → judge → record.

`perfguard run`, the nightly, the upgrade check and the demo all go through
``run_pipeline`` and read the one ``RunVerdict`` it returns; what the database records
(``run_outcome``) decides pass or fail.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import psycopg

from perfguard.contract import switches
from perfguard.contract.references import References
from perfguard.errors import PerfguardError, UsageError
from perfguard.judge import coverage as cov
from perfguard.judge import fingerprint as fp
from perfguard.judge import run_findings
from perfguard.judge import verdict as vd
from perfguard.judge.thresholds import references_in_force
from perfguard.present import text as tx
from perfguard.run.reframe import RunRequest, library_revision, run_reframe
from perfguard.site import slurm
from perfguard.site.context import Context
from perfguard.store import db
from perfguard.store.ingest import RunMeta, ingest_paths
from perfguard.workflows import site_check as check


@dataclass
class Completed:
    """A run that went through reframe and, unless it could not be stored, ingest."""
    returncode: int
    report: Path
    run_id: int | None
    message: str = ""
    #: Why perfguard stopped reframe before it ended (run.reframe.StallWatchdog).
    stalled: str | None = None

    @property
    def stored(self) -> bool:
        return self.run_id is not None


@dataclass
class RunVerdict:
    """What a run tells the admin (and the webhook): run, verdict lines, status."""
    completed: Completed
    lines: list[vd.Line]
    text: str
    #: The stored run's outcome (the database's run_outcome); None: not stored.
    result: vd.RunOutcome | None = None
    #: The run's HTML report (and its Markdown summary beside it), once written.
    html: Path | None = None

    @property
    def failed(self) -> bool:
        """As the database says (skips and expected failures are not failures); a run
        that could not be stored fails."""
        return self.result is None or self.result.failed

    @property
    def exit_code(self) -> int:
        """0 pass, 1 fail (or not stored), 3 nothing measured, 4 interrupted (vd.EXIT_CODES)."""
        return 1 if self.result is None else self.result.exit_code

    @property
    def status(self) -> str:
        """PASS, FAIL, INTERRUPTED or NOTHING-MEASURED, as the run line says it."""
        return "FAIL" if self.result is None else self.result.word

    @property
    def run_line(self) -> str:
        """``run N: PASS (why)``, the last line `run`, `nightly` and `upgrade-check` print
        (NOTHING-JUDGED where no figure was: present.text.run_line)."""
        if self.result is None:
            return f"run not stored: FAIL ({self.completed.message})"
        return tx.run_line(self.result, self.completed.run_id, self.lines)


def run_and_store(ctx: Context, request: RunRequest, ingest: bool = True) -> Completed:
    """Run reframe, then store the report (spooled with the reason when it cannot be)."""
    submits = not (request.dry_run or request.listing)
    check.require_runnable(ctx, request.system, against_slurm=submits)
    if ingest and submits:
        require_current_schema(ctx)
    if submits:
        request = within_reservation(ctx, request)
    outcome = run_reframe(ctx, request, partial(write_references, ctx, request.system))
    if not submits or not ingest:
        return Completed(outcome.returncode, outcome.report, None, "not ingested",
                         outcome.stalled)
    RunMeta(request.trigger, request.labels, library_revision(),
            leaves_now(ctx)).save_beside(outcome.report)
    [result] = ingest_paths(ctx.state, ctx.dsn, [outcome.report], RunMeta())
    if result.run_id is not None:
        record_cost(ctx, result.run_id, slurm_job_ids(outcome.report))
    return Completed(outcome.returncode, outcome.report, result.run_id, result.message,
                     outcome.stalled)


def slurm_job_ids(report: Path) -> list[str]:
    """The Slurm jobs of a ReFrame report's test cases, retried attempts too (each took
    its nodes); not a job ReFrame ran locally (the Spack stack's build: its id is a
    process id on this host, which accounting may know as someone else's job)."""
    try:
        runs = json.loads(report.read_text()).get("runs") or []
    except (OSError, ValueError):
        return []
    return sorted({str(case["jobid"]) for run in runs for case in run.get("testcases") or []
                   if case.get("jobid") not in (None, "") and not case.get("local")
                   and case.get("scheduler") in ("slurm", "squeue")})


def record_cost(ctx: Context, run_id: int, ids: list[str]) -> None:
    """The run's jobs (``ids``) as Slurm accounting saw them (node-hours, queue wait)
    stored with the run. A site without accounting, or a database that fails now, leaves
    the run without a cost: `perfguard verdict` then prints none."""
    if not ids:
        return
    try:
        with db.connect(ctx.dsn) as conn:
            jobs = slurm.job_accounting(ctx, ids)
            if jobs:
                cov.store_jobs(conn, run_id, jobs)
    except (PerfguardError, psycopg.Error) as exc:
        print(f"perfguard: the cost of run {run_id} was not recorded: "
              f"{str(exc).strip().splitlines()[0]}", file=sys.stderr)


def leaves_now(ctx: Context) -> dict[str, str]:
    """Each node's leaf switch as Slurm's tree has it now, kept with the run's report (and
    stored with it), so that the verdict tells a leaf's night from the fabric's. A site
    without a tree has none; a Slurm that cannot say now leaves the run judged without
    them, said."""
    try:
        return switches.leaf_of(switches.from_slurm(ctx.slurm_env()))
    except (PerfguardError, OSError) as exc:
        print(f"perfguard: the leaf switches were not read (the run is judged without "
              f"them): {str(exc).strip().splitlines()[0]}", file=sys.stderr)
        return {}


def within_reservation(ctx: Context, request: RunRequest) -> RunRequest:
    """A run given ``--reservation=R``: Slurm must have R (else sbatch refuses every job:
    nothing is run), and a check that needs more nodes than R holds is skipped before
    submission (it would wait in the queue for ever), unless the run limits its nodes
    already (``upgrade-check --nodes``)."""
    names = [o.split("=", 1)[1] for o in request.job_options
             if o.startswith("--reservation=")]
    if not names:
        return request
    shown = slurm.run(ctx, "scontrol", "show", "reservation", names[-1])
    count = re.search(r"\bNodeCnt=(\d+)", shown.stdout)
    if shown.returncode != 0 or count is None:
        raise UsageError(f"--reservation {names[-1]}: Slurm has no such reservation "
                         f"({(shown.stderr or shown.stdout).strip()}; `scontrol show "
                         f"reservation` lists them); nothing was run")
    if any(s.split("=")[0].endswith("nodes_available") for s in request.setvars):
        return request
    return replace(request, setvars=(*request.setvars, f"nodes_available={count[1]}"))


def write_references(ctx: Context, system: str, directory: Path) -> Path:
    """The system's thresholds in force, as the checks read them; where the database
    cannot say, the file says why (the checks run on without references)."""
    try:
        with db.connect(ctx.dsn) as conn:
            db.require_current(conn)
            found = references_in_force(conn, system)
    except (PerfguardError, psycopg.Error) as exc:
        found = References(unavailable=f"{exc}".strip().splitlines()[0])
    return found.write(directory / "references.json")


def require_current_schema(ctx: Context) -> None:
    """Before ReFrame starts: a database whose schema is behind could store nothing of
    the run, so nothing is run. A database that cannot be reached is no reason to stop:
    the report is spooled and stored later."""
    try:
        conn = db.connect(ctx.dsn)
    except PerfguardError:
        return
    with conn:
        try:
            db.require_current(conn)
        except db.SchemaBehind as exc:
            raise UsageError(f"{exc}; nothing was run") from None


def judge_stored(ctx: Context, completed: Completed, baseline: str | None = None,
                 nodes: set[str] | None = None) -> RunVerdict:
    """The stored run's verdict, judged and recorded; with a baseline also the change and
    the fingerprint diff, the latter restricted to ``nodes`` when the run was."""
    if not completed.stored:
        return RunVerdict(completed, [], f"run not stored: {completed.message}; the report "
                                         f"is kept in the spool ({completed.report.name})")
    with db.connect(ctx.dsn) as conn:
        lines = run_findings.judge_and_record(conn, completed.run_id)
        found = tx.findings(run_findings.stored(conn, completed.run_id), len(lines))
        result = vd.outcome(conn, completed.run_id)
        after = fp.fingerprints(conn, completed.run_id)
        slow = tx.slow_links(fp.links_below_maximum(after))
        if baseline is None:
            return RunVerdict(completed, lines, _joined(completed.stalled or "", found,
                                                        tx.verdict_table(lines), slow), result)
        before_id = vd.resolve_run(conn, baseline)
        vd.with_baseline(lines, vd.verdict(conn, before_id))
        compared = sorted(nodes or after, key=fp.natural_key)
        before = fp.fingerprints_as_of(conn, before_id, compared)
        changes = fp.diff(before, {n: facts for n, facts in after.items() if n in compared})
    return RunVerdict(completed, lines, _joined(
        found, tx.verdict_table(lines, show_baseline=True), slow,
        f"fingerprint changes since run {before_id} (each node against its own state "
        f"then):\n" + tx.fingerprint_changes(changes)), result)


def _joined(*parts: str) -> str:
    return "\n\n".join(part for part in parts if part)


def run_pipeline(ctx: Context, request: RunRequest, baseline: str | None = None,
                 nodes: set[str] | None = None) -> RunVerdict:
    """Run, store, judge and record: the one path from checks to a run verdict."""
    return judge_stored(ctx, run_and_store(ctx, request), baseline, nodes)
