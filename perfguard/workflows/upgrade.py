"""After a driver or firmware upgrade: the upgraded nodes measured and judged against a
baseline run, and (when asked) their level accepted."""

from __future__ import annotations

import subprocess

from perfguard.errors import PerfguardError
from perfguard.judge import fingerprint as fp
from perfguard.judge import verdict as vd
from perfguard.run.reframe import RunRequest
from perfguard.site.context import Context
from perfguard.store import db
from perfguard.workflows.nightly import with_report
from perfguard.workflows.pipeline import RunVerdict, run_pipeline


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
                  tags: tuple[str, ...], system: str, accept: str | None = None,
                  job_options: tuple[str, ...] = ()) -> RunVerdict:
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
                                           labels=("post-upgrade",),
                                           job_options=job_options), baseline, kept)
    outcome.text = (f"perfguard upgrade check on {system}"
                    + (f" (nodes {nodes})" if nodes else "")
                    + f": run {outcome.completed.run_id} against baseline {baseline}\n"
                    + outcome.text)
    if accept and outcome.completed.run_id is not None:
        outcome.text += "\n" + accept_new_level(ctx, outcome.completed.run_id, kept, accept)
    return with_report(ctx, outcome, baseline)


def accept_new_level(ctx: Context, run_id: int, nodes: set[str] | None, reason: str) -> str:
    """The upgrade's run as the new level of what it measured (every line, or the lines of
    the upgraded nodes): later runs are judged against it, as `perfguard accept` does."""
    subjects = sorted(nodes, key=fp.natural_key) if nodes else ["*"]
    with db.connect(ctx.dsn) as conn:
        for subject in subjects:
            vd.accept(conn, subject, run_id, reason)
    return (f"accepted: {', '.join(subjects)} judged against the level of run {run_id} from "
            f"now on ({reason}); `perfguard accept --list` shows it")
