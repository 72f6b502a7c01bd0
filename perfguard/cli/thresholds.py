"""`perfguard thresholds`: set, list, import, export and derive references."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfguard.cli.options import DSN, connect
from perfguard.errors import UsageError


def _add_thresholds(sub: argparse._SubParsersAction) -> None:
    th = sub.add_parser("thresholds", help="reference thresholds: set, list, history, "
                                           "import/export YAML, derive from a run")
    actions = th.add_subparsers(dest="action", required=True, metavar="ACTION")
    tset = actions.add_parser(
        "set", parents=[DSN], help="set the threshold of one scope (closes the previous one)",
        description="Bounds: '10%' / '-5%' are fractions of the reference, plain numbers are "
                    "absolute limits, in --unit (converted into the metric's stored unit). "
                    "A threshold judges runs that start after it is set, never those "
                    "stored before. Example: thresholds set --system local --check "
                    "UcxPerftestCheck --param test=tag_bw --metric bw --reference 5000 "
                    "--lower=-10% --unit MB/s --direction higher")
    tset.add_argument("--system", required=True, help="system the threshold applies to")
    tset.add_argument("--partition", help="only this partition (default: every one)")
    tset.add_argument("--environ", help="only this programming environment (default: every one)")
    tset.add_argument("--check", required=True, help="check class, e.g. OsuPt2PtCheck")
    tset.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                      help="variant parameter the threshold applies to (repeatable)")
    tset.add_argument("--metric", required=True, help="performance variable, e.g. bandwidth")
    tset.add_argument("--point", action="append", default=[], metavar="NAME=VALUE",
                      help="measurement point, e.g. size=8 (default: the key figure)")
    tset.add_argument("--reference", type=float, required=True, help="the reference value")
    tset.add_argument("--lower", help="lower bound: fraction with %% or absolute")
    tset.add_argument("--upper", help="upper bound: fraction with %% or absolute")
    tset.add_argument("--unit", default="",
                      help="the unit the values are given in, e.g. ns (default: the metric's "
                           "own); converted into the unit the metric is stored in")
    tset.add_argument("--direction", choices=("higher", "lower"),
                      help="which way is better (default: the direction the check declared "
                           "for the metric in its stored runs)")
    tset.add_argument("--author", default=None, help="who sets it (default: the login)")
    tset.add_argument("--reason", default="", help="why, kept in the threshold's history")
    _force_option(tset)
    tset.set_defaults(func=cmd_thresholds_set)
    for name, helptext in (("list", "current thresholds"),
                           ("history", "every threshold ever set, with validity")):
        p = actions.add_parser(name, parents=[DSN], help=helptext)
        p.add_argument("--system", help="only this system")
        p.add_argument("--check", help="only this check class")
        p.set_defaults(func=cmd_thresholds_list, history=name == "history")
    show = actions.add_parser("show", parents=[DSN], help="one threshold in full")
    show.add_argument("id", type=int, help="threshold id (from `thresholds list`)")
    show.set_defaults(func=cmd_thresholds_show)
    delete = actions.add_parser("delete", parents=[DSN],
        help="end a threshold in force (its history stays; runs before keep it)")
    delete.add_argument("id", type=int, help="threshold id (from `thresholds list`)")
    delete.set_defaults(func=cmd_thresholds_delete)
    imp = actions.add_parser("import", parents=[DSN], help="set every threshold of a YAML file")
    imp.add_argument("file", type=Path,
                     help="a thresholds YAML file (as `thresholds export` writes)")
    _force_option(imp)
    imp.set_defaults(func=cmd_thresholds_import)
    exp = actions.add_parser("export", parents=[DSN],
        help="write a system's current thresholds as YAML")
    exp.add_argument("--system", required=True, help="the system whose thresholds to write")
    exp.add_argument("-o", "--output", type=Path, help="file (default: stdout)")
    exp.set_defaults(func=cmd_thresholds_export)
    der = actions.add_parser("derive", parents=[DSN],
        help="propose thresholds from a known-good run, or from each series' history")
    der.add_argument("--from-run", default=None,
                     help="run id, session uuid or label (default: the latest)")
    der.add_argument("--from-history", type=int, metavar="N", default=1,
                     help="reference = median of the last N runs of each series, bound = "
                          "--sigmas noise on the worse side (default: the run alone)")
    der.add_argument("--sigmas", type=float, default=4.0,
                     help="with --from-history: the bound's distance in noise (default 4)")
    der.add_argument("--tolerance", default="10%",
                     help="from one run: allowed degradation (default 10%%)")
    der.add_argument("--apply", action="store_true", help="write them (default: show only)")
    der.add_argument("--author", default=None, help="who sets them (default: the login)")
    der.set_defaults(func=cmd_thresholds_derive)


#: What `set` and `import` say: a threshold never judges a run stored before it.
LATER_RUNS_ONLY = ("it judges runs that start from now on; runs stored before it are never "
                   "judged by it (thresholds match by the run's start)")


def _force_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true",
                        help="pre-seed a threshold for a system, check, parameter or metric "
                             "that no stored run and no check has yet (warned)")


def _pairs(items: list[str], what: str) -> dict[str, str]:
    result = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"{what} {item!r}: expected NAME=VALUE")
        result[name] = value
    return result


def _point(items: list[str]) -> dict | None:
    if not items:
        return None
    pairs = _pairs(items, "--point")
    return {k: int(v) if v.lstrip("-").isdigit() else v for k, v in pairs.items()}


def cmd_thresholds_set(args: argparse.Namespace) -> int:
    from perfguard.judge import thresholds as th

    lower, lower_frac = th.parse_bound(args.lower, "--lower")
    upper, upper_frac = th.parse_bound(args.upper, "--upper")
    given = [f for v, f in ((lower, lower_frac), (upper, upper_frac)) if v is not None]
    if len(set(given)) > 1:
        raise UsageError("--lower and --upper must both be fractions (%) or both absolute")
    params, point = _pairs(args.param, "--param"), _point(args.point)
    with connect(args) as conn:
        direction = args.direction or th.declared_direction(conn, args.check, args.metric)
        if direction is None:
            raise UsageError(f"give --direction higher|lower: no stored run of {args.check} "
                             f"has declared which way {args.metric} is better")
        threshold = th.Threshold(
            system=args.system, partition=args.partition, environ=args.environ,
            check=args.check, params=params, metric=args.metric, point=point,
            reference=args.reference, lower=lower, upper=upper,
            bounds="fraction" if (given and given[0]) else "absolute", unit=args.unit,
            direction=direction, reason=args.reason)
        if args.author:
            threshold.author = args.author
        threshold.validate("thresholds set")
        _fit_to_known(args, conn, [threshold], lambda i: "thresholds set")
        stored, changed = th.set_threshold(conn, threshold)
    print(("set" if changed else "unchanged") + f": #{stored.id} {stored.scope()}"
          f" ref {stored.reference:g} {stored.unit}".rstrip())
    if changed:
        print(f"note: {LATER_RUNS_ONLY}")
    return 0


def _fit_to_known(args: argparse.Namespace, conn, thresholds, where) -> None:
    """Each threshold in the unit its metric is stored in; one whose system, check,
    parameter or metric no stored run and no check has is refused, or with --force
    pre-seeded with a warning (a misspelt name never matches a value)."""
    from perfguard.contract.topology import load_systems
    from perfguard.judge import scope
    from perfguard.paths import site_folder
    from perfguard.run.reframe import RunRequest, check_directories

    declared = scope.declared_checks(check_directories(RunRequest(), args.ctx.site))
    systems = {"local", *(s.name for s in load_systems(site_folder("systems")))}
    for i, t in enumerate(thresholds):
        known = scope.stored(conn, t.system, t.check)
        missing = scope.unknown(t, known, declared, systems)
        if missing and not args.force:
            raise UsageError(f"{where(i)}: no stored run and no check has {missing}; check "
                             f"the name, or give --force to pre-seed it")
        if missing:
            print(f"perfguard: warning: {t.scope()}: pre-seeded: no stored run and no check "
                  f"has {missing}", file=sys.stderr)
        scope.in_stored_unit(t, known).validate(where(i))


def _threshold_line(t) -> str:
    low, high = t.limits()
    span = f"[{'-' if low is None else f'{low:.4g}'}, {'-' if high is None else f'{high:.4g}'}]"
    valid = f"{t.valid_from:%Y-%m-%d %H:%M} → " + (
        f"{t.valid_to:%Y-%m-%d %H:%M}" if t.valid_to else "now")
    return (f"#{t.id:<5} {t.scope():<60} ref {t.reference:.4g} {t.unit} {span} "
            f"({t.direction} is better) {valid} by {t.author}"
            + (f": {t.reason}" if t.reason else ""))


def cmd_thresholds_list(args: argparse.Namespace) -> int:
    from perfguard.judge import thresholds as th

    with connect(args) as conn:
        rows = (th.history if args.history else th.current)(conn, args.system, args.check)
    for t in rows:
        print(_threshold_line(t))
    if not rows:
        print("no thresholds")
    return 0


def cmd_thresholds_show(args: argparse.Namespace) -> int:
    from perfguard.judge import thresholds as th

    with connect(args) as conn:
        t = th.get(conn, args.id)
    print(_threshold_line(t))
    print(th.to_yaml(t.system, [t]))
    return 0


def cmd_thresholds_import(args: argparse.Namespace) -> int:
    from perfguard.judge import thresholds as th

    entries = th.from_yaml(args.file)
    with connect(args) as conn:
        _fit_to_known(args, conn, entries, lambda i: f"{args.file}: thresholds[{i}]")
        changed = th.set_all(conn, entries, str(args.file))
    print(f"{args.file}: {len(entries)} thresholds, {changed} changed")
    if changed:
        print(f"note: {LATER_RUNS_ONLY}")
    return 0


def cmd_thresholds_delete(args: argparse.Namespace) -> int:
    from perfguard.judge import thresholds as th

    with connect(args) as conn:
        t = th.delete(conn, args.id)
    print(f"deleted: #{t.id} {t.scope()} (in force {t.valid_from:%Y-%m-%d %H:%M} → "
          f"{t.valid_to:%Y-%m-%d %H:%M}; runs in that time keep it; `perfguard thresholds "
          f"history` keeps it)")
    return 0


def cmd_thresholds_export(args: argparse.Namespace) -> int:
    from perfguard.judge import thresholds as th

    with connect(args) as conn:
        text = th.to_yaml(args.system, th.current(conn, args.system))
    if args.output:
        args.output.write_text(text)
    else:
        print(text, end="")
    return 0


def cmd_thresholds_derive(args: argparse.Namespace) -> int:
    import getpass

    from perfguard.judge import thresholds as th
    from perfguard.judge.verdict import resolve_run

    tolerance, is_fraction = th.parse_bound(args.tolerance, "--tolerance")
    if tolerance is None or not is_fraction or tolerance <= 0:
        raise UsageError(f"--tolerance {args.tolerance!r}: give a percentage such as 10%")
    if args.from_history < 1 or args.sigmas <= 0:
        raise UsageError("--from-history must be >= 1 and --sigmas > 0")
    with connect(args) as conn:
        run_id = resolve_run(conn, args.from_run)
        reason = (f"median of the last {args.from_history} runs up to run {run_id}, "
                  f"{args.sigmas:g} sigma" if args.from_history > 1 else
                  f"derived from run {run_id} ±{args.tolerance}")
        proposals, notes = th.derive(conn, run_id, tolerance, args.author or getpass.getuser(),
                                     reason, history=args.from_history, sigmas=args.sigmas)
        for note in notes:
            print(f"# {note}")
        if args.apply:
            for t in proposals:
                th.set_threshold(conn, t)
    if proposals:
        print(th.to_yaml(proposals[0].system, proposals), end="")
    print(f"# {len(proposals)} thresholds " + ("written" if args.apply else
                                                 "proposed; add --apply to write them"))
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    _add_thresholds(sub)
