"""The `perfguard` command line: one subcommand per job, each a thin call into the package."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from perfguard import __version__, paths
from perfguard.errors import PerfguardError


def _add_cluster(sub: argparse._SubParsersAction) -> None:
    cluster = sub.add_parser(
        "cluster", help="start, stop or inspect the embedded Slurm cluster and PostgreSQL",
        description="The embedded default: slurmctld, slurmdbd (MariaDB accounting), munge, "
                    "N virtual slurmd nodes in their own UTS/mount namespaces, and a local "
                    "PostgreSQL, all with state under one directory.")
    actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("up", help="start every component (idempotent); waits until "
                                          "nodes are idle and PostgreSQL accepts connections")
    start.add_argument("--nodes", type=int, default=4, help="virtual compute nodes (default 4)")
    start.add_argument("--port-base", type=int, default=16800,
                       help="first of the ports the daemons use (default 16800)")
    start.set_defaults(func=cmd_cluster_up)
    actions.add_parser("down", help="stop every process the cluster started").set_defaults(
        func=cmd_cluster_down)
    actions.add_parser("status", help="print each component's state and the DSN").set_defaults(
        func=cmd_cluster_status)
    actions.add_parser("env", help="print shell exports for Slurm clients and the DSN"
                       ).set_defaults(func=cmd_cluster_env)


def cmd_cluster_up(args: argparse.Namespace) -> int:
    from perfguard import cluster

    layout = cluster.up(args.state_dir, args.nodes, args.port_base)
    print(f"embedded cluster up: {layout.nodes} nodes, state in {layout.state}")
    print(f"  export SLURM_CONF={layout.slurm_conf}")
    print(f"  PostgreSQL DSN: {layout.dsn}")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    from perfguard import cluster

    stopped = cluster.down(args.state_dir)
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from perfguard import cluster

    components = cluster.status(args.state_dir)
    for comp in components:
        state = "running" if comp.running else "stopped"
        pids = ",".join(str(p) for p in comp.pids[:4]) + ("…" if len(comp.pids) > 4 else "")
        print(f"{comp.name:<11} {state:<8} {('pid ' + pids) if pids else '':<22} {comp.detail}")
    return 0 if all(c.running for c in components) else 3


def cmd_cluster_env(args: argparse.Namespace) -> int:
    from perfguard.cluster import current_layout

    layout = current_layout(args.state_dir)
    print(f"export SLURM_CONF={layout.slurm_conf}")
    print(f"export PERFGUARD_DSN={layout.dsn}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfguard",
        description="Performance regression testing for Slurm clusters with InfiniBand and "
                    "GPUs: run ReFrame checks, store results in PostgreSQL, compare them with "
                    "reference thresholds.")
    parser.add_argument("--version", action="version", version=f"perfguard {__version__}")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="state directory (default: $PERFGUARD_STATE_DIR, "
                             "$XDG_STATE_HOME/perfguard, or .state in the checkout)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_cluster(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.state_dir = (args.state_dir or paths.state_dir()).resolve()
    try:
        return args.func(args)
    except PerfguardError as exc:
        print(f"perfguard: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("perfguard: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
