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
