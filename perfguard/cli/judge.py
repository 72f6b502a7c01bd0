"""`perfguard verdict`, `changepoints` and `fingerprint diff`: what a stored run says."""

from __future__ import annotations

import argparse

from perfguard.cli.options import DSN, connect
from perfguard.errors import UsageError


def _add_verdict(sub: argparse._SubParsersAction) -> None:
    ver = sub.add_parser("verdict", parents=[DSN],
        help="a run's stored verdict (exit 1 on fail): as judged, with what changed since "
             "(acknowledged, accepted) shown over it",
        description="A run's verdict as it was judged and stored (at ingest, by `perfguard "
                    "run` or the nightly), never rewritten by a later ack, accept or "
                    "threshold; what changed since is shown over it. --rejudge judges the "
                    "run again and stores that as a new verdict with its time (the earlier "
                    "one kept).")
    ver.add_argument("run", nargs="?", default=None,
                     help="run id, session uuid or label (default: latest)")
    ver.add_argument("--baseline", help="compare with this run (id, uuid or label)")
    ver.add_argument("--explain", metavar="SUBJECT",
                     help="each finding naming SUBJECT (a node, HCA, GPU, leaf or the "
                          "finding's subject; a line alone: part of its name): its lines' "
                          "evidence, how they combine, the "
                          "bar and why it paged or not; each line whose name contains it: "
                          "its history, noise estimate, rule and decision")
    ver.add_argument("--rejudge", action="store_true",
                     help="judge the run again with today's thresholds, rules, "
                          "acknowledgements and accepted levels, and store it as a new "
                          "verdict (the earlier one is kept)")
    ver.set_defaults(func=cmd_verdict)


def cmd_verdict(args: argparse.Namespace) -> int:
    from perfguard.judge import coverage as cov
    from perfguard.judge import fingerprint as fp
    from perfguard.judge import run_findings
    from perfguard.judge import verdict as vd
    from perfguard.present import text as tx

    with connect(args) as conn:
        run_id = vd.resolve_run(conn, args.run)
        lines = run_findings.judge_and_record(conn, run_id) if args.rejudge \
            else run_findings.stored_verdict(conn, run_id)
        found = run_findings.stored(conn, run_id)
        result = vd.outcome(conn, run_id)
        judged = vd.judgements(conn, run_id)
        over = run_findings.overlay(conn, run_id, judged[-1].at if judged else None, found)
        if args.baseline:
            before = vd.resolve_run(conn, args.baseline)
            vd.with_baseline(lines, run_findings.stored_verdict(conn, before))
        explained = _explained(conn, run_id, lines, args.explain, args.rejudge)
        slow = fp.links_below_maximum(fp.fingerprints(conn, run_id))
        cost = cov.run_cost(conn, run_id)
    print(f"run {run_id}" + (f": as {judged[-1].when()}" if judged else ""))
    if cost is not None:
        print(f"  {tx.cost_line(cost)}")
    print("".join(tx.fit(f"  earlier: {j.said()}", tx.TABLE_WIDTH) + "\n"
                  for j in judged[:-1]), end="")
    if args.explain is not None:
        if not explained:
            raise UsageError(f"no finding of run {run_id} names {args.explain!r} (a node, "
                             f"device, leaf or line of one), and no line is named like it; "
                             f"`perfguard verdict {run_id}` lists its findings and lines")
        print("\n\n".join(explained))
    else:
        if found:
            print(tx.findings(found, len(lines), over) + "\n")
        print(tx.verdict_table(lines, show_baseline=bool(args.baseline)))
        if slow:
            print("\n" + tx.slow_links(slow))
    if over.get("*"):
        print("\n".join(over["*"]) + f"\n(`perfguard verdict {run_id} --rejudge` judges "
                                      f"the run again with them)")
    print(tx.run_line(result, run_id, lines))
    return result.exit_code


def _explained(conn, run_id: int, stored: list, text: str | None, rejudged: bool
               ) -> list[str]:
    """--explain: each finding that names ``text`` (``Finding.explained_by``: its subject,
    a node, device, leaf or line of it as `perfguard ack` takes it, a line alone by part
    of its name) and each line named like it, as judged now
    (a line: its history, noise, rule), each with what was stored where that differs (a
    finding stored that is none now: said, as stored)."""
    from perfguard.judge import findings as fd
    from perfguard.judge import run_findings
    from perfguard.judge import verdict as vd
    from perfguard.present import text as tx

    if text is None:
        return []
    now = stored if rejudged else vd.verdict(conn, run_id)
    policy = run_findings.policy()
    found, _ = run_findings.find(conn, run_id, now, policy)
    named = [f for f in found if f.explained_by(text)]
    chosen = [line for line in now if text in tx.name_of(line)]
    vd.with_key_points(conn, run_id, chosen)  # which curve point each key figure is
    kept = {line.key: line for line in stored}
    recorded = {row["subject"]: row for row in run_findings.stored(conn, run_id)}
    explained = {f.subject for f in named}
    only_stored = [row for subject, row in recorded.items()
                   if subject not in explained and fd.explains(text, row["kind"], subject,
                                                               None)]
    return ([tx.explain_finding(f, len(now), policy.alpha)
             + tx.finding_as_stored(recorded.get(f.subject), f) for f in named]
            + [tx.finding_only_stored(row, run_id) for row in only_stored]
            + [tx.explain(line, kept.get(line.key), run_id) for line in chosen])


