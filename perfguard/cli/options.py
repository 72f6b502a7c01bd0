"""Options and helpers several command groups share."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from perfguard.cluster.layout import DEFAULT_PORT_BASE


def _dsn_option() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--dsn", help="PostgreSQL DSN (default: $PERFGUARD_DSN, else the "
                                      "embedded cluster's database)")
    return parent


DSN = _dsn_option()


def port_base_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port-base", type=int,
                        default=int(os.environ.get("PERFGUARD_PORT_BASE", DEFAULT_PORT_BASE)),
                        help=f"first of the ports the daemons use (default $PERFGUARD_PORT_BASE "
                             f"or {DEFAULT_PORT_BASE}; give each checkout its own to run side "
                             f"by side)")


def slurm_prefix_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slurm-prefix", metavar="DIR", type=Path,
                        default=os.environ.get("PERFGUARD_SLURM_PREFIX") or None,
                        help="run the embedded cluster on a Slurm built from source and "
                             "installed under DIR (its bin/ and sbin/) instead of the "
                             "distribution's on the PATH (default: $PERFGUARD_SLURM_PREFIX, "
                             "else the Slurm this state directory last ran)")


def connect(args: argparse.Namespace):
    from perfguard.store import db

    return db.connect(args.ctx.dsn)


#: sbatch options a run may give every one of its jobs (`job_options_option`).
JOB_OPTIONS = ("reservation", "qos", "account")


def job_options_option(parser: argparse.ArgumentParser) -> None:
    """``--reservation``, ``--qos``, ``--account``: sbatch options for every job of the
    run (ReFrame's ``-J``), after the partition's ``access``, which holds a site's
    defaults."""
    group = parser.add_argument_group(
        "Slurm", "sbatch options for every job of the run (over a default in the "
                 "partition's access: docs/topology.md)")
    group.add_argument("--reservation", metavar="NAME",
                       help="run every job in this Slurm reservation, e.g. the "
                            "maintenance reservation of upgraded nodes (sbatch "
                            "--reservation)")
    group.add_argument("--qos", metavar="NAME",
                       help="every job's quality of service (sbatch --qos)")
    group.add_argument("--account", metavar="NAME",
                       help="the account every job is charged to (sbatch --account)")


def job_options(args: argparse.Namespace) -> tuple[str, ...]:
    """The sbatch options ``job_options_option`` read: ``('--reservation=R', …)``."""
    from perfguard.errors import UsageError

    found = []
    for name in JOB_OPTIONS:
        value = getattr(args, name, None)
        if value is None:
            continue
        if not value.strip() or any(c.isspace() for c in value):
            raise UsageError(f"--{name} {value!r}: expected a Slurm {name} name (no spaces)")
        found.append(f"--{name}={value}")
    return tuple(found)


def job_option_arguments(options: tuple[str, ...]) -> list[str]:
    """``job_options`` as perfguard's own arguments again (a scheduled nightly's)."""
    return [part for option in options for part in option.split("=", 1)]
