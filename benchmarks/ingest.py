"""Ingest, verdict, dashboards, prune and disk use as the sample table grows (to 2·10^8).

    .venv/bin/python benchmarks/ingest.py                          # 2·10^7 samples
    .venv/bin/python benchmarks/ingest.py --checkpoints 2e7,1e8,2e8  # the growth curve
    .venv/bin/python benchmarks/ingest.py --smoke     # two runs, no growth (the suite's)
    .venv/bin/python benchmarks/ingest.py --dsn ...   # any PostgreSQL (needs CREATEDB;
                                                           # a passfile= in the DSN is kept)
    .venv/bin/python benchmarks/ingest.py --against REV --worktree DIR  # REV's code (a git
        # worktree at DIR) and this code back to back on the same PostgreSQL, and the ratios
    (as root, like the README's commands; prefix sudo otherwise)

On a new database of the embedded PostgreSQL (or ``--dsn``), dropped afterwards:

1. A synthetic ReFrame report: 2,000 test cases × 125 samples = 250,000 (20 checks × 100
   variants; 2 key figures, 5 curves of 23 message sizes and 8 scaling points each), every
   metric declaring which way is better, as perfguard's checks do: the verdict judges
   every key figure and every curve size against its history.
2. The database grows run by run, two runs a day back in time from now (a nightly and an
   upgrade check), by copying a stored run in SQL with 1 % noise, up to each checkpoint.
3. At each checkpoint: the real ingest of a new report (samples/s with the table that
   big), the verdict of that run (its key-figure lines alone, then with every curve
   size), every Grafana query over one year, the bytes on disk per 10^9 samples
   (the sample table, the whole sweeps beside it and the judge's blocks).
4. After the last: the verdict of a 100,000-line run (50,000 test cases × 2 key figures,
   33 earlier nights), and `prune` of the oldest month.

Goals (2 cores): ingest ≥ 400,000 samples/s; the 4,000-line verdict < 1 s; the
100,000-line verdict < 10 s; every dashboard query < 150 ms; prune of a month < 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfguard import paths  # noqa: E402
from perfguard.judge import rules as judge  # noqa: E402
from perfguard.judge import run_findings  # noqa: E402
from perfguard.judge import verdict as vd  # noqa: E402
from perfguard.present import dashboards, htmlreport  # noqa: E402
from perfguard.store import db, queries  # noqa: E402
from perfguard.store.ingest import Block, RunMeta, binary_copy, ingest_report  # noqa: E402

CHECKS, VARIANTS = 20, 100
SIZES = [2 ** i for i in range(23)]
CURVES = {"bandwidth": ("MB/s", "higher"), "bandwidth_bi": ("MB/s", "higher"),
          "message_rate": ("msg/s", "higher"), "latency": ("us", "lower"),
          "latency_p50": ("us", "lower")}
SCALING = [1, 2, 4, 8, 16, 32, 64, 128]
PER_CASE = 2 + len(CURVES) * len(SIZES) + len(SCALING)
RUN_SPACING = timedelta(hours=12)


def synthetic_report(started: float, checks: int = CHECKS, variants: int = VARIANTS,
                     with_curves: bool = True, name: str = "SynthCheck") -> dict:
    """A report of ``checks × variants`` test cases, as perfguard's checks write them."""
    cases = []
    for check in range(checks):
        for variant in range(variants):
            samples = [{"metric": metric, "unit": unit, "coords": {"size": SIZES},
                        "values": [100.0 + i * 3.5 + variant for i in range(len(SIZES))]}
                       for metric, (unit, _) in CURVES.items()] if with_curves else []
            if with_curves:
                samples.append({"metric": "scaling", "unit": "GB/s", "coords": {"ranks": SCALING},
                                "values": [10.0 * n for n in SCALING]})
            cases.append({
                "name": f"{name}{check}", "display_name":
                    f"{name}{check} %hca=mlx5_{variant % 4} %variant={variant}",
                "unique_name": f"{name}{check}_{variant}", "system": "bench",
                "partition": "gpu", "environ": "gnu", "result": "pass", "run_index": 0,
                "jobid": str(1000 + variant), "job_nodelist": ["n1", "n2"], "job_exitcode": 0,
                "filename": "synth.py", "fail_phase": None, "fail_reason": None,
                "job_completion_time_unix": started + 60, "time_total": 60.0,
                "perfvalues": {
                    "bench:gpu:latency": [1.5 + variant / 100, 0, None, None, "us", "pass"],
                    "bench:gpu:bandwidth": [12000.0 - variant, 0, None, None, "MB/s", "pass"]},
                "perfguard_samples": samples,
                "perfguard_better": {"scaling": "higher",
                                     **{m: better for m, (_, better) in CURVES.items()}},
            })
    return {"session_info": {"data_version": "4.2", "uuid": str(uuid.uuid4()),
                             "time_start_unix": started, "time_end_unix": started + 3600,
                             "time_elapsed": 3600.0, "version": "4.10.4",
                             "cmdline": "reframe -r", "hostname": "login", "user": "bench"},
            "restored_cases": [],
            "runs": [{"testcases": cases, "num_cases": len(cases), "num_failures": 0}]}


