"""The `perfguard` command line: one module per command group, each command a thin call
into the package. The command's context (state and site directories, database, Slurm) is
resolved here, once, and passed down (perfguard.site.context)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from perfguard import __version__
from perfguard.cli import cluster, judge, present, run, site, store, sweep, thresholds, workflows
from perfguard.errors import PerfguardError
from perfguard.secrets import redact_secrets
from perfguard.site.context import Context

#: The command groups, in the order `perfguard --help` lists them.
GROUPS = (cluster, run, store, thresholds, judge, site, workflows, sweep, present)


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
    parser.add_argument("--site", type=Path, default=None,
                        help="site directory (default: $PERFGUARD_SITE, "
                             "$XDG_CONFIG_HOME/perfguard or /etc/perfguard if present); "
                             "`perfguard site show` lists what it sets")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.site is not None:  # read by every layer below, ReFrame and its checks too
        if not args.site.is_dir():
            print(f"perfguard: error: --site {args.site}: no such directory", file=sys.stderr)
            return 2
        os.environ["PERFGUARD_SITE"] = str(args.site.resolve())
    elif os.environ.get("PERFGUARD_SITE") and not Path(os.environ["PERFGUARD_SITE"]).is_dir():
        print(f"perfguard: error: PERFGUARD_SITE={os.environ['PERFGUARD_SITE']}: no such "
              f"directory (unset it to use the shipped defaults, or `perfguard site init "
              f"DIR` to write one)", file=sys.stderr)
        return 2
    args.ctx = Context.resolve(args.state_dir, getattr(args, "dsn", None))
    args.state_dir = args.ctx.state
    try:
        return args.func(args)
    except PerfguardError as exc:  # usage 2, another nightly running 75, a failure 1
        print(f"perfguard: error: {redact_secrets(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("perfguard: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `perfguard site show | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 141  # 128 + SIGPIPE, as a shell reports a command its pipe's reader left
    except Exception as exc:  # a bug of ours: one line, the traceback only on request
        if _schema_missing(exc):  # an empty or old database, met by a reader (verdict,
            # report) before anything checked the schema
            what = str(exc).strip().splitlines()[0]
            print(f"perfguard: error: the database has no perfguard schema, or an older one "
                  f"({what}): run `perfguard db upgrade --dsn OWNER_DSN` with the role that "
                  f"owns it (the embedded cluster: `perfguard db upgrade`)", file=sys.stderr)
            return 2
        if os.environ.get("PERFGUARD_DEBUG"):
            raise
        print(f"perfguard: internal error in `{args.command}`: {type(exc).__name__}: "
              f"{redact_secrets(str(exc))} (PERFGUARD_DEBUG=1 shows the traceback; "
              f"please report it)", file=sys.stderr)
        return 1


def _schema_missing(exc: Exception) -> bool:
    """A table, column or function of perfguard's schema that the database lacks. psycopg
    is imported only here: `topology detect` runs where only PyYAML is installed."""
    try:
        from psycopg.errors import UndefinedColumn, UndefinedFunction, UndefinedTable
    except ImportError:
        return False
    return isinstance(exc, (UndefinedTable, UndefinedColumn, UndefinedFunction))
