"""`perfguard cluster`: the embedded Slurm cluster and PostgreSQL."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from pathlib import Path

from perfguard.cli.options import port_base_option, slurm_prefix_option


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
    start.add_argument("--leaves", type=int, default=0,
                       help="leaf switches in Slurm's tree topology (topology.conf), the "
                            "nodes dealt out in order (default 0: none)")
    slurm_prefix_option(start)
    port_base_option(start)
    start.set_defaults(func=cmd_cluster_up)
    stop = actions.add_parser("down", help="stop every process the cluster started")
    stop.add_argument("--purge", action="store_true",
                      help="also remove its state: the state directory and the database "
                           "files it keeps under /var/lib/perfguard")
    stop.set_defaults(func=cmd_cluster_down)
    actions.add_parser("status", help="print each component's state and the DSN").set_defaults(
        func=cmd_cluster_status)
    actions.add_parser("env", help="print shell exports for Slurm clients and the DSN"
                       ).set_defaults(func=cmd_cluster_env)


def cmd_cluster_up(args: argparse.Namespace) -> int:
    from perfguard import cluster

    layout = cluster.up(args.state_dir, args.nodes, args.port_base, args.leaves,
                        args.slurm_prefix)
    print(f"embedded cluster up: {layout.nodes} nodes"
          + (f" on {layout.leaves} leaf switches" if layout.leaves else "")
          + f", {cluster.slurm_version(layout)}"
          + (f" from {layout.slurm_prefix}" if layout.slurm_prefix else "")
          + f", state in {layout.state}")
    print(f"  export SLURM_CONF={layout.slurm_conf}")
    for line in _path_export(layout):
        print(f"  {line}")
    print(f"  PostgreSQL DSN: {layout.dsn}")
    print(f"  role passwords (perfguard, Grafana's read-only role): {layout.pgpass}, "
          f"shown by `perfguard cluster env`")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    from perfguard import cluster

    stopped = cluster.down(args.state_dir)
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    if args.purge:
        removed = cluster.purge(args.state_dir)
        print("removed: " + (", ".join(map(str, removed)) if removed else "nothing"))
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from perfguard import cluster

    components = cluster.status(args.state_dir)
    for comp in components:
        if comp.name == "postgresql":  # what waits to be stored belongs with the database
            comp = dataclasses.replace(comp, detail=comp.detail + _spool_detail(args.state_dir))
        state = "running" if comp.running else "stopped"
        pids = ",".join(str(p) for p in comp.pids[:4]) + ("…" if len(comp.pids) > 4 else "")
        print(f"{comp.name:<11} {state:<8} {('pid ' + pids) if pids else '':<22} {comp.detail}")
    return 0 if all(c.running for c in components) else 3


def _spool_detail(state: Path) -> str:
    from perfguard.store.spool import rejected, spooled

    waiting, parked = len(spooled(state)), len(rejected(state))
    parts = ([f"{waiting} report(s) spooled (`perfguard ingest --spool`)"] if waiting else []) + (
        [f"{parked} rejected in {state / 'spool' / 'rejected'}"] if parked else [])
    return f"; {', '.join(parts)}" if parts else ""


def cmd_cluster_env(args: argparse.Namespace) -> int:
    from perfguard.cluster import current_layout
    from perfguard.cluster.layout import DB_NAME, GRAFANA_USER

    layout = current_layout(args.state_dir)
    print(f"export SLURM_CONF={shlex.quote(str(layout.slurm_conf))}")
    for line in _path_export(layout):
        print(line)
    print(f"export PERFGUARD_DSN={shlex.quote(layout.dsn)}")
    print(f"# Grafana's data source: host 127.0.0.1:{layout.postgres_port}, database "
          f"{DB_NAME}, user {GRAFANA_USER}, password:")
    print(f"export PERFGUARD_GRAFANA_PASSWORD="
          f"{shlex.quote(layout.role_passwords()[GRAFANA_USER])}")
    return 0


def _path_export(layout) -> list[str]:
    """The PATH export a shell needs for the cluster's own Slurm (one built from source);
    nothing for the distribution's."""
    dirs = ":".join(shlex.quote(str(d)) for d in layout.slurm_dirs())
    return [f'export PATH={dirs}:"$PATH"'] if dirs else []


def add(sub: argparse._SubParsersAction) -> None:
    _add_cluster(sub)
