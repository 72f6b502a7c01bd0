"""`perfguard run` and `perfguard demo`: the run pipeline from the command line."""

from __future__ import annotations

import argparse
import sys

from perfguard import paths
from perfguard.cli.options import (
    DSN,
    job_options,
    job_options_option,
    port_base_option,
    slurm_prefix_option,
)
from perfguard.site.context import Context


def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run", parents=[DSN], help="run ReFrame checks, ingest the report and print the verdict",
        description="Runs reframe with perfguard's site config and test library, writes one "
                    "report per run under STATE/reports, ingests it and prints the verdict.")
    run.add_argument("--system", default="local", help="ReFrame system (default: local, the "
                     "embedded cluster)")
    run.add_argument("-n", "--name", action="append", default=[], help="check name filter")
    run.add_argument("-t", "--tag", action="append", default=[], help="tag filter")
    run.add_argument("-S", "--setvar", action="append", default=[],
                     help="set a check variable, as reframe -S")
    run.add_argument("--dry-run", action="store_true", help="generate job scripts only")
    run.add_argument("--trigger", default="manual", help="why this run: nightly, upgrade, manual")
    run.add_argument("--label", action="append", default=[],
                     help="free label stored with the run (e.g. pre-upgrade)")
    run.add_argument("--no-ingest", action="store_true", help="keep the report, do not ingest")
    run.add_argument("--checks", action="append", default=[], metavar="DIR",
                     help="a directory of the site's own checks, searched beside the shipped "
                          "ones (SITE/checks always is); repeatable")
    job_options_option(run)
    run.add_argument("reframe_args", nargs=argparse.REMAINDER,
                     help="after --: extra reframe options")
    run.set_defaults(func=cmd_run)
    listed = sub.add_parser(
        "checks", help="list the checks and variants a system would run, with skip reasons",
        description="A ReFrame dry run (job scripts generated, nothing submitted, nothing "
                    "stored): one line per variant and partition, 'runs' or 'skipped: why' "
                    "(a shape the nodes cannot hold, a size beyond their memory, a "
                    "dependency skipped). ReFrame's own listing: `perfguard run -- --list`.")
    listed.add_argument("--system", default="local",
                        help="ReFrame system, or SYSTEM:PARTITION (default: local)")
    listed.add_argument("-n", "--name", action="append", default=[], help="check name filter")
    listed.add_argument("-t", "--tag", action="append", default=[], help="tag filter")
    listed.add_argument("-S", "--setvar", action="append", default=[],
                        help="set a check variable, as reframe -S")
    listed.add_argument("--checks", action="append", default=[], metavar="DIR",
                        help="a directory of the site's own checks (SITE/checks always is)")
    listed.set_defaults(func=cmd_checks)
    demo = sub.add_parser("demo", help="cluster up, db upgrade, run the demo checks, verdict")
    port_base_option(demo)
    slurm_prefix_option(demo)
    demo.set_defaults(func=cmd_demo)


def cmd_run(args: argparse.Namespace) -> int:
    from perfguard.run.reframe import RunRequest, check_directories

    extra = [a for a in args.reframe_args if a != "--"]
    request = RunRequest(system=args.system, names=tuple(args.name),
                         tags=tuple(args.tag), setvars=tuple(args.setvar),
                         dry_run=args.dry_run, extra=tuple(extra), trigger=args.trigger,
                         labels=tuple(args.label), checks=tuple(args.checks),
                         job_options=job_options(args))
    check_directories(request, args.ctx.site)  # a wrong --checks before anything runs
    return run_and_print(args.ctx, request, ingest=not args.no_ingest)


def cmd_checks(args: argparse.Namespace) -> int:
    from perfguard.run.reframe import RunRequest, check_directories
    from perfguard.workflows.listing import planned

    request = RunRequest(system=args.system, names=tuple(args.name), tags=tuple(args.tag),
                         setvars=tuple(args.setvar), checks=tuple(args.checks))
    check_directories(request, args.ctx.site)
    print(planned(args.ctx, request))
    return 0


def run_and_print(ctx: Context, request, ingest: bool) -> int:
    """Run through the pipeline and print its verdict; the exit code is the stored
    verdict's (skips and expected failures do not fail it), reframe's without one."""
    from perfguard.workflows.pipeline import judge_stored, run_and_store

    done = run_and_store(ctx, request, ingest)
    if request.listing:  # `-- --list`: ReFrame's listing is the answer
        return done.returncode
    if request.dry_run or not ingest:
        print(f"report: {done.report}")
        return done.returncode
    if not done.stored:
        print(f"perfguard: error: {done.message}", file=sys.stderr)
        print(f"report kept: {done.report}; retry with `perfguard ingest --spool`",
              file=sys.stderr)
        return done.returncode or 1
    verdict = judge_stored(ctx, done)
    print(f"\nperfguard verdict for run {done.run_id} (report {done.report}):")
    print(verdict.text)
    print(verdict.run_line)
    return verdict.exit_code


def cmd_demo(args: argparse.Namespace) -> int:
    from perfguard import cluster
    from perfguard.judge import thresholds as th
    from perfguard.run.reframe import RunRequest
    from perfguard.store import db

    layout = cluster.up(args.state_dir, 4, args.port_base, slurm_prefix=args.slurm_prefix)
    ctx = Context.resolve(args.state_dir, layout.dsn)
    with db.connect(layout.dsn) as conn:
        db.upgrade(conn)
        for threshold in th.from_yaml(paths.DEFAULTS_DIR / "thresholds" / "local.yaml"):
            th.set_threshold(conn, threshold)
    status = run_and_print(ctx, RunRequest(tags=("demo",), labels=("demo",)), ingest=True)
    from perfguard.judge.verdict import resolve_run
    from perfguard.present import htmlreport

    with db.connect(layout.dsn) as conn:
        run_id = resolve_run(conn, "demo")
    path = htmlreport.write_for_run(args.state_dir, layout.dsn, run_id)
    print(f"\nHTML report: {path}\n(Markdown summary: {path.with_suffix('.md')})")
    print(f"\n{htmlreport.ONE_HOST}")
    return status


def add(sub: argparse._SubParsersAction) -> None:
    _add_run(sub)