def create_database(dsn_admin: str) -> tuple[str, str]:
    """A new database: (its name, the admin DSN pointed at it, every option kept)."""
    name = f"perfguard_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn_admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return name, make_conninfo(dsn_admin, dbname=name)


def ingest(conn: psycopg.Connection, report: dict) -> tuple[int, float, int]:
    """(run id, seconds, samples) of the real ingest of ``report``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.json"
        path.write_text(json.dumps(report))
        start = time.perf_counter()
        result = ingest_report(conn, path, RunMeta(trigger="nightly"))
        return result.run_id, time.perf_counter() - start, result.samples


def copy_runs(conn: psycopg.Connection, template: int, starts: list[datetime]) -> None:
    """Copies of run ``template`` starting at ``starts``: its runs and test cases in SQL, its
    blocks (0027: every value once) read once and written back per copy by ingest's own
    binary COPY, each value with 1 % noise; nights rolled up, as ingest does."""
    with conn.transaction():
        conn.execute("SELECT ensure_sample_month(s) FROM unnest(%s::timestamptz[]) s",
                     (starts,))
    blocks = [Block(check, metric, np.asarray(points, np.int32), cases, values,
                           None if refs[0] is None else tuple(map(list, refs)))
              for check, metric, points, cases, values, *refs in db.packed_arrays(
                  conn.cursor(binary=True), numpy_ids=True).execute(
                  "SELECT check_name, metric_id, point_ids, testcase_ids, point_values, "
                  "ref_values, ref_lowers, ref_uppers FROM sample_block WHERE run_id = %s",
                  (template,)).fetchall()]
    low, high = conn.execute("SELECT min(id), max(id) FROM testcase WHERE run_id = %s",
                             (template,)).fetchone()
    span = high - low + 1
    base = conn.execute("SELECT setval('testcase_id_seq', nextval('testcase_id_seq') + %s)",
                        (span * len(starts),)).fetchone()[0] - span * len(starts) + 1
    rng = np.random.default_rng()
    with conn.transaction():
        runs = [conn.execute(
            """INSERT INTO run (session_uuid, system_id, started_at, reframe_version, cmdline,
                                trigger)
               SELECT gen_random_uuid(), system_id, %s, reframe_version, cmdline, 'nightly'
               FROM run WHERE id = %s RETURNING id""", (start, template)).fetchone()[0]
            for start in starts]
        conn.execute(
            """INSERT INTO testcase (id, run_id, check_name, unique_name, hashcode, params,
                   partition_id, environ_id, run_index, result, slurm_jobid, nodelist,
                   job_exitcode)
               SELECT t.id - %(low)s + %(base)s + %(span)s * (c.k - 1), c.run_id, t.check_name,
                      t.unique_name, t.hashcode, t.params, t.partition_id, t.environ_id,
                      t.run_index, t.result, t.slurm_jobid, t.nodelist, t.job_exitcode
               FROM unnest(%(runs)s::bigint[]) WITH ORDINALITY c(run_id, k)
               CROSS JOIN testcase t WHERE t.run_id = %(template)s
               ORDER BY 1""",
            {"low": low, "base": base, "span": span, "runs": runs, "template": template})
        for k, (run_id, start) in enumerate(zip(runs, starts)):
            shift = base + span * k - low
            copies = [block._replace(
                testcase_ids=block.testcase_ids + shift,
                values=block.values * rng.uniform(0.9827, 1.0173, block.values.shape))
                for block in blocks]
            with conn.cursor().copy(
                    "COPY sample_block (run_id, started_at, check_name, metric_id, point_ids, "
                    "testcase_ids, point_values, ref_values, ref_lowers, ref_uppers) "
                    "FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(binary_copy(run_id, start, copies))
        conn.execute("SELECT refresh_key_figure_nights(sy.name, %s::date, %s::date) FROM run r "
                     "JOIN system sy ON sy.id = r.system_id WHERE r.id = %s",
                     (min(starts), max(starts), template))


def grow(conn: psycopg.Connection, template: int, per_run: int, target: int,
         oldest: datetime) -> datetime:
    """Add runs before ``oldest`` until the database holds ``target`` samples; returns the
    new oldest start."""
    stored = count_samples(conn)
    batch = max(1, 2_000_000 // per_run)
    began = time.perf_counter()
    added = 0
    while stored < target:
        copies = min(batch, -(-(target - stored) // per_run))
        starts = [oldest - RUN_SPACING * (i + 1) for i in range(copies)]
        copy_runs(conn, template, starts)
        oldest = starts[-1]
        stored += copies * per_run
        added += copies * per_run
        print(f"  {stored:,} samples ({added / (time.perf_counter() - began):,.0f}/s by SQL "
              f"copy)", end="\r", flush=True)
    print()
    conn.commit()
    with psycopg.connect(conn.info.dsn, autocommit=True) as maintenance:
        maintenance.execute("VACUUM (ANALYZE) sample_block, testcase, run")  # as autovacuum would
    return oldest


def count_samples(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT coalesce(sum(cardinality(testcase_ids) * cardinality(point_ids)), "
                        "0) FROM sample_block").fetchone()[0]


def timed(action, repeat: int) -> list[float]:
    durations = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        durations.append(time.perf_counter() - start)
    return durations


def ms(durations: list[float]) -> str:
    return (f"median {statistics.median(durations) * 1000:,.0f} ms, "
            f"max {max(durations) * 1000:,.0f} ms")


def time_verdict(conn: psycopg.Connection, run_id: int, repeat: int = 3) -> dict[str, float]:
    rules = judge.load_rules(vd.rules_file())
    conn.execute("SELECT analyze_results(started_at) FROM run WHERE id = %s", (run_id,))
    lines = vd.verdict(conn, run_id, rules)
    keys = timed(lambda: vd.verdict(conn, run_id, rules, with_curves=False), repeat)
    whole = timed(lambda: vd.verdict(conn, run_id, rules), repeat)
    judged = sum(1 for line in lines if line.judgement is not None)
    found = timed(lambda: run_findings.find(conn, run_id, lines), repeat)
    print(f"verdict of one run ({len(lines):,} lines, {judged:,} judged against history): "
          f"{ms(whole)}; without the curves' sizes: {ms(keys)}; its findings: {ms(found)}")
    return {"verdict": statistics.median(keys), "curves": statistics.median(whole),
            "lines": len(lines)}


def time_history_reads(conn: psycopg.Connection, run_id: int, repeat: int = 3) -> None:
    """What `perfguard thresholds derive --from-history 30` and `perfguard changepoints`
    read: every key figure's last 30 values, and every key-figure series of the system."""
    system = conn.execute("SELECT sy.name FROM run r JOIN system sy ON sy.id = r.system_id "
                          "WHERE r.id = %s", (run_id,)).fetchone()[0]
    derive = timed(lambda: queries.rows(conn, "key_figure_history",
                                        {"run_id": run_id, "count": 30}), repeat)
    series = timed(lambda: queries.rows(conn, "key_figure_series", {"system": system}),
                   repeat)
    print(f"history reads: thresholds from 30 runs of history {ms(derive)}; change points' "
          f"series of the system {ms(series)}")


