"""Ingest throughput and verdict/time-series query latency at 20 million stored samples.

    sudo .venv/bin/python benchmarks/ingest.py            # uses the embedded PostgreSQL
    sudo .venv/bin/python benchmarks/ingest.py --smoke    # one report, no replication
    sudo .venv/bin/python benchmarks/ingest.py --dsn ...  # any PostgreSQL (needs CREATEDB;
                                                          # a passfile= in the DSN is kept)

1. Writes a synthetic ReFrame report: 2,000 test cases × 125 points = 250,000 samples
   (20 checks × 100 variants; 2 key figures and a 123-point curve per test case).
2. Ingests it into a new database through `perfguard.ingest` and reports samples/s.
3. Replicates the stored run in SQL until 20 million samples span one year of runs.
4. Times the verdict of one run and a single-metric time series over one year.

5. Times every Grafana dashboard query (panels, annotation, variables), expanded as
   Grafana does, over the last 90 days.

Targets (2 cores): ingest ≥ 100,000 samples/s; verdict < 1 s; series and every
dashboard query < 150 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfguard.judge import verdict as vd  # noqa: E402
from perfguard.present import dashboards
from perfguard.site import paths  # noqa: E402
from perfguard.store import db
from perfguard.store.ingest import RunMeta, ingest_report  # noqa: E402

CHECKS, VARIANTS, CURVE_POINTS = 20, 100, 123
SERIES_SQL = """
SELECT r.started_at AS time, s.value
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN testcase tc ON tc.run_id = r.id AND tc.check_name = %(check)s
JOIN sample s ON s.testcase_id = tc.id AND s.point_id = 0
JOIN metric m ON m.id = s.metric_id AND m.name = %(metric)s
WHERE sy.name = %(system)s AND tc.params @> %(params)s
  AND r.started_at >= now() - interval '1 year'
