"""The `perfguard` command line: one subcommand per job, each a thin call into the package."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from perfguard import __version__
from perfguard.errors import PerfguardError, UsageError
from perfguard.secrets import redact_secrets
from perfguard.site import paths


def _dsn_option() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--dsn", help="PostgreSQL DSN (default: $PERFGUARD_DSN, else the "
                                      "embedded cluster's database)")
    return parent


DSN = _dsn_option()


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
    _port_base_option(start)
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


def _port_base_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port-base", type=int,
                        default=int(os.environ.get("PERFGUARD_PORT_BASE", "16800")),
                        help="first of the ports the daemons use (default $PERFGUARD_PORT_BASE "
                             "or 16800; give each checkout its own to run side by side)")


def cmd_cluster_up(args: argparse.Namespace) -> int:
    from perfguard import cluster

    layout = cluster.up(args.state_dir, args.nodes, args.port_base)
    print(f"embedded cluster up: {layout.nodes} nodes, state in {layout.state}")
    print(f"  export SLURM_CONF={layout.slurm_conf}")
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
        state = "running" if comp.running else "stopped"
        pids = ",".join(str(p) for p in comp.pids[:4]) + ("…" if len(comp.pids) > 4 else "")
        print(f"{comp.name:<11} {state:<8} {('pid ' + pids) if pids else '':<22} {comp.detail}")
    return 0 if all(c.running for c in components) else 3


def cmd_cluster_env(args: argparse.Namespace) -> int:
    from perfguard.cluster import current_layout
    from perfguard.cluster.layout import DB_NAME, GRAFANA_USER

    layout = current_layout(args.state_dir)
    print(f"export SLURM_CONF={shlex.quote(str(layout.slurm_conf))}")
    print(f"export PERFGUARD_DSN={shlex.quote(layout.dsn)}")
    print(f"# Grafana's data source: host 127.0.0.1:{layout.postgres_port}, database "
          f"{DB_NAME}, user {GRAFANA_USER}, password:")
    print(f"export PERFGUARD_GRAFANA_PASSWORD="
          f"{shlex.quote(layout.role_passwords()[GRAFANA_USER])}")
    return 0


# --- run / demo ------------------------------------------------------------------
def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run", parents=[DSN], help="run ReFrame checks, ingest the report and print the verdict",
        description="Runs reframe with perfguard's site config and test library, writes one "
                    "report per run under STATE/reports, ingests it and prints the verdict.")
    run.add_argument("--system", default="local", help="ReFrame system (default: local, the "
                     "embedded cluster)")
    run.add_argument("-n", "--name", action="append", default=[], help="check name filter")
    run.add_argument("-t", "--tag", action="append", default=[], help="tag filter")
    run.add_argument("-S", "--setvar", action="append", default=[],
                     help="set a check variable, as reframe -S")
    run.add_argument("--dry-run", action="store_true", help="generate job scripts only")
    run.add_argument("--trigger", default="manual", help="why this run: nightly, upgrade, manual")
    run.add_argument("--label", action="append", default=[],
                     help="free label stored with the run (e.g. pre-upgrade)")
    run.add_argument("--no-ingest", action="store_true", help="keep the report, do not ingest")
    run.add_argument("reframe_args", nargs=argparse.REMAINDER,
                     help="after --: extra reframe options")
    run.set_defaults(func=cmd_run)
    demo = sub.add_parser("demo", help="cluster up, db upgrade, run the demo checks, verdict")
    _port_base_option(demo)
    demo.set_defaults(func=cmd_demo)


def cmd_run(args: argparse.Namespace) -> int:
    from perfguard.run.reframe import RunRequest, run_and_ingest

    extra = [a for a in args.reframe_args if a != "--"]
    request = RunRequest(state=args.state_dir, system=args.system, names=tuple(args.name),
                         tags=tuple(args.tag), setvars=tuple(args.setvar),
                         dry_run=args.dry_run, extra=tuple(extra), trigger=args.trigger,
                         labels=tuple(args.label))
    return run_and_ingest(request, dsn=args.dsn, ingest=not args.no_ingest)


def cmd_demo(args: argparse.Namespace) -> int:
    from perfguard import cluster
    from perfguard.judge import thresholds as th
    from perfguard.run.reframe import RunRequest, run_and_ingest
    from perfguard.store import db

    layout = cluster.up(args.state_dir, 4, args.port_base)
    with db.connect(layout.dsn) as conn:
        db.upgrade(conn)
        for threshold in th.from_yaml(paths.DEFAULTS_DIR / "thresholds" / "local.yaml"):
            th.set_threshold(conn, threshold)
    request = RunRequest(state=args.state_dir, tags=("demo",), trigger="manual",
                         labels=("demo",))
    status = run_and_ingest(request, dsn=layout.dsn, ingest=True)
    from perfguard.judge.verdict import resolve_run
    from perfguard.present import htmlreport

    with db.connect(layout.dsn) as conn:
        run_id = resolve_run(conn, "demo")
    path = htmlreport.write_for_run(args.state_dir, layout.dsn, run_id)
    print(f"\nHTML report: {path}\n(Markdown summary: {path.with_suffix('.md')})")
    print(f"\n{htmlreport.ONE_HOST}")
    return status


# --- db ----------------------------------------------------------------------------
def _add_db(sub: argparse._SubParsersAction) -> None:
    dbp = sub.add_parser("db", help="database schema: upgrade and status")
    actions = dbp.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("upgrade", parents=[DSN], help="apply pending SQL migrations").set_defaults(
        func=cmd_db_upgrade)
    actions.add_parser("status", parents=[DSN], help="list migrations and whether each is applied"
                       ).set_defaults(func=cmd_db_status)
    grant = actions.add_parser(
        "grant", parents=[DSN], help="give a login role the writer's or the reader's rights",
        description="writer: stores runs and verdicts (perfguard run, nightly, verdict), no "
                    "DDL; reader: SELECT only (Grafana). Run with the schema owner's DSN; "
                    "the password is read from $PERFGUARD_GRANT_PASSWORD if set.")
    grant.add_argument("user")
    grant.add_argument("--kind", choices=["writer", "reader"], default="writer")
    grant.set_defaults(func=cmd_db_grant)


def _connect(args: argparse.Namespace):
    from perfguard.store import db

    return db.connect(db.resolve_dsn(args.state_dir, getattr(args, "dsn", None)))


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from perfguard.store import db

    with _connect(args) as conn:
        newly = db.upgrade(conn)
    for migration in newly:
        print(f"applied {migration.version:04d} {migration.name}")
    print("schema is current" if not newly else f"{len(newly)} migration(s) applied")
    return 0


def cmd_db_grant(args: argparse.Namespace) -> int:
    from perfguard.store import db

    with _connect(args) as conn:
        created = db.grant(conn, args.user, args.kind,
                           os.environ.get("PERFGUARD_GRANT_PASSWORD"))
    print(f"{'created' if created else 'updated'} role {args.user}: {args.kind} "
          f"({db.GRANT_GROUPS[args.kind]})")
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    from perfguard.store import db

    with _connect(args) as conn:
        done = db.applied(conn)
    pending = 0
    for migration in db.migrations():
        state = "applied" if migration.version in done else "pending"
        pending += state == "pending"
        print(f"{migration.version:04d} {migration.name:<30} {state}")
    return 0 if not pending else 3


# --- ingest --------------------------------------------------------------------------
def _add_ingest(sub: argparse._SubParsersAction) -> None:
    ing = sub.add_parser(
        "ingest", parents=[DSN], help="load ReFrame JSON reports into the database",
        description="Each report is stored in one transaction, idempotently by session uuid. "
                    "A report that cannot be stored now (database down) is kept in "
                    "STATE/spool with the reason; one that never can (malformed) is parked "
                    "in STATE/spool/rejected. Exit 1 if any report was not stored.")
    ing.add_argument("reports", nargs="*", type=Path, help="ReFrame report files")
    ing.add_argument("--spool", action="store_true", help="retry every spooled report")
    ing.add_argument("--trigger", default="manual", help="trigger for reports without metadata")
    ing.add_argument("--label", action="append", default=[], help="label for such reports")
    ing.set_defaults(func=cmd_ingest)


def cmd_ingest(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from perfguard.store import db
    from perfguard.store.ingest import RunMeta, ingest_paths
    from perfguard.store.spool import spool_lock, spooled

    dsn = db.resolve_dsn(args.state_dir, args.dsn)
    with spool_lock(args.state_dir) if args.spool else nullcontext():
        reports = list(args.reports) + (spooled(args.state_dir) if args.spool else [])
        if not reports:
            print("nothing to ingest" + (" (spool is empty)" if args.spool else ""))
            return 0
        results = ingest_paths(args.state_dir, dsn, reports,
                               RunMeta(args.trigger, tuple(args.label)))
    _judge_stored(dsn, [r.run_id for r in results if r.stored])
    return _print_ingest(results)


def _judge_stored(dsn: str, run_ids: list[int]) -> None:
    """Runs just stored are judged and their verdicts recorded (oldest first: each reads
    the history before it); the data is stored whether or not this succeeds."""
    from perfguard.judge import verdict as vd
    from perfguard.store import db

    if run_ids:
        with db.connect(dsn) as conn:
            for run_id in run_ids:
                vd.judge_and_record(conn, run_id)


def _print_ingest(results) -> int:
    for r in results:
        if r.stored:
            print(f"{r.report}: stored as run {r.run_id} ({r.testcases} test cases, "
                  f"{r.samples} samples)")
        elif r.run_id is not None:
            print(f"{r.report}: {r.message} (run {r.run_id}); nothing changed")
        else:
            print(f"perfguard: error: {r.report}: {r.message}", file=sys.stderr)
    return 0 if all(r.run_id is not None for r in results) else 1


# --- thresholds -------------------------------------------------------------------
def _add_thresholds(sub: argparse._SubParsersAction) -> None:
    th = sub.add_parser("thresholds", help="reference thresholds: set, list, history, "
                                           "import/export YAML, derive from a run")
    actions = th.add_subparsers(dest="action", required=True, metavar="ACTION")
    tset = actions.add_parser(
        "set", parents=[DSN], help="set the threshold of one scope (closes the previous one)",
        description="Bounds: '10%%' / '-5%%' are fractions of the reference, plain numbers are "
                    "absolute limits. Example: thresholds set --system local --check "
                    "UcxPerftestCheck --param test=tag_bw --metric bw --reference 5000 "
                    "--lower=-10%% --unit MB/s --direction higher")
    tset.add_argument("--system", required=True)
    tset.add_argument("--partition")
    tset.add_argument("--environ")
    tset.add_argument("--check", required=True)
    tset.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                      help="variant parameter the threshold applies to (repeatable)")
    tset.add_argument("--metric", required=True)
    tset.add_argument("--point", action="append", default=[], metavar="NAME=VALUE",
                      help="measurement point, e.g. size=8 (default: the key figure)")
    tset.add_argument("--reference", type=float, required=True)
    tset.add_argument("--lower", help="lower bound: fraction with %% or absolute")
    tset.add_argument("--upper", help="upper bound: fraction with %% or absolute")
    tset.add_argument("--unit", default="")
    tset.add_argument("--direction", choices=("higher", "lower"),
                      help="which way is better (default: from the unit)")
    tset.add_argument("--author", default=None)
    tset.add_argument("--reason", default="")
    tset.set_defaults(func=cmd_thresholds_set)
    for name, helptext in (("list", "current thresholds"),
                           ("history", "every threshold ever set, with validity")):
        p = actions.add_parser(name, parents=[DSN], help=helptext)
        p.add_argument("--system")
        p.add_argument("--check")
        p.set_defaults(func=cmd_thresholds_list, history=name == "history")
    show = actions.add_parser("show", parents=[DSN], help="one threshold in full")
    show.add_argument("id", type=int)
    show.set_defaults(func=cmd_thresholds_show)
    imp = actions.add_parser("import", parents=[DSN], help="set every threshold of a YAML file")
    imp.add_argument("file", type=Path)
    imp.set_defaults(func=cmd_thresholds_import)
    exp = actions.add_parser("export", parents=[DSN],
        help="write a system's current thresholds as YAML")
    exp.add_argument("--system", required=True)
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
    der.add_argument("--author", default=None)
    der.set_defaults(func=cmd_thresholds_derive)


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
    with _connect(args) as conn:
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
        _warn_unknown_metrics(conn, [threshold])
        stored, changed = th.set_threshold(conn, threshold)
    print(("set" if changed else "unchanged") + f": #{stored.id} {stored.scope()}")
    return 0


def _warn_unknown_metrics(conn, thresholds) -> None:
    from perfguard.judge import thresholds as th

    for t in th.never_measured(conn, thresholds):
        print(f"perfguard: warning: {t.scope()}: no run has measured metric {t.metric!r} "
              f"yet; check the name (a typo never matches)", file=sys.stderr)


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

    with _connect(args) as conn:
        rows = (th.history if args.history else th.current)(conn, args.system, args.check)
    for t in rows:
        print(_threshold_line(t))
    if not rows:
        print("no thresholds")
    return 0


def cmd_thresholds_show(args: argparse.Namespace) -> int:
    from perfguard.judge import thresholds as th

    with _connect(args) as conn:
        t = th.get(conn, args.id)
    print(_threshold_line(t))
    print(th.to_yaml(t.system, [t]))
    return 0


def cmd_thresholds_import(args: argparse.Namespace) -> int:
    from perfguard.judge import thresholds as th

    entries = th.from_yaml(args.file)
    with _connect(args) as conn:
        _warn_unknown_metrics(conn, entries)
        changed = th.set_all(conn, entries, str(args.file))
    print(f"{args.file}: {len(entries)} thresholds, {changed} changed")
    return 0


def cmd_thresholds_export(args: argparse.Namespace) -> int:
    from perfguard.judge import thresholds as th

    with _connect(args) as conn:
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
    with _connect(args) as conn:
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


# --- verdict -------------------------------------------------------------------------
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
    from perfguard.judge import verdict as vd

    with _connect(args) as conn:
        run_id = vd.resolve_run(conn, args.run)
        lines = vd.judge_and_record(conn, run_id)  # again: thresholds or rules may change
        result = vd.outcome(conn, run_id)
        if args.baseline:
            before = vd.resolve_run(conn, args.baseline)
            vd.with_baseline(lines, vd.stored_verdict(conn, before))
        chosen = [line for line in lines if args.explain in vd.name_of(line)] \
            if args.explain is not None else []
        vd.with_key_points(conn, run_id, chosen)  # which curve point each key figure is
    print(f"run {run_id}")
    if args.explain is not None:
        if not chosen:
            raise UsageError(f"no line of run {run_id} is named like {args.explain!r}")
        print("\n\n".join(vd.explain(line) for line in chosen))
    else:
        print(vd.render(lines, show_baseline=bool(args.baseline)))
    print(f"run {run_id}: {'FAIL' if result.failed else 'PASS'} ({result.why})")
    return 1 if result.failed else 0


# --- change points -------------------------------------------------------------------
def _add_changepoints(sub: argparse._SubParsersAction) -> None:
    cpt = sub.add_parser("changepoints", parents=[DSN],
        help="find and store where each series' level changed (E-Divisive), and what "
             "changed in the environment there")
    cpt.add_argument("--system", help="only this system (default: all)")
    cpt.set_defaults(func=cmd_changepoints)


def cmd_changepoints(args: argparse.Namespace) -> int:
    from perfguard.judge import changepoints

    with _connect(args) as conn:
        found = changepoints.detect(conn, args.system)
    for point in found:
        print(point.describe())
    print(f"{len(found)} change points stored"
          + (f" ({sum(p.regression for p in found)} regressions)" if found else ""))
    return 0


# --- topology ------------------------------------------------------------------------
def _add_topology(sub: argparse._SubParsersAction) -> None:
    top = sub.add_parser("topology", help="describe nodes: NUMA, HCAs, GPUs and affinity")
    actions = top.add_subparsers(dest="action", required=True, metavar="ACTION")
    det = actions.add_parser(
        "detect", help="write a topology file for the node this runs on",
        description="Reads lscpu -p, ibv_devinfo -v (+ sysfs) and nvidia-smi topo -m; a "
                    "missing tool leaves its part empty with a note. Run it on a compute node "
                    "(e.g. through srun) and commit the result under site_config/systems/.")
    det.add_argument("--system", default="mycluster")
    det.add_argument("--partition", default="gpu")
    det.add_argument("--mpi", default="openmpi-ucx",
                     help="MPI flavour (a key of site_config/mpi_flavours.yaml)")
    det.add_argument("-o", "--output", type=Path, help="file (default: stdout)")
    det.set_defaults(func=cmd_topology_detect)


def cmd_topology_detect(args: argparse.Namespace) -> int:
    from perfguard.site.detect import as_topology_yaml, detect

    found = detect()
    text = as_topology_yaml(found, args.system, args.partition, args.mpi)
    for note in found.notes:
        print(f"perfguard: {note}", file=sys.stderr)
    if args.output:
        args.output.write_text(text)
    else:
        print(text, end="")
    return 0


# --- site ------------------------------------------------------------------------------
def _add_site(sub: argparse._SubParsersAction) -> None:
    site = sub.add_parser("site", help="the site directory: where each setting comes from")
    actions = site.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="the site directory and, for each setting file, "
                                           "whether the site's or the shipped one is used")
    show.set_defaults(func=cmd_site_show)
    init = actions.add_parser(
        "init", help="write a starting site directory",
        description="Creates systems/ and thresholds/ and a README; on a Slurm cluster it "
                    "prints (or with --detect runs) `perfguard topology detect` through "
                    "srun on one node of each partition.")
    init.add_argument("directory", type=Path)
    init.add_argument("--system", default="mycluster", help="the system's name")
    init.add_argument("--detect", action="store_true",
                      help="run the topology detection now (one node per partition)")
    init.set_defaults(func=cmd_site_init)


def cmd_site_show(args: argparse.Namespace) -> int:
    from perfguard.site import directory as site

    print(site.describe())
    return 0


def cmd_site_init(args: argparse.Namespace) -> int:
    from perfguard.site import directory as site

    for note in site.init(args.directory.resolve(), args.system, args.detect):
        print(note)
    return 0


# --- spack -----------------------------------------------------------------------------
def _add_spack(sub: argparse._SubParsersAction) -> None:
    spk = sub.add_parser("spack", help="the project's Spack stacks: check and install")
    actions = spk.add_subparsers(dest="action", required=True, metavar="ACTION")
    chk = actions.add_parser(
        "check", help="validate every environment and recipe (concretize when spack exists)")
    chk.add_argument("--envs", type=Path, default=None,
                     help="directory of environments (default: spack_envs/ of the checkout)")
    chk.set_defaults(func=cmd_spack_check)
    ins = actions.add_parser("install", help="spack -e ENV install, into the shared root")
    ins.add_argument("env", help="environment name, e.g. gcc-openmpi-ucx-cuda")
    ins.set_defaults(func=cmd_spack_install)


def cmd_spack_check(args: argparse.Namespace) -> int:
    from perfguard.site import spack

    results, skipped = spack.check_all(args.envs or spack.SPACK_ENVS)
    failed = False
    for name, findings in results.items():
        state = "FAIL" if findings.errors else "ok"
        failed |= bool(findings.errors)
        print(f"{state:<4} {name}")
        for error in findings.errors:
            print(f"     error: {error}")
        for warning in findings.warnings:
            print(f"     warning: {warning}")
        for note in findings.notes:
            print(f"     {note}")
    if skipped:
        print(f"note: {skipped}")
    return 1 if failed else 0


def cmd_spack_install(args: argparse.Namespace) -> int:
    from perfguard.site import spack

    return spack.install(args.env)


# --- fingerprint ---------------------------------------------------------------------
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

    with _connect(args) as conn:
        before = fp.fingerprints(conn, resolve_run(conn, args.run_a))
        after = fp.fingerprints(conn, resolve_run(conn, args.run_b))
    print(fp.render(fp.diff(before, after)))
    return 0


# --- workflows ---------------------------------------------------------------------------
def _add_workflows(sub: argparse._SubParsersAction) -> None:
    nig = sub.add_parser(
        "nightly", parents=[DSN], help="run the nightly suite, ingest, verdict, notify",
        description="Runs the checks tagged 'nightly' (or --tag), stores the run with trigger "
                    "'nightly', prints the verdict and exits 1 on any failure. --print-scrontab "
                    "/ --install-scrontab schedule it from the cluster itself (Slurm scrontab).")
    nig.add_argument("--system", default="local")
    nig.add_argument("-t", "--tag", action="append", default=None,
                     help="check tags to run (default: nightly)")
    nig.add_argument("--label", action="append", default=[], help="label stored with the run")
    nig.add_argument("--webhook", help="POST a JSON summary to this URL")
    nig.add_argument("--mail-cmd", help="pipe the summary to this command, e.g. "
                                        "\"mail -s 'perfguard nightly' hpc-admins@site\"")
    nig.add_argument("--schedule", default="30 2 * * *",
                     help="cron schedule for the scrontab entry (default: 02:30 daily)")
    nig.add_argument("--partition", help="partition the scrontab job itself runs in")
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
                       help="cancel the recurring nightly batch job")
    nig.add_argument("--at", help="with --submit-recurring: first start (sbatch --begin "
                                  "value, e.g. now+60) instead of the next --schedule time")
    nig.set_defaults(func=cmd_nightly)
    upg = sub.add_parser(
        "upgrade-check", parents=[DSN],
        help="after a driver/firmware upgrade: run the acceptance suite, compare with a baseline",
        description="Runs the checks tagged 'acceptance' (on --nodes only, if given), then prints "
                    "per metric the baseline value, the new value, the change and the verdict, "
                    "and what changed in the nodes' fingerprints. Mark a baseline with "
                    "`perfguard run --label pre-upgrade`.")
    upg.add_argument("--baseline", required=True, help="run id, session uuid or label")
    upg.add_argument("--nodes", help="Slurm hostlist to run on, e.g. node[3-4]")
    upg.add_argument("--system", default="local")
    upg.add_argument("-t", "--tag", action="append", default=None,
                     help="check tags to run (default: acceptance)")
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
    return forwarded


def cmd_nightly(args: argparse.Namespace) -> int:
    from perfguard.run import workflows

    if args.print_scrontab or args.install_scrontab:
        entry = workflows.scrontab_entry(args.state_dir, args.schedule,
                                         _nightly_arguments(args), args.partition)
        if args.install_scrontab:
            workflows.install_scrontab(args.state_dir, entry)
            print("installed in your scrontab (`scrontab -l` shows it):")
        print(entry, end="")
        return 0
    if args.submit_recurring:
        print(workflows.submit_recurring(args.state_dir, args.schedule,
                                         _nightly_arguments(args), args.at, args.partition))
        return 0
    if args.cancel_recurring:
        workflows.cancel_recurring(args.state_dir)
        print("cancelled the recurring nightly job")
        return 0
    if args.remove_scrontab:
        workflows.install_scrontab(args.state_dir, None)
        print("removed perfguard's entry from your scrontab")
        return 0
    outcome = workflows.nightly(args.state_dir, args.dsn, tuple(args.tag or ["nightly"]),
                                args.system, tuple(args.label))
    print(outcome.text)
    status = "FAIL" if outcome.failed else "PASS"
    if args.webhook:
        workflows.notify_webhook(args.webhook, workflows.summary(outcome, args.system))
    if args.mail_cmd:
        workflows.notify_mail(args.mail_cmd, f"perfguard nightly {status}", outcome.text)
    return 1 if outcome.failed else 0


def cmd_upgrade_check(args: argparse.Namespace) -> int:
    from perfguard.run import workflows

    outcome = workflows.upgrade_check(args.state_dir, args.dsn, args.baseline, args.nodes,
                                      tuple(args.tag or ["acceptance"]), args.system)
    print(outcome.text)
    return 1 if outcome.failed else 0


# --- report -------------------------------------------------------------------------
def _add_report(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser(
        "report", parents=[DSN], help="write a run's self-contained HTML report (and Markdown)",
        description="One HTML file that opens without network: the verdict first (failing "
                    "and regressed lines with evidence and history), curves, Himeno scaling, "
                    "nodes, a fabric sweep's matrix, environment changes, failed cases.")
    rep.add_argument("run", nargs="?", default=None,
                     help="run id, session uuid or label (default: latest)")
    rep.add_argument("--baseline", help="compare with this run (default: the previous run)")
    rep.add_argument("-o", "--output", type=Path,
                     help="HTML file (default: STATE/reports/run-N.html)")
    rep.add_argument("--markdown", type=Path,
                     help="also write a Markdown summary (e.g. for a CI job summary)")
    rep.add_argument("--junit", type=Path,
                     help="also copy the run's JUnit test results (ReFrame's) to this file")
    rep.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from perfguard.judge import verdict as vd
    from perfguard.present import htmlreport

    with _connect(args) as conn:
        run_id = vd.resolve_run(conn, args.run)
        baseline = vd.resolve_run(conn, args.baseline) if args.baseline else None
        path = args.output or htmlreport.default_path(args.state_dir, run_id)
        report = htmlreport.write(conn, run_id, path, baseline, args.markdown)
    if args.junit:
        htmlreport.copy_junit(report, args.junit)
    print(f"run {run_id}: {'FAIL' if report.failed else 'PASS'} ({report.outcome.why}); "
          f"report: {path}"
          + (f"; summary: {args.markdown}" if args.markdown else "")
          + (f"; JUnit: {args.junit}" if args.junit else ""))
    return 0


# --- fabric sweep ---------------------------------------------------------------------
def _add_sweep(sub: argparse._SubParsersAction) -> None:
    swp = sub.add_parser(
        "sweep", parents=[DSN],
        help="find the slow node, HCA or link: every node pair once, under Slurm",
        description="Runs FabricSweepCheck in one allocation: each node's HCA in loopback, "
                    "then every node pair once in rounds of disjoint pairs (circle method); "
                    "retests failing pairs with half as many at once; blames nodes, HCAs "
                    "and links with their evidence (site_config/sweep.yaml sets the "
                    "criteria). Exit 1 when anything is blamed.")
    swp.add_argument("--system", default="local", help="ReFrame system (default: local)")
    swp.add_argument("--nodes", help="Slurm hostlist of the nodes to sweep (default: the "
                                     "partition's, as many as it has)")
    swp.add_argument("--drain", action="store_true",
                     help="DRAIN blamed nodes, the reason beginning 'perfguard:' (only after "
                          "a retest confirmed them)")
    swp.add_argument("--resume", action="store_true",
                     help="only RESUME the nodes perfguard drained (others are left alone)")
    swp.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from perfguard.run import workflows

    if args.resume:
        resumed = workflows.resume_drained(args.state_dir)
        print(f"resumed: {', '.join(resumed)}" if resumed else
              "no node is drained by perfguard")
        return 0
    outcome = workflows.fabric_sweep(args.state_dir, args.dsn, args.system, args.nodes,
                                     args.drain)
    print(outcome.text)
    return 1 if outcome.findings else 0


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
    _add_cluster(sub)
    _add_run(sub)
    _add_db(sub)
    _add_ingest(sub)
    _add_thresholds(sub)
    _add_verdict(sub)
    _add_changepoints(sub)
    _add_topology(sub)
    _add_site(sub)
    _add_spack(sub)
    _add_fingerprint(sub)
    _add_workflows(sub)
    _add_sweep(sub)
    _add_report(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.site is not None:  # read by every layer below, ReFrame and its checks too
        if not args.site.is_dir():
            print(f"perfguard: error: --site {args.site}: no such directory", file=sys.stderr)
            return 2
        os.environ["PERFGUARD_SITE"] = str(args.site.resolve())
    args.state_dir = (args.state_dir or paths.state_dir()).resolve()
    try:
        return args.func(args)
    except PerfguardError as exc:  # usage 2, another nightly running 75, a failure 1
        print(f"perfguard: error: {redact_secrets(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("perfguard: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug of ours: one line, the traceback only on request
        if os.environ.get("PERFGUARD_DEBUG"):
            raise
        print(f"perfguard: internal error in `{args.command}`: {type(exc).__name__}: "
              f"{redact_secrets(str(exc))} (PERFGUARD_DEBUG=1 shows the traceback; "
              f"please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
