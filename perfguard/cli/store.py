"""`perfguard db` and `perfguard ingest`: the schema, roles and stored reports."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from perfguard.cli.options import DSN, connect
from perfguard.errors import UsageError


def _add_db(sub: argparse._SubParsersAction) -> None:
    dbp = sub.add_parser("db", help="database schema: upgrade and status")
    actions = dbp.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser(
        "upgrade", parents=[DSN],
        help="apply pending SQL migrations, then the views and functions that changed"
    ).set_defaults(func=cmd_db_upgrade)
    actions.add_parser(
        "status", parents=[DSN],
        help="list migrations and repeatable files and whether each is applied"
    ).set_defaults(func=cmd_db_status)
    grant = actions.add_parser(
        "grant", parents=[DSN], help="give a login role the writer's or the reader's rights",
        description="writer: stores runs and verdicts (perfguard run, nightly, verdict), no "
                    "DDL; reader: SELECT only (Grafana). Run with the schema owner's DSN; "
                    "the password is read from $PERFGUARD_GRANT_PASSWORD if set.")
    grant.add_argument("user", help="the database role to create or grant to")
    grant.add_argument("--kind", choices=["writer", "reader"], default="writer",
                       help="writer: runs and ingests; reader: Grafana and reports "
                            "(default: writer)")
    grant.set_defaults(func=cmd_db_grant)
    prune = actions.add_parser(
        "prune", parents=[DSN], help="drop the samples of months older than --keep days",
        description="Drops whole monthly sample partitions that ended more than KEEP days "
                    "ago (never row by row). Runs, test cases, verdict lines and the key "
                    "figures' nightly rollups stay, so trends stay on the dashboard. Needs "
                    "the schema owner's DSN.")
    prune.add_argument("--keep", type=int, required=True, metavar="DAYS",
                       help="keep every month with samples of the last DAYS days")
    prune.add_argument("--dry-run", action="store_true", help="only say what would be dropped")
    prune.set_defaults(func=cmd_db_prune)
    actions.add_parser("months", parents=[DSN], help="the monthly sample partitions: rows, "
                       "size, pruned or not").set_defaults(func=cmd_db_months)


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from perfguard.store import db

    with connect(args) as conn:
        newly = db.upgrade(conn)
    for change in newly:
        print(f"applied {change.label}")
    print("schema is current" if not newly else f"{len(newly)} change(s) applied")
    return 0


def cmd_db_grant(args: argparse.Namespace) -> int:
    from perfguard.store import db

    with connect(args) as conn:
        created = db.grant(conn, args.user, args.kind,
                           os.environ.get("PERFGUARD_GRANT_PASSWORD"))
    print(f"{'created' if created else 'updated'} role {args.user}: {args.kind} "
          f"({db.GRANT_GROUPS[args.kind]})")
    return 0


def cmd_db_prune(args: argparse.Namespace) -> int:
    from perfguard.store import db

    if args.keep < 0:
        raise UsageError(f"--keep {args.keep}: days to keep cannot be negative")
    with connect(args) as conn:
        dropped = db.prune(conn, args.keep, dry_run=args.dry_run)
    verb = "would drop" if args.dry_run else "dropped"
    for month in dropped:
        print(f"{verb} {month.name} ({month.starts:%Y-%m-%d} – {month.ends:%Y-%m-%d}, "
              f"{month.rows:,} samples)")
    if not dropped:
        print(f"no month ended more than {args.keep} days ago: nothing to drop")
    return 0


def cmd_db_months(args: argparse.Namespace) -> int:
    from perfguard.store import db

    with connect(args) as conn:
        months = db.sample_months(conn)
    print(f"{'month':<16} {'from':<10}  {'to':<10}  {'samples':>13}  {'size':>9}  pruned")
    for m in months:
        pruned = f"{m.pruned_at:%Y-%m-%d %H:%M}" if m.pruned_at else "-"
        print(f"{m.name:<16} {m.starts:%Y-%m-%d}  {m.ends:%Y-%m-%d}  {m.rows:>13,}  "
              f"{m.size / 2 ** 20:>7.1f} MiB  {pruned}")
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    from perfguard.store import db

    with connect(args) as conn:
        behind = db.pending(conn)
    for change in db.migrations() + db.repeatables():
        print(f"{change.label:<36} {'pending' if change in behind else 'applied'}")
    return 0 if not behind else 3


def _add_ingest(sub: argparse._SubParsersAction) -> None:
    ing = sub.add_parser(
        "ingest", parents=[DSN], help="load ReFrame JSON reports into the database",
        description="Each report is stored in one transaction, idempotently by session uuid. "
                    "A report that cannot be stored now (database down) is kept in "
                    "STATE/spool with the reason; one that never can (malformed) is parked "
                    "in STATE/spool/rejected. Exit 1 if any report was not stored.")
    ing.add_argument("reports", nargs="*", type=Path, help="ReFrame report files")
    ing.add_argument("--results-db", type=Path, metavar="FILE",
                     help="every session of a ReFrame 4.7+ results database (results.db), "
                          "oldest first: a site's ReFrame history as perfguard's")
    ing.add_argument("--spool", action="store_true", help="retry every spooled report")
    ing.add_argument("--trigger", default="manual", help="trigger for reports without metadata")
    ing.add_argument("--label", action="append", default=[], help="label for such reports")
    ing.set_defaults(func=cmd_ingest)


def cmd_ingest(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from perfguard.store.ingest import RunMeta, ingest_paths
    from perfguard.store.spool import spool_lock, spooled

    dsn = args.ctx.dsn
    imported = []
    if args.results_db:
        from perfguard.store.report import reports_in_results_db

        imported = reports_in_results_db(args.results_db, args.state_dir / "imported")
    with spool_lock(args.state_dir) if args.spool else nullcontext():
        reports = [*imported, *args.reports] + (spooled(args.state_dir) if args.spool else [])
        if not reports:
            print("nothing to ingest" + (" (spool is empty)" if args.spool else ""))
            return 0
        results = ingest_paths(args.state_dir, dsn, reports,
                               RunMeta(args.trigger, tuple(args.label)))
    _judge_stored(dsn, [r.run_id for r in results if r.stored])
    return _print_ingest(results)


def _judge_stored(dsn: str, run_ids: list[int]) -> None:
    """Runs just stored are judged and their verdicts recorded (oldest first: each reads
    the history before it); the data is stored whether or not this succeeds."""
    from perfguard.judge import run_findings
    from perfguard.store import db

    if run_ids:
        with db.connect(dsn) as conn:
            for run_id in run_ids:
                run_findings.judge_and_record(conn, run_id)


def _print_ingest(results) -> int:
    for r in results:
        if r.stored:
            print(f"{r.report}: stored as run {r.run_id} ({r.testcases} test cases, "
                  f"{r.samples} samples)")
            if r.dropped:
                print(f"  {len(r.dropped)} curve point(s) not stored (not finite): "
                      + "; ".join(r.dropped[:3]) + ("; …" if len(r.dropped) > 3 else ""))
        elif r.run_id is not None:
            print(f"{r.report}: {r.message} (run {r.run_id}); nothing changed")
        else:
            print(f"perfguard: error: {r.report}: {r.message}", file=sys.stderr)
    return 0 if all(r.run_id is not None for r in results) else 1


def _add_spool(sub: argparse._SubParsersAction) -> None:
    spl = sub.add_parser(
        "spool", help="reports not stored: list them, purge the rejected ones",
        description="STATE/spool holds reports waiting to be stored (`perfguard ingest "
                    "--spool` retries them) and, under rejected/, those that never can be "
                    "(all together kept up to $PERFGUARD_REJECTED_MAX_MB, default 16 MiB: "
                    "the oldest removed first and said, a larger copy cut off and said in "
                    "its reason).")
    actions = spl.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="every report in the spool: waiting or rejected, size, "
                       "reason").set_defaults(func=cmd_spool_list)
    purge = actions.add_parser(
        "purge", help="remove the rejected reports (--waiting: also those waiting)")
    purge.add_argument("--waiting", action="store_true",
                       help="also remove the reports waiting to be stored: they are lost")
    purge.add_argument("--older-than", type=float, metavar="DAYS",
                       help="only those kept for more than DAYS days")
    purge.set_defaults(func=cmd_spool_purge)


def cmd_spool_list(args: argparse.Namespace) -> int:
    from perfguard.store.spool import kept

    found = kept(args.state_dir)
    for report in found:
        print(report.line)
    waiting = sum(1 for report in found if not report.rejected)
    print(f"{waiting} waiting to be stored, {len(found) - waiting} rejected"
          + (" (`perfguard ingest --spool` retries the waiting ones)" if waiting else ""))
    return 0


def cmd_spool_purge(args: argparse.Namespace) -> int:
    from perfguard.store.spool import purge, spool_lock

    if args.older_than is not None and not args.older_than >= 0:
        raise UsageError(f"--older-than {args.older_than:g}: days cannot be negative")
    with spool_lock(args.state_dir):  # not while `ingest --spool` moves them
        gone = purge(args.state_dir, args.waiting, args.older_than)
    for report in gone:
        print(f"removed {report.path}")
    print(f"{len(gone)} report(s) removed ({sum(r.size for r in gone) / 2 ** 20:.1f} MiB)")
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    _add_db(sub)
    _add_ingest(sub)
    _add_spool(sub)