def time_presenting(conn: psycopg.Connection, run_id: int) -> None:
    """What `perfguard verdict RUN` adds to the verdict (which curve point each key figure
    is) and the run's HTML report (built once, its verdict recorded before: seconds)."""
    points = timed(lambda: queries.rows(conn, "key_points", {"run_id": run_id}), 3)
    run_findings.stored_verdict(conn, run_id)  # recorded first, as `perfguard run` has it
    report = timed(lambda: htmlreport.build(conn, run_id), 1)
    print(f"presenting: key points {ms(points)}; HTML report of the run "
          f"{report[0] * 1000:,.0f} ms")


def time_dashboards(conn: psycopg.Connection, newest_run: int) -> float:
    variant = conn.execute("SELECT params::text FROM testcase WHERE check_name = 'SynthCheck7' "
                           "AND params->>'variant' = '42' LIMIT 1").fetchone()[0]
    variables = {"system": "bench", "partition": ["gpu"], "check": "SynthCheck7",
                 "metric": "bandwidth", "variant": variant, "node": ["n1", "n2"],
                 "run": str(newest_run)}
    end = conn.execute("SELECT max(started_at) FROM run").fetchone()[0] + timedelta(hours=1)
    worst = 0.0
    for query in dashboards.queries():
        sql = dashboards.expand(query.sql, variables, end - timedelta(days=365), end)
        durations = timed(lambda sql=sql: conn.execute(sql).fetchall(), 5)
        rows = len(conn.execute(sql).fetchall())
        median = statistics.median(durations) * 1000
        worst = max(worst, median)
        print(f"  dashboard {query.panel[:56]:<56} {query.ref:<4} {rows:>6} rows  "
              f"median {median:7.1f} ms  max {max(durations) * 1000:7.1f} ms")
    print(f"slowest dashboard query over one year (median): {worst:.1f} ms")
    return worst


