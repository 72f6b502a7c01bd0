"""`perfguard report`: the HTML report of a run."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfguard.cli.options import DSN, connect


def _add_report(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser(
        "report", parents=[DSN], help="write a run's self-contained HTML report (and Markdown)",
        description="One HTML file that opens without network: the verdict first (failing "
                    "and regressed lines with evidence and history), curves, Himeno scaling, "
                    "nodes, a fabric sweep's matrix, environment changes, failed cases.")
    rep.add_argument("run", nargs="?", default=None,
                     help="run id, session uuid or label (default: latest)")
    rep.add_argument("--baseline", help="compare with this run (default: the previous run)")
    rep.add_argument("-o", "--output", type=Path,
                     help="HTML file (default: STATE/reports/run-N.html)")
    rep.add_argument("--markdown", type=Path,
                     help="also write a Markdown summary (e.g. for a CI job summary)")
    rep.add_argument("--junit", type=Path,
                     help="also copy the run's JUnit test results (ReFrame's) to this file")
    rep.epilog = ("Exits by the run's outcome, as `perfguard verdict` does: 0 pass, 1 fail, "
                  "3 nothing measured (docs/operations.md).")
    rep.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """Write the report and exit by the run's stored outcome (one truth with `verdict`,
    `run` and the nightly: a CI job that publishes the report fails on a failed run)."""
    from perfguard.judge import verdict as vd
    from perfguard.present import htmlreport
    from perfguard.present import text as tx

    with connect(args) as conn:
        run_id = vd.resolve_run(conn, args.run)
        baseline = vd.resolve_run(conn, args.baseline) if args.baseline else None
        path = args.output or htmlreport.default_path(args.state_dir, run_id)
        report = htmlreport.write(conn, run_id, path, baseline, args.markdown)
    if args.junit:
        htmlreport.copy_junit(report, args.junit)
    print(f"{tx.run_line(report.outcome, run_id, report.lines)}; report: {path}"
          + (f"; summary: {args.markdown}" if args.markdown else "")
          + (f"; JUnit: {args.junit}" if args.junit else ""))
    return report.outcome.exit_code


def add(sub: argparse._SubParsersAction) -> None:
    _add_report(sub)
