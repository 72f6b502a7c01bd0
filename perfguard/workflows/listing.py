"""`perfguard checks`: the checks and variants a system would run, and why each skipped one
would be skipped, from a ReFrame dry run (job scripts generated, nothing submitted)."""

from __future__ import annotations

from perfguard.errors import PerfguardError
from perfguard.present import text as tx
from perfguard.run.reframe import RunRequest, run_directory, run_reframe
from perfguard.site.context import Context
from perfguard.store import report as rep
from perfguard.workflows import site_check as check


def planned(ctx: Context, request: RunRequest) -> str:
    """ReFrame's dry run of ``request`` (its own output kept beside the report, not
    printed), read back as one line per variant and partition: runs, or skipped and why.
    ReFrame's ``--list`` says neither: a skip is decided in the checks' setup hooks
    (a shape the nodes cannot hold, a size beyond the nodes' memory)."""
    check.require_runnable(ctx, request.system, against_slurm=False)
    request.dry_run = True
    request.output = request.output or ctx.state / "log" / "checks-dry-run.log"
    outcome = run_reframe(ctx, request)
    if outcome.returncode != 0 or not outcome.report.exists():
        raise PerfguardError(f"reframe's dry run failed (exit {outcome.returncode}): see "
                             f"{request.output}")
    found = rep.load(outcome.report)
    return tx.planned_variants(request.system, [c for c in found.testcases if not c.fixture],
                               run_directory(ctx.state, outcome.report) / "stage")