def bytes_on_disk(conn: psycopg.Connection) -> tuple[int, int]:
    """(bytes of the blocks, every value's one copy (0027), with their indexes; bytes of
    everything else)."""
    samples = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree(%s) "
        "WHERE isleaf", ("sample_block",)).fetchone()[0]
    everything = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return int(samples), int(everything - samples)


#: Reports ingested at each checkpoint, each on a night of its own: one ingest's time
#: varied by 20 % from one run of the benchmark to the next (0.24 and 0.29 s at 2·10^8).
INGESTS = 3


def checkpoint(conn: psycopg.Connection, report_started: float) -> dict:
    """Ingest ``INGESTS`` new runs, a night apart from ``report_started`` on (the later
    checkpoints' nights lie ahead of today: the dashboards' year ends at the newest run),
    judge the last, time the dashboards, measure the disk."""
    took = []
    for night in range(INGESTS):
        run_id, seconds, samples = ingest(conn, synthetic_report(report_started + night * 86400))
        took.append(seconds)
    seconds = statistics.median(took)
    stored = count_samples(conn)
    print(f"\n== {stored:,} samples stored")
    print(f"ingest: {samples:,} samples in {seconds:.2f} s = {samples / seconds:,.0f} samples/s "
          f"(median of {INGESTS} reports, {min(took):.3f}–{max(took):.3f} s; parse + one "
          f"transaction + COPY + the night's rollup)")
    figures = time_verdict(conn, run_id)
    time_history_reads(conn, run_id)
    time_presenting(conn, run_id)
    figures["dashboards"] = time_dashboards(conn, run_id)
    sample_bytes, other = bytes_on_disk(conn)
    print(f"disk: samples with their curves {sample_bytes / 2 ** 30:.2f} GiB "
          f"({sample_bytes / stored * 1e9 / 2 ** 30:.1f} GiB per 10^9 samples), everything "
          f"else {other / 2 ** 30:.2f} GiB")
    figures.update(stored=stored, ingest=samples / seconds,
                   per_billion=sample_bytes / stored * 1e9)
    return figures