ORDER BY r.started_at
"""


def synthetic_report(started: float) -> dict:
    cases = []
    for check in range(CHECKS):
        for variant in range(VARIANTS):
            curve = [{"metric": "bandwidth", "unit": "MB/s",
                      "coords": {"size": [2 ** (i % 23) for i in range(CURVE_POINTS)],
                                 "rep": [i // 23 for i in range(CURVE_POINTS)]},
                      "values": [100.0 + i * 3.5 + variant for i in range(CURVE_POINTS)]}]
            cases.append({
                "name": f"SynthCheck{check}", "display_name":
                    f"SynthCheck{check} %hca=mlx5_{variant % 4} %variant={variant}",
                "unique_name": f"SynthCheck{check}_{variant}", "system": "bench",
                "partition": "gpu", "environ": "gnu", "result": "pass", "run_index": 0,
                "jobid": str(1000 + variant), "job_nodelist": ["n1", "n2"], "job_exitcode": 0,
                "perfvalues": {
                    "bench:gpu:latency": [1.5 + variant / 100, 0, None, None, "us", "pass"],
                    "bench:gpu:bandwidth": [12000.0 - variant, 0, None, None, "MB/s", "pass"]},
                "perfguard_samples": curve,
            })
    return {"session_info": {"data_version": "4.2", "uuid": str(uuid.uuid4()),
                             "time_start_unix": started, "time_end_unix": started + 3600,
                             "version": "4.10.4", "cmdline": "reframe -r", "hostname": "login",
                             "user": "bench"},
            "runs": [{"testcases": cases}]}


def create_database(dsn_admin: str) -> tuple[str, str]:
    """A new database: (its name, the admin DSN pointed at it, every option kept)."""
    name = f"perfguard_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn_admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return name, make_conninfo(dsn_admin, dbname=name)


def replicate(conn: psycopg.Connection, run_id: int, copies: int) -> None:
    """Copies of the stored run, spread evenly over the past year, in SQL."""
    for copy in range(1, copies + 1):
        with conn.transaction():
            new_run = conn.execute(
                """INSERT INTO run (session_uuid, system_id, started_at, finished_at,
                                    reframe_version, cmdline, trigger, labels)
                   SELECT gen_random_uuid(), system_id,
                          now() - make_interval(days => %s), NULL, reframe_version, cmdline,
                          'nightly', '{}' FROM run WHERE id = %s RETURNING id""",
                (int(copy * 364 / copies), run_id)).fetchone()[0]
            conn.execute(
                """CREATE TEMP TABLE idmap ON COMMIT DROP AS
                   SELECT id AS old_id, nextval('testcase_id_seq') AS new_id
                   FROM testcase WHERE run_id = %s""", (run_id,))
            conn.execute(
                """INSERT INTO testcase (id, run_id, check_name, unique_name, hashcode, params,
                        partition_id, environ_id, run_index, result, slurm_jobid, nodelist,
                        job_exitcode)
                   SELECT m.new_id, %s, check_name, unique_name, hashcode, params, partition_id,
                          environ_id, run_index, result, slurm_jobid, nodelist, job_exitcode
                   FROM testcase t JOIN idmap m ON m.old_id = t.id""", (new_run,))
            conn.execute(
                """INSERT INTO sample (testcase_id, metric_id, point_id, value)
                   SELECT m.new_id, metric_id, point_id, value * (0.95 + random() * 0.1)
                   FROM sample s JOIN idmap m ON m.old_id = s.testcase_id""")
        print(f"  replicated {copy}/{copies}", end="\r", flush=True)
    print()
    conn.execute("SELECT brin_summarize_new_values('sample_testcase_brin')")
    conn.execute("ANALYZE")
    conn.commit()


def timed(action, repeat: int) -> list[float]:
    durations = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        durations.append(time.perf_counter() - start)
    return durations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="admin DSN of a PostgreSQL (default: the embedded one, "
                                      "as its perfguard role, which may create databases)")
    parser.add_argument("--samples", type=int, default=20_000_000,
                        help="stored samples for the query timings (default 20 million)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument("--smoke", action="store_true",
                        help="one report (250,000 samples), no replication: that the script "
                             "runs (the test suite's size)")
    args = parser.parse_args()
    if args.smoke:
        args.samples = CHECKS * VARIANTS * (CURVE_POINTS + 2)
    if args.dsn:
        admin = args.dsn
    else:
        from perfguard.cluster.layout import ClusterLayout

        layout = ClusterLayout.load(paths.state_dir())
        if layout is None:
            sys.exit("no embedded cluster: run `perfguard cluster up` or pass --dsn")
        admin = layout.dsn_for("postgres")  # its password from the cluster's passfile
    name, dsn = create_database(admin)
    try:
        run(dsn, args.samples)
    finally:
        if not args.keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
                try:  # the dropped database's WAL is recycled now, where the role may
                    conn.execute("CHECKPOINT")
                except psycopg.errors.InsufficientPrivilege:
                    print("(no CHECKPOINT: the role lacks pg_checkpoint; PostgreSQL recycles "
                          "the dropped database's WAL at its next one)")
    return 0


def run(dsn: str, target_samples: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "synthetic.json"
        report_path.write_text(json.dumps(synthetic_report(time.time() - 3600)))
        per_run = CHECKS * VARIANTS * (CURVE_POINTS + 2)
        print(f"synthetic report: {per_run:,} samples, "
              f"{report_path.stat().st_size / 1e6:.1f} MB")
        with db.connect(dsn) as conn:
            db.upgrade(conn)
            start = time.perf_counter()
            result = ingest_report(conn, report_path, RunMeta())
            elapsed = time.perf_counter() - start
    print(f"ingest: {result.samples:,} samples in {elapsed:.2f} s = "
          f"{result.samples / elapsed:,.0f} samples/s (parse + one transaction + COPY)")
    with db.connect(dsn) as conn:
        copies = max(0, target_samples // per_run - 1)
        print(f"replicating the run {copies} times to reach "
              f"{per_run * (copies + 1):,} samples …")
        replicate(conn, result.run_id, copies)
        total = conn.execute("SELECT count(*) FROM sample").fetchone()[0]
        print(f"stored samples: {total:,}")
        newest = vd.resolve_run(conn, "latest")
        verdict_times = timed(lambda: vd.verdict(conn, newest), 5)
        lines = len(vd.verdict(conn, newest))
        print(f"verdict of one run ({lines:,} lines): median "
              f"{statistics.median(verdict_times) * 1000:.0f} ms, "
              f"max {max(verdict_times) * 1000:.0f} ms")
        params = psycopg.types.json.Jsonb({"variant": "42"})
        query = {"system": "bench", "check": "SynthCheck7", "metric": "bandwidth",
                 "params": params}
        series_times = timed(lambda: conn.execute(SERIES_SQL, query).fetchall(), 20)
        points = len(conn.execute(SERIES_SQL, query).fetchall())
        print(f"time series (one system/check/metric/variant, one year, {points} points): "
              f"median {statistics.median(series_times) * 1000:.1f} ms, "
              f"max {max(series_times) * 1000:.1f} ms")
        time_dashboards(conn, newest)


def time_dashboards(conn: psycopg.Connection, newest_run: int) -> None:
    variant = conn.execute("SELECT params::text FROM testcase WHERE check_name = 'SynthCheck7' "
                           "AND params->>'variant' = '42' LIMIT 1").fetchone()[0]
    variables = {"system": "bench", "partition": ["gpu"], "check": "SynthCheck7",
                 "metric": "bandwidth", "variant": variant, "node": ["n1", "n2"],
                 "run": str(newest_run)}
    end = datetime.now(timezone.utc)
    worst = 0.0
    for query in dashboards.queries():
        sql = dashboards.expand(query.sql, variables, end - timedelta(days=90), end)
        durations = timed(lambda sql=sql: conn.execute(sql).fetchall(), 5)
        rows = len(conn.execute(sql).fetchall())
        median = statistics.median(durations) * 1000
        worst = max(worst, median)
        print(f"dashboard {query.panel[:58]:<58} {query.ref:<4} {rows:>6} rows  "
              f"median {median:7.1f} ms  max {max(durations) * 1000:7.1f} ms")
    print(f"slowest dashboard query (median): {worst:.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
