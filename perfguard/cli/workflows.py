"""`perfguard nightly` and `perfguard upgrade-check`."""

from __future__ import annotations

import argparse

from perfguard.cli.options import DSN, job_option_arguments, job_options, job_options_option


def _add_workflows(sub: argparse._SubParsersAction) -> None:
    nig = sub.add_parser(
        "nightly", parents=[DSN], help="run the nightly suite, ingest, verdict, notify",
        description="Runs the checks tagged 'nightly' (or --tag), stores the run with trigger "
                    "'nightly', prints the verdict and exits 1 on any failure. --print-scrontab "
                    "/ --install-scrontab schedule it from the cluster itself (Slurm scrontab).")
    nig.add_argument("--system", default="local", help="ReFrame system to run on (default: local)")
    nig.add_argument("-t", "--tag", action="append", default=None,
                     help="check tags to run (default: nightly)")
    nig.add_argument("--label", action="append", default=[], help="label stored with the run")
    nig.add_argument("--webhook", help="POST a JSON summary to this URL")
    nig.add_argument("--mail-cmd", help="pipe the summary to this command, e.g. "
                                        "\"mail -s 'perfguard nightly' hpc-admins@site\"")
    nig.add_argument("--schedule", default="30 2 * * *",
                     help="cron schedule for the scrontab entry (default: 02:30 daily)")
    nig.add_argument("--partition",
                     help="partition the scheduled driver job runs in (scrontab or "
                          "--submit-recurring): a service or login partition, never one the "
                          "nightly measures (default on the embedded cluster: service)")
    group = nig.add_mutually_exclusive_group()
    group.add_argument("--print-scrontab", action="store_true",
                       help="print the scrontab entry instead of running")
    group.add_argument("--install-scrontab", action="store_true",
                       help="install (or replace) the entry in your scrontab")
    group.add_argument("--remove-scrontab", action="store_true",
                       help="remove perfguard's entry from your scrontab")
    group.add_argument("--submit-recurring", action="store_true",
                       help="schedule through Slurm without scrontab: a batch job that "
                            "starts at the next --schedule time and resubmits itself")
    group.add_argument("--cancel-recurring", action="store_true",
                       help="stop the recurring nightly: no next night; a night in "
                            "progress finishes (its report written) unless --now")
    group.add_argument("--status", action="store_true",
                       help="what is scheduled where: the recurring job and perfguard's "
                            "scrontab entry, the next night, a night running now, the last "
                            "night's outcome")
    nig.add_argument("--now", action="store_true",
                     help="with --cancel-recurring: stop the night in progress too (what "
                          "finished is stored and its report written)")
    budget = nig.add_argument_group(
        "budget", "measure the machine node by node within a budget a night (the sweep's "
                  "loopbacks on the nodes measured longest ago, idle ones first; "
                  "docs/operations.md)")
    budget.add_argument("--budget", metavar="NODE_HOURS", type=float,
                        help="node-hours this night may spend (default: the site's "
                             "nightly_budget in sweep.yaml, where --budget-default is given)")
    budget.add_argument("--budget-default", action="store_true",
                        help="a budget nightly with the site's nightly_budget")
    budget.add_argument("--budget-partition", metavar="PARTITION",
                        help="the Slurm partition whose nodes it measures (default: "
                             "Slurm's default partition)")
    budget.add_argument("--drain", action="store_true",
                        help="drain a node the budget nightly blames (reason "
                             "'perfguard: …'); one measurement, no retest")
    job_options_option(nig)
    nig.add_argument("--at", help="with --submit-recurring: first start (sbatch --begin "
                                  "value, e.g. now+60) instead of the next --schedule time")
    nig.set_defaults(func=cmd_nightly)
    upg = sub.add_parser(
        "upgrade-check", parents=[DSN],
        help="after a driver/firmware upgrade: measure every upgraded node, judge each "
             "against its own level before and its peers",
        description="With --nodes: measures every listed node on its own (the fabric "
                    "sweep's loopback per HCA and every pair among the listed nodes and "
                    "--peers, a one-node Himeno, NCCL on the node's GPUs where it has "
                    "some), then the checks tagged 'acceptance' once on the listed nodes; "
                    "prints one row per node (what changed in its fingerprint, its verdict, "
                    "the figure that failed with its own level before the upgrade) and "
                    "exits 1 naming the failed nodes. Without --nodes: the acceptance "
                    "checks against --baseline. Mark a baseline with `perfguard "
                    "upgrade-check --nodes ALL --label pre-upgrade` (or `perfguard run "
                    "--label pre-upgrade`).")
    upg.add_argument("--baseline", help="run id, session uuid or label: each node's own "
                                        "level is its values up to this run (default with "
                                        "--nodes: every earlier run)")
    upg.add_argument("--nodes", help="Slurm hostlist of the upgraded nodes, e.g. node[3-4]: "
                                     "each is measured and judged on its own")
    upg.add_argument("--peers", help="with --nodes: not-upgraded nodes the upgraded ones are "
                                     "paired with and compared to, e.g. node[1-2]")
    upg.add_argument("--label", help="a label of the check's runs; batches of one rolling "
                                     "upgrade share it (--summary LABEL)")
    upg.add_argument("--summary", metavar="LABEL",
                     help="list every node of the upgrade LABEL (--nodes, else every node "
                          "of the partitions its batches measured): measured and passed, "
                          "failed, or not yet measured; runs nothing")
    upg.add_argument("--drain", action="store_true",
                     help="with --nodes: DRAIN the nodes that failed, the reason beginning "
                          "'perfguard:'")
    upg.add_argument("--resume", action="store_true",
                     help="with --nodes: listed nodes that are drained are RESUMEd for the "
                          "check (use a maintenance --reservation); those that pass stay in "
                          "service, those that fail are drained again")
    upg.add_argument("--himeno-size", default="M", metavar="SIZE",
                     help="grid of the one-node Himeno (XS, S, M, L, XL; default M)")
    upg.add_argument("-S", "--setvar", action="append", default=[],
                     help="passed to ReFrame for every run of the check, e.g. "
                          "FabricSweepCheck.iterations=100")
    upg.add_argument("--system", default="local", help="ReFrame system to run on (default: local)")
    upg.add_argument("-t", "--tag", action="append", default=None,
                     help="check tags to run (default: acceptance)")
    upg.add_argument("--accept", metavar="REASON",
                     help="end by accepting the results as the new level (the upgrade was "
                          "meant to change them): later runs are judged against this run")
    job_options_option(upg)
    upg.set_defaults(func=cmd_upgrade_check)