def large_run(conn: psycopg.Connection, variants: int) -> None:
    """A run of 20 × ``variants`` test cases × 2 key figures (100,000 lines at 2,500
    variants) with 33 earlier nights."""
    now = time.time()

    def report(started: float) -> dict:
        return synthetic_report(started, checks=20, variants=variants, with_curves=False,
                                name="LargeCheck")

    template, _, samples = ingest(conn, report(now - 3600 - 33 * RUN_SPACING.total_seconds()))
    started = conn.execute("SELECT started_at FROM run WHERE id = %s", (template,)).fetchone()[0]
    copy_runs(conn, template, [started + RUN_SPACING * (i + 1) for i in range(32)])
    conn.commit()
    run_id, seconds, _ = ingest(conn, report(now - 1800))
    conn.execute("ANALYZE testcase, run")
    print(f"\n== a run of {20 * variants:,} test cases ({samples:,} key figures), 33 earlier "
          f"nights")
    print(f"ingest: {samples:,} samples in {seconds:.2f} s")
    time_verdict(conn, run_id, repeat=2)


def prune_oldest_month(conn: psycopg.Connection) -> None:
    month, ends = conn.execute("SELECT name, ends FROM sample_month WHERE pruned_at IS NULL "
                               "ORDER BY starts LIMIT 1").fetchone()
    rows = conn.execute("SELECT coalesce(sum(cardinality(testcase_ids) * "
                        "cardinality(point_ids)), 0) FROM sample_block WHERE started_at < %s",
                        (ends,)).fetchone()[0]
    conn.commit()
    start = time.perf_counter()
    dropped = [m for (m,) in conn.execute("SELECT prune_sample_months(%s)", (ends,))]
    conn.commit()
    print(f"\nprune of the oldest month ({', '.join(dropped)}: {rows:,} samples, their key figures "
          f"kept as rollups): {(time.perf_counter() - start) * 1000:,.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="admin DSN of a PostgreSQL (default: the embedded one, "
                                      "as its perfguard role, which may create databases)")
    parser.add_argument("--checkpoints", default="2e7",
                        help="sample counts to measure at, comma-separated (default 2e7)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument("--smoke", action="store_true",
                        help="two runs, no growth, a small large run: that the script runs "
                             "(the test suite's size)")
    parser.add_argument("--against", metavar="REV",
                        help="first run this benchmark of git revision REV (a git worktree at "
                             "--worktree), then this code's, on the same PostgreSQL; print "
                             "both and the ratios")
    parser.add_argument("--worktree", type=Path, help="where REV's worktree is (made if absent)")
    args = parser.parse_args()
    if args.against:
        return compare(args)
    targets = [0] if args.smoke else [int(float(c)) for c in args.checkpoints.split(",")]
    admin = admin_dsn(args)
    name, dsn = create_database(admin)
    try:
        run(dsn, targets, args.smoke)
    finally:
        if not args.keep:
            drop_database(admin, name)
    return 0


def admin_dsn(args: argparse.Namespace) -> str:
    """--dsn, or the embedded cluster's PostgreSQL as its perfguard role."""
    if args.dsn:
        return args.dsn
    from perfguard.cluster.layout import ClusterLayout

    layout = ClusterLayout.load(paths.state_dir())
    if layout is None:
        sys.exit("no embedded cluster: run `perfguard cluster up` or pass --dsn")
    return layout.dsn_for("postgres")  # its password from the cluster's passfile


def drop_database(admin: str, name: str, checkpoint: bool = True) -> None:
    """Drop database ``name`` (if it is there); then, with ``checkpoint``, have its WAL
    recycled now where the role may."""
    with psycopg.connect(admin, autocommit=True) as conn:
        try:  # FORCE ends what is left of our own sessions
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        except psycopg.errors.InsufficientPrivilege:
            # an autovacuum worker on it, which only a superuser may terminate
            # (seen after the 2·10^8 run): a plain DROP stops those itself
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
        if not checkpoint:
            return
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            print("(no CHECKPOINT: the role lacks pg_checkpoint; PostgreSQL recycles "
                  "the dropped database's WAL at its next one)")


#: What ``compare`` reads of each run's output: (name, pattern of its one number).
FIGURES = [
    ("ingest, samples/s", r"^\| [\d,]+ \| ([\d,]+) \|"),
    ("verdict, 4,000 key-figure lines (ms)", r"^\| [\d,]+ \| [\d,]+ \| ([\d,]+) ms"),
    ("verdict, 4,000 lines with curves (ms)", r"^\| [\d,]+ \| [\d,]+ \| [\d,]+ ms \| ([\d,]+) ms"),
    ("slowest dashboard query (ms)", r"^\| .* \| ([\d.]+) ms \| [\d.]+ \|$"),
    ("GiB per 10^9 samples", r"^\| .* \| ([\d.]+) \|$"),
    ("verdict, 100,000 lines (ms)", r"^verdict of one run \(100,000 lines.*?median ([\d,]+) ms"),
    ("prune of a month (ms)", r"^prune of the oldest month .*: ([\d,]+) ms"),
    ("key points of a run (ms)", r"^presenting: key points median ([\d,]+) ms"),
    ("HTML report of a run (ms)", r"^presenting: .*HTML report of the run ([\d,]+) ms"),
    ("thresholds from 30 runs of history (ms)",
     r"^history reads: thresholds from 30 runs of history median ([\d,]+) ms"),
    ("change points' series of the system (ms)",
     r"^history reads: .*change points' series of the system median ([\d,]+) ms"),
]


def compare(args: argparse.Namespace) -> int:
    """REV's benchmark, then this one's, each in its own process on the same PostgreSQL
    (the one given or the embedded one), one after the other; both outputs, then each
    figure side by side with new / old."""
    here = Path(__file__).resolve().parents[1]
    tree = args.worktree or Path(tempfile.mkdtemp(prefix="perfguard-prev-")) / "tree"
    if not tree.exists():
        subprocess.run(["git", "-C", str(here), "worktree", "add", "--detach", str(tree),
                        args.against], check=True)
    common = [*(["--dsn", args.dsn] if args.dsn else []), "--checkpoints", args.checkpoints,
              *(["--smoke"] if args.smoke else []), "--keep"]
    admin = admin_dsn(args)
    outputs, kept = [], []
    try:
        for label, script in ((args.against, tree / "benchmarks" / "ingest.py"),
                              ("this code", Path(__file__).resolve())):
            print(f"=== {label}: {script}", flush=True)
            before = _bench_databases(admin)
            began = time.perf_counter()
            done = subprocess.run([sys.executable, str(script), *common], capture_output=True,
                                  text=True)
            new = sorted(_bench_databases(admin) - before)
            kept += new
            print(done.stdout + done.stderr, flush=True)
            if done.returncode:
                sys.exit(f"the benchmark of {label} failed (exit {done.returncode})")
            if len(new) != 1:  # another benchmark on this PostgreSQL made one meanwhile
                sys.exit(f"the benchmark of {label} left {len(new)} new benchmark databases "
                         f"({', '.join(new) or 'none'}), not one: run --against alone on "
                         "its PostgreSQL")
            print(f"=== {label}: {time.perf_counter() - began:.0f} s")
            outputs.append(done.stdout)
        interleaved = _interleaved_verdicts(admin, [tree, here], kept, args.smoke)
    finally:
        for name in kept:
            drop_database(admin, name)
    print(f"\n| figure | {args.against} | this code | this / {args.against} |\n|---|---|---|---|")
    for name, pattern in FIGURES:
        old, new = (_figure(output, pattern) for output in outputs)
        ratio = f"{new / old:.2f}" if old and new is not None else "-"
        print(f"| {name} | {_shown(old)} | {_shown(new)} | {ratio} |")
    for name, (old, new) in interleaved.items():
        print(f"| {name}, interleaved (median ms) | {_shown(old)} | {_shown(new)} | "
              f"{new / old:.2f} |")
    return 0


def _bench_databases(admin: str) -> set[str]:
    with psycopg.connect(admin) as conn:
        return {name for (name,) in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'perfguard_bench_%'")}


#: One side of the interleaved verdicts: the perfguard of the working directory (a code
#: tree) judges a run of DSN each time a line ("keys RUN", "curves RUN") comes on stdin.
VERDICT_WORKER = """
import sys, time
from perfguard.judge import rules, verdict
from perfguard.store import db
conn = db.connect(sys.argv[1])
chosen = rules.load_rules(verdict.rules_file())
for run in sys.argv[2:]:
    verdict.verdict(conn, int(run), chosen)
    conn.rollback()
print("ready", flush=True)
for line in sys.stdin:
    kind, run = line.split()
    start = time.perf_counter()
    verdict.verdict(conn, int(run), chosen, with_curves=kind == "curves")
    conn.rollback()
    print(time.perf_counter() - start, flush=True)
"""

#: What the interleaved verdicts judge: (label, kind, the run: its test cases' checks
#: LIKE, newest first; turns each).
TURNS = [("verdict, 4,000 key-figure lines", "keys", "NOT LIKE", 10),
         ("verdict, 4,000 lines with curves", "curves", "NOT LIKE", 10),
         ("verdict, 100,000 lines", "keys", "LIKE", 3)]


def _interleaved_verdicts(admin: str, trees: list[Path], names: list[str], smoke: bool
                          ) -> dict[str, tuple[float, float]]:
    """Each tree's verdicts of its database's newest 4,000-line run and its large run,
    the two trees taking turns (either first in turn): the box's speed drifts over the
    minutes between the two benchmarks (the same code read 650 and 860 ms an hour apart),
    and turns see the same drift. Median ms of each."""
    workers, runs = [], []
    for tree, name in zip(trees, names):
        dsn = make_conninfo(admin, dbname=name)
        with psycopg.connect(dsn) as conn:
            runs.append({like: conn.execute(
                "SELECT r.id FROM run r WHERE EXISTS (SELECT 1 FROM testcase tc WHERE "
                f"tc.run_id = r.id AND tc.check_name {like} 'LargeCheck%') "
                "ORDER BY r.started_at DESC LIMIT 1").fetchone()[0]
                for like in ("LIKE", "NOT LIKE")})
        workers.append(subprocess.Popen(
            [sys.executable, "-c", VERDICT_WORKER, dsn, *map(str, runs[-1].values())],
            cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True))
    try:
        for worker in workers:
            if worker.stdout.readline().strip() != "ready":
                sys.exit("an interleaved verdict worker failed to start")
        found = {}
        for label, kind, like, turns in TURNS:
            times: list[list[float]] = [[], []]
            for turn in range(1 if smoke else turns):
                for side in ((0, 1) if turn % 2 == 0 else (1, 0)):
                    workers[side].stdin.write(f"{kind} {runs[side][like]}\n")
                    workers[side].stdin.flush()
                    times[side].append(float(workers[side].stdout.readline()))
            found[label] = tuple(statistics.median(t) * 1000 for t in times)
        return found
    finally:
        for worker in workers:
            worker.stdin.close()
            worker.wait()


def _figure(output: str, pattern: str) -> float | None:
    """The last number ``pattern`` finds in ``output`` (the last checkpoint's)."""
    found = re.findall(pattern, output, re.MULTILINE)
    return float(found[-1].replace(",", "")) if found else None


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def run(dsn: str, targets: list[int], smoke: bool) -> None:
    per_run = CHECKS * VARIANTS * PER_CASE
    print(f"synthetic report: {CHECKS * VARIANTS:,} test cases, {per_run:,} samples")
    with db.connect(dsn) as conn:
        db.upgrade(conn)
        now = time.time()
        template, seconds, samples = ingest(conn, synthetic_report(now - 2 * 86400))
        print(f"ingest into an empty database: {samples:,} samples in {seconds:.2f} s = "
              f"{samples / seconds:,.0f} samples/s")
        oldest = conn.execute("SELECT started_at FROM run WHERE id = %s",
                              (template,)).fetchone()[0]
        table = []
        for number, target in enumerate(sorted(targets)):
            oldest = grow(conn, template, per_run, target, oldest)
            table.append(checkpoint(conn, now - 3600 + number * INGESTS * 86400))
        large_run(conn, 10 if smoke else 2500)
        prune_oldest_month(conn)
    print("\n| samples stored | ingest samples/s | verdict, key-figure lines (4,000) | "
          "verdict with the curves' sizes | slowest dashboard query | GiB per 10^9 samples |")
    print("|---|---|---|---|---|---|")
    for row in table:
        print(f"| {row['stored']:,} | {row['ingest']:,.0f} | {row['verdict'] * 1000:,.0f} ms | "
              f"{row['curves'] * 1000:,.0f} ms | {row['dashboards']:.1f} ms | "
              f"{row['per_billion'] / 2 ** 30:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