def _add_ack(sub: argparse._SubParsersAction) -> None:
    ack = sub.add_parser(
        "ack", parents=[DSN], help="acknowledge a finding's cause: known, being fixed",
        description="Name an open finding (its subject, as `perfguard verdict` prints it: "
                    "node37:mlx5_1, node12, leaf3, a line's name) or a node, device, leaf or "
                    "line one contains (`ack node1` mutes `node1:lo, node2:lo`). Its findings "
                    "stay in later verdicts, the report and Grafana with who, when and why, "
                    "and stop paging until the acknowledgement is cleared; verdicts stored "
                    "already are not rewritten.")
    ack.add_argument("subject", nargs="?", help="the finding's cause")
    ack.add_argument("--system", default=None,
                     help="the system the cause belongs to (default: the one system whose "
                          "open findings it names)")
    ack.add_argument("--reason", default="", help="why (shown with the finding)")
    group = ack.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true",
                       help="the acknowledgements in force, then those cleared (kept)")
    group.add_argument("--clear", type=int, metavar="ID", help="clear one: its cause pages "
                                                              "again")
    ack.set_defaults(func=cmd_ack)


def cmd_ack(args: argparse.Namespace) -> int:
    from perfguard.judge import run_findings

    with connect(args) as conn:
        if args.list:
            acks = run_findings.acknowledgements(conn)
            for ack_id, system, subject, who, at, reason in acks:
                print(f"#{ack_id} {system} {subject}: by {who} on {at:%Y-%m-%d}: {reason}")
            if not acks:
                print("none (`perfguard ack SUBJECT --reason WHY` acknowledges a finding)")
            for ack_id, system, subject, who, at, reason, by, when in \
                    run_findings.cleared_acknowledgements(conn):
                print(f"cleared #{ack_id} {system} {subject}: by {who} on {at:%Y-%m-%d}: "
                      f"{reason}; cleared by {by} on {when:%Y-%m-%d}")
            return 0
        if args.clear is not None:
            print(f"cleared #{args.clear} ({run_findings.clear(conn, args.clear)}): it pages "
                  f"again from the next verdict on")
            return 0
        if not args.subject:
            raise UsageError("name the finding's cause (or --list, --clear ID)")
        done = run_findings.acknowledge(conn, args.system, args.subject, args.reason)
    print(f"acknowledged #{done.id}: {args.subject} on {done.system}; from the next verdict "
          f"on it mutes: {', '.join(done.mutes) or 'no open finding whole'}")
    if done.named:
        print(f"still pages: {'; '.join(done.named)} (only some of its lines are "
              f"{args.subject}: acknowledge its cause to mute it)")
    print(f"verdicts stored already stay as judged (`perfguard verdict RUN` shows the "
          f"acknowledgement over them); `perfguard ack --clear {done.id}` undoes it")
    return 0


def _add_accept(sub: argparse._SubParsersAction) -> None:
    acc = sub.add_parser(
        "accept", parents=[DSN], help="accept a new level after a planned change",
        description="The lines of a cause (a node, node:hca, a line's name as `perfguard "
                    "verdict` prints it, or '*' for every line of the run's system) are "
                    "judged against the new level from run RUN on, from the next verdict "
                    "on: against the runs accepted until it has 3 runs of its own, then "
                    "against those, so a second fault pages. Who, when and why are shown "
                    "with each of those lines; verdicts stored already are not rewritten. "
                    "A level covers the lines run RUN measured (or earlier runs), never a "
                    "check that first ran later; --clear ID withdraws it (kept, listed).")
    acc.add_argument("subject", nargs="?", help="the cause whose level is accepted")
    acc.add_argument("--from-run", help="the first run at the new level (id, uuid or label)")
    acc.add_argument("--reason", default="", help="why (shown with its lines)")
    group = acc.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true",
                       help="the accepted levels, cleared ones with who cleared them")
    group.add_argument("--clear", type=int, metavar="ID",
                       help="withdraw one (kept in the list): from the next verdict on its "
                            "lines are judged against their history as before")
    acc.set_defaults(func=cmd_accept)


def cmd_accept(args: argparse.Namespace) -> int:
    from perfguard.judge import verdict as vd

    with connect(args) as conn:
        if args.list:
            levels = vd.accepted(conn)
            for level_id, subject, from_run, who, at, reason, by, when in levels:
                cleared = f"; cleared by {by} on {when:%Y-%m-%d}" if when else ""
                print(f"#{level_id} {subject} from run {from_run}: by {who} on "
                      f"{at:%Y-%m-%d}: {reason}{cleared}")
            if not levels:
                print("none (`perfguard accept LINES --from-run N --reason WHY` accepts a "
                      "new level)")
            return 0
        if args.clear is not None:
            print(f"cleared #{args.clear} ({vd.clear_accepted(conn, args.clear)}): from the "
                  f"next verdict on its lines are judged against their history as before; "
                  f"verdicts stored already stay as judged (`perfguard verdict RUN` shows "
                  f"the clearing over them)")
            return 0
        if not args.subject or not args.from_run or not args.reason.strip():
            raise UsageError("give the cause, --from-run RUN and --reason (or --list, "
                             "--clear ID)")
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
