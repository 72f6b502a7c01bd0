"""`perfguard sweep`: the fabric sweep."""

from __future__ import annotations

import argparse

from perfguard.cli.options import DSN, job_options, job_options_option


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    swp = sub.add_parser(
        "sweep", parents=[DSN],
        help="find the slow node, HCA or link: every node pair once, under Slurm",
        description="Runs FabricSweepCheck in one allocation: each node's HCA in loopback, "
                    "then every node pair once in rounds of disjoint pairs (circle method) "
                    "or, where the leaf switches are known, every pair within each leaf "
                    "(all leaves at once) and one pair per leaf pair across the spine; "
                    "retests failing pairs one at a time; blames nodes, HCAs, links and "
                    "leaves with their evidence (site_config/sweep.yaml sets the criteria). "
                    "Exit 1 when anything is blamed.")
    swp.add_argument("--system", default="local", help="ReFrame system (default: local)")
    swp.add_argument("--nodes", help="Slurm hostlist of the nodes to sweep (default: the "
                                     "partition's, as many as it has)")
    swp.add_argument("--topology", default="slurm", metavar="SOURCE",
                     help="leaf switches: 'slurm' (default: Slurm's tree topology, "
                          "`scontrol show topology`, where it has one), a topology.conf or "
                          "ibnetdiscover output file, or 'none' (every node pair)")
    swp.add_argument("-S", "--setvar", action="append", default=[],
                     help="passed to ReFrame for the sweep and its retests, e.g. "
                          "FabricSweepCheck.time_limit=2h")
    swp.add_argument("--drain", action="store_true",
                     help="DRAIN blamed nodes, the reason beginning 'perfguard:' (only after "
                          "a retest confirmed them)")
    swp.add_argument("--resume", action="store_true",
                     help="only RESUME the nodes perfguard drained (others are left alone)")
    job_options_option(swp)
    swp.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from perfguard.workflows import sweep as workflow

    if args.resume:
        resumed = workflow.resume_drained(args.ctx)
        print(f"resumed: {', '.join(resumed)}" if resumed else
              "no node is drained by perfguard")
        return 0
    outcome = workflow.fabric_sweep(args.ctx, args.system, args.nodes, args.drain,
                                    args.topology, tuple(args.setvar), job_options(args))
    print(outcome.text)
    return 1 if outcome.findings else 0


def add(sub: argparse._SubParsersAction) -> None:
    _add_sweep(sub)