def _nightly_arguments(args: argparse.Namespace) -> list[str]:
    forwarded = ["--system", args.system]
    for tag in args.tag or []:
        forwarded += ["--tag", tag]
    for label in args.label:
        forwarded += ["--label", label]
    if args.webhook:
        forwarded += ["--webhook", args.webhook]
    if args.mail_cmd:
        forwarded += ["--mail-cmd", args.mail_cmd]
    if args.budget is not None:
        forwarded += ["--budget", f"{args.budget:g}"]
    if args.budget_default:
        forwarded += ["--budget-default"]
    if args.budget_partition:
        forwarded += ["--budget-partition", args.budget_partition]
    if args.drain:
        forwarded += ["--drain"]
    return forwarded + job_option_arguments(job_options(args))  # every night


def cmd_nightly(args: argparse.Namespace) -> int:
    from perfguard.errors import UsageError
    from perfguard.workflows import nightly, schedule

    if args.status:
        print(schedule.status(args.ctx))
        return 0
    if args.print_scrontab or args.install_scrontab or args.submit_recurring:
        args.partition = schedule.driver_partition(args.ctx, args.system, args.partition)
    if args.print_scrontab or args.install_scrontab:
        entry = schedule.scrontab_entry(args.ctx, args.schedule,
                                        _nightly_arguments(args), args.partition)
        if args.install_scrontab:
            schedule.install_scrontab(args.ctx, entry)
            print("installed in your scrontab (`scrontab -l` shows it):")
        print(entry, end="")
        return 0
    if args.submit_recurring:
        print(schedule.submit_recurring(args.ctx, args.schedule,
                                        _nightly_arguments(args), args.at, args.partition))
        return 0
    if args.now and not args.cancel_recurring:
        raise UsageError("--now goes with --cancel-recurring (it stops the night in progress)")
    if args.cancel_recurring:
        print(schedule.cancel_recurring(args.ctx, stop_running=args.now))
        return 0
    if args.remove_scrontab:
        schedule.install_scrontab(args.ctx, None)
        print("removed perfguard's entry from your scrontab")
        return 0
    if args.budget is not None or args.budget_default:
        return _budget_nightly(args)
    if args.drain or args.budget_partition:
        raise UsageError("--drain and --budget-partition go with --budget (or "
                         "--budget-default)")
    outcome = nightly.nightly(args.ctx, tuple(args.tag or ["nightly"]), args.system,
                              tuple(args.label), job_options(args))
    print(outcome.text)
    print(outcome.run_line)
    status = outcome.status
    if args.webhook:
        nightly.notify_webhook(args.webhook, nightly.summary(outcome, args.system))
    if args.mail_cmd:
        nightly.notify_mail(args.mail_cmd, f"perfguard nightly {status}", outcome.text)
    return outcome.exit_code


