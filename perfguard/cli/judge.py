"""`perfguard verdict`, `changepoints` and `fingerprint diff`: what a stored run says."""

from __future__ import annotations

import argparse

from perfguard.cli.options import DSN, connect
from perfguard.errors import UsageError


def _add_verdict(sub: argparse._SubParsersAction) -> None:
    ver = sub.add_parser("verdict", parents=[DSN],
        help="a run's results against thresholds and history (exit 1 on fail or regression)")
    ver.add_argument("run", nargs="?", default=None,
                     help="run id, session uuid or label (default: latest)")
    ver.add_argument("--baseline", help="compare with this run (id, uuid or label)")
    ver.add_argument("--explain", metavar="TEXT",
                     help="for each line whose name contains TEXT: its history, noise "
                          "estimate, rule and decision")
    ver.set_defaults(func=cmd_verdict)


def cmd_verdict(args: argparse.Namespace) -> int:
    from perfguard.judge import fingerprint as fp
    from perfguard.judge import run_findings
    from perfguard.judge import verdict as vd
    from perfguard.present import text as tx

    with connect(args) as conn:
        run_id = vd.resolve_run(conn, args.run)
        lines = vd.judge_and_record(conn, run_id)  # again: thresholds or rules may change
        found = run_findings.stored(conn, run_id)
        result = vd.outcome(conn, run_id)
        if args.baseline:
            before = vd.resolve_run(conn, args.baseline)
            vd.with_baseline(lines, vd.stored_verdict(conn, before))
        chosen = [line for line in lines if args.explain in tx.name_of(line)] \
            if args.explain is not None else []
        vd.with_key_points(conn, run_id, chosen)  # which curve point each key figure is
        slow = fp.links_below_maximum(fp.fingerprints(conn, run_id))
    print(f"run {run_id}")
    if args.explain is not None:
        if not chosen:
            raise UsageError(f"no line of run {run_id} is named like {args.explain!r}")
        print("\n\n".join(tx.explain(line) for line in chosen))
    else:
        if found:
            print(tx.findings(found, len(lines)) + "\n")
        print(tx.verdict_table(lines, show_baseline=bool(args.baseline)))
        if slow:
            print("\n" + tx.slow_links(slow))
    print(result.line(run_id))
    return result.exit_code


def _add_ack(sub: argparse._SubParsersAction) -> None:
    ack = sub.add_parser(
        "ack", parents=[DSN], help="acknowledge a finding's cause: known, being fixed",
        description="A finding whose cause (its subject, as `perfguard verdict` prints it: "
                    "node37:mlx5_1, node12, leaf3, a line's name) is acknowledged on the "
                    "system stays in the verdict, the report and Grafana with who, when and "
                    "why, and stops paging until the acknowledgement is cleared.")
    ack.add_argument("subject", nargs="?", help="the finding's cause")
    ack.add_argument("--system", default="local",
                     help="the system the cause belongs to (default: local)")
    ack.add_argument("--reason", default="", help="why (shown with the finding)")
    group = ack.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true", help="the active acknowledgements")
    group.add_argument("--clear", type=int, metavar="ID", help="clear one: its cause pages "
                                                              "again")
    ack.set_defaults(func=cmd_ack)


def cmd_ack(args: argparse.Namespace) -> int:
    from perfguard.judge import run_findings

    with connect(args) as conn:
        if args.list:
            for ack_id, system, subject, who, at, reason in run_findings.acknowledgements(conn):
                print(f"#{ack_id} {system} {subject}: by {who} on {at:%Y-%m-%d}: {reason}")
            return 0
        if args.clear is not None:
            print(f"cleared #{args.clear} ({run_findings.clear(conn, args.clear)}): it pages "
                  f"again")
            return 0
        if not args.subject:
            raise UsageError("name the finding's cause (or --list, --clear ID)")
        ack_id = run_findings.acknowledge(conn, args.system, args.subject, args.reason)
    print(f"acknowledged #{ack_id}: {args.subject} on {args.system} stops paging "
          f"(`perfguard ack --clear {ack_id}` undoes it)")
    return 0


def _add_accept(sub: argparse._SubParsersAction) -> None:
    acc = sub.add_parser(
        "accept", parents=[DSN], help="accept a new level after a planned change",
        description="The lines of a cause (a node, node:hca, a line's name as `perfguard "
                    "verdict` prints it, or '*' for every line of the run's system) are "
                    "judged against their history from run RUN on, the new level; until it "
                    "is 8 runs long they are 'not yet judged'. Who, when and why are shown "
                    "with each of those lines.")
    acc.add_argument("subject", nargs="?", help="the cause whose level is accepted")
    acc.add_argument("--from-run", help="the first run at the new level (id, uuid or label)")
    acc.add_argument("--reason", default="", help="why (shown with its lines)")
    acc.add_argument("--list", action="store_true", help="the accepted levels")
    acc.set_defaults(func=cmd_accept)


def cmd_accept(args: argparse.Namespace) -> int:
    from perfguard.judge import verdict as vd

    with connect(args) as conn:
        if args.list:
            for level_id, subject, from_run, who, at, reason in vd.accepted(conn):
                print(f"#{level_id} {subject} from run {from_run}: by {who} on "
                      f"{at:%Y-%m-%d}: {reason}")
            return 0
        if not args.subject or not args.from_run or not args.reason.strip():
            raise UsageError("give the cause, --from-run RUN and --reason (or --list)")
        run_id = vd.resolve_run(conn, args.from_run)
        vd.accept(conn, args.subject, run_id, args.reason)
    print(f"accepted: {args.subject} is judged against its level from run {run_id} on")
    return 0


def _add_changepoints(sub: argparse._SubParsersAction) -> None:
    cpt = sub.add_parser("changepoints", parents=[DSN],
        help="find and store where each series' level changed (E-Divisive), and what "
             "changed in the environment there")
    cpt.add_argument("--system", help="only this system (default: all)")
    cpt.set_defaults(func=cmd_changepoints)


def cmd_changepoints(args: argparse.Namespace) -> int:
    from perfguard.judge import changepoints

    with connect(args) as conn:
        found = changepoints.detect(conn, args.system)
    for point in found:
        print(point.describe())
    print(f"{len(found)} change points stored"
          + (f" ({sum(p.regression for p in found)} regressions)" if found else ""))
    return 0


def _add_fingerprint(sub: argparse._SubParsersAction) -> None:
    fpr = sub.add_parser("fingerprint", help="nodes' environment recorded with each run")
    actions = fpr.add_subparsers(dest="action", required=True, metavar="ACTION")
    dif = actions.add_parser("diff", parents=[DSN],
                             help="what changed between two runs (firmware, driver, stack…)")
    dif.add_argument("run_a", help="run id, session uuid or label (before)")
    dif.add_argument("run_b", help="run id, session uuid or label (after)")
    dif.set_defaults(func=cmd_fingerprint_diff)


def cmd_fingerprint_diff(args: argparse.Namespace) -> int:
    from perfguard.judge import fingerprint as fp
    from perfguard.judge.verdict import resolve_run
    from perfguard.present import text as tx

    with connect(args) as conn:
        before = fp.fingerprints(conn, resolve_run(conn, args.run_a))
        after = fp.fingerprints(conn, resolve_run(conn, args.run_b))
    print(tx.fingerprint_changes(fp.diff(before, after)))
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    _add_verdict(sub)
    _add_ack(sub)
    _add_accept(sub)
    _add_changepoints(sub)
    _add_fingerprint(sub)