def _budget_nightly(args: argparse.Namespace) -> int:
    from perfguard.errors import UsageError
    from perfguard.workflows import coverage, nightly

    if args.tag:
        raise UsageError("--budget measures the per-node checks (the sweep's loopbacks); "
                         "--tag goes with the ordinary nightly")
    outcome = coverage.budget_nightly(args.ctx, args.system, args.budget,
                                      args.budget_partition, tuple(args.label),
                                      job_options(args), args.drain)
    print(outcome.text)
    status = "FAIL" if outcome.exit_code else "PASS"
    print(f"run {outcome.run_id}: {status}")
    if args.mail_cmd:
        nightly.notify_mail(args.mail_cmd, f"perfguard nightly {status}", outcome.text)
    return outcome.exit_code


def cmd_nodes(args: argparse.Namespace) -> int:
    from perfguard.workflows import coverage

    print(coverage.nodes_listing(args.ctx, args.system, args.partition))
    return 0


def cmd_upgrade_check(args: argparse.Namespace) -> int:
    from perfguard.errors import UsageError
    from perfguard.workflows import upgrade

    if args.summary is not None:
        text, status = upgrade.upgrade_summary(args.ctx, args.summary, args.nodes)
        print(text)
        return status
    if args.accept is not None and not args.accept.strip():
        raise UsageError("--accept needs the reason the new level is right")
    if not args.nodes and (args.peers or args.drain or args.resume):
        raise UsageError("--peers, --drain and --resume go with --nodes (the upgraded "
                         "nodes, each measured and judged on its own)")
    outcome = upgrade.upgrade_check(args.ctx, upgrade.UpgradeRequest(
        args.baseline, args.nodes, tuple(args.tag or ["acceptance"]), args.system,
        args.accept, job_options(args), args.peers, args.drain, args.resume, args.label,
        tuple(args.setvar), args.himeno_size))
    print(outcome.text)
    print(outcome.run.run_line)
    return outcome.exit_code


def _add_nodes(sub: argparse._SubParsersAction) -> None:
    nodes = sub.add_parser(
        "nodes", parents=[DSN], help="each node's state and when it was last measured",
        description="Lists each node of a Slurm partition with its state and how long ago "
                    "a per-node check (the sweep's loopbacks: `perfguard nightly --budget`, "
                    "`perfguard sweep`) and any check measured it, the devices measured "
                    "and the last run; the longest unmeasured first.")
    nodes.add_argument("--system", default="local",
                       help="ReFrame system whose runs count (default: local)")
    nodes.add_argument("--partition", help="Slurm partition (default: Slurm's default)")
    nodes.set_defaults(func=cmd_nodes)


def add(sub: argparse._SubParsersAction) -> None:
    _add_workflows(sub)
    _add_nodes(sub)
