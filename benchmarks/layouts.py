"""The two one-copy layouts of issue 52 measured side by side on one PostgreSQL.

    .venv/bin/python benchmarks/layouts.py              # 40 runs: 10^7 values
    .venv/bin/python benchmarks/layouts.py --runs 80    # 2·10^7
    .venv/bin/python benchmarks/layouts.py --smoke      # 3 runs (the suite's size)
    .venv/bin/python benchmarks/layouts.py --dsn ...    # any PostgreSQL (needs CREATEDB)

- **blocks** (chosen, 0027): one row per run × check × metric × point list, the values a
  float8[] matrix (test cases × points);
- **per test case**: one row per run × test case × metric, its sweep's points and values
  as arrays (``benchmarks/layouts.sql``: the table and its one index).

On a new database (dropped afterwards): benchmarks/ingest.py's synthetic report (2,000
test cases × 125 values: 2 key figures, 5 curves of 23 sizes and 8 scaling points) through
the real ingest, copied to ``--runs`` runs with 1 % noise (``ingest.copy_runs``); the
per-test-case table filled from the blocks, so both hold the same values. Measured:

1. bytes per value on disk, indexes included (``pg_total_relation_size``);
2. writing one run's values (250,000) into each: the blocks by ingest's own binary COPY
   (``binary_copy``), the rows by psycopg's binary COPY of numpy rows (``write_row``);
3. the judge's read of 33 runs' curves into matrices of values grouped by check, metric
   and point list, as ``judge.history`` groups them: the blocks come so; the rows are
   grouped after the read (numpy, one stack per group).

Best of 3 for the times; the box's other load is not controlled (say it).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import ingest as bench  # noqa: E402
import real_nights  # noqa: E402

from perfguard.store import db  # noqa: E402
from perfguard.store.ingest import binary_copy  # noqa: E402

SQL = ROOT / "benchmarks" / "layouts.sql"
#: The runs the judge reads for a verdict (twice the window and its recent nights).
JUDGED_RUNS = 33


def statements() -> dict[str, str]:
    """layouts.sql's statements by their ``-- name:``."""
    parts = re.split(r"^-- name: (\w+)\n", SQL.read_text(), flags=re.M)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2])}


#: layouts.sql's statements by name.
SQL_OF = statements()


def best(action: Callable[[], object]) -> float:
    """The fastest of 3 timings of ``action`` (``ingest.timed``), in seconds."""
    return min(bench.timed(action, 3))


def grown(conn: psycopg.Connection, runs: int) -> list[int]:
    """``runs`` runs of the synthetic report in the blocks (the first through the real
    ingest), oldest first."""
    now = time.time()
    template, _, _ = bench.ingest(conn, bench.synthetic_report(now - 3600))
    started = conn.execute(SQL_OF["run_start"], (template,)).fetchone()[0]
    bench.copy_runs(conn, template, [started - bench.RUN_SPACING * (i + 1)
                                     for i in range(runs - 1)])
    conn.commit()
    return [r for (r,) in conn.execute(SQL_OF["runs"]).fetchall()]


def table_bytes(conn: psycopg.Connection) -> tuple[int, int]:
    """(the blocks' bytes, the per-test-case table's), indexes included."""
    rows = conn.execute(SQL_OF["row_bytes"]).fetchone()[0]
    return bench.bytes_on_disk(conn)[0], int(rows)


def write_times(conn: psycopg.Connection, run_id: int) -> tuple[float, float]:
    """Seconds to write one run's values into each layout (in a transaction rolled back)."""
    blocks = [bench.Block(check, metric, np.asarray(points, np.int32), cases, values)
              for check, metric, points, cases, values in db.packed_arrays(
                  conn.cursor(binary=True), numpy_ids=True).execute(
                  SQL_OF["blocks_of_run"], (run_id,)).fetchall()]
    started = conn.execute(SQL_OF["run_start"], (run_id,)).fetchone()[0]
    conn.commit()

    def into_blocks() -> None:
        with conn.transaction(force_rollback=True), conn.cursor().copy(
                "COPY sample_block (run_id, started_at, check_name, metric_id, point_ids, "
                "testcase_ids, point_values, ref_values, ref_lowers, ref_uppers) "
                "FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(binary_copy(run_id, started, blocks))

    def into_rows() -> None:
        with conn.transaction(force_rollback=True), conn.cursor(binary=True).copy(
                "COPY per_testcase (run_id, started_at, testcase_id, metric_id, point_ids, "
                "point_values) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "timestamptz", "int8", "int4", "int4[]", "float8[]"])
            for block in blocks:
                points = block.point_ids.tolist()
                for case, values in zip(block.testcase_ids.tolist(), block.values.tolist()):
                    copy.write_row((run_id, started, case, block.metric_id, points, values))

    return best(into_blocks), best(into_rows)


def read_times(conn: psycopg.Connection, runs: list[int], sql: dict[str, str]
               ) -> tuple[float, float, int]:
    """Seconds for the judge's read of ``runs``' curves from each layout into matrices
    grouped by check, metric and point list; and how many values were read."""
    cursor = db.packed_arrays(conn.cursor(binary=True), numpy_ids=True)
    bound = {"runs": runs}

    def by_blocks() -> list[np.ndarray]:
        return [values for *_, values in cursor.execute(sql["curves_by_block"],
                                                          bound).fetchall()]

    def by_rows() -> list[np.ndarray]:
        groups: dict[tuple, list] = defaultdict(list)
        for check, metric, points, case, values in cursor.execute(
                sql["curves_by_testcase"], bound).fetchall():
            groups[(check, metric, points)].append((case, values))
        return [np.stack([values for _, values in members]) for members in groups.values()]

    blocks, rows = by_blocks(), by_rows()
    read = sum(matrix.size for matrix in blocks)
    if read != sum(matrix.size for matrix in rows) or not np.isclose(
            sum(float(m.sum()) for m in blocks), sum(float(m.sum()) for m in rows)):
        raise SystemExit("the two layouts hold different values: the fill is wrong")
    return best(by_blocks), best(by_rows), read


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="admin DSN of a PostgreSQL whose role may create "
                                      "databases (default: the embedded cluster's)")
    parser.add_argument("--runs", type=int, default=40, help="runs stored (default 40)")
    parser.add_argument("--smoke", action="store_true", help="3 runs: that the script runs")
    args = parser.parse_args()
    runs_wanted = 3 if args.smoke else args.runs
    admin = args.dsn or real_nights.embedded_admin()
    sql = SQL_OF
    name, dsn = bench.create_database(admin)
    try:
        with db.connect(dsn) as conn:
            db.upgrade(conn)
            runs = grown(conn, runs_wanted)
            conn.execute(sql["create"])
            start = time.perf_counter()
            conn.execute(sql["fill"])
            conn.commit()
            fill = time.perf_counter() - start
            with psycopg.connect(dsn, autocommit=True) as maintenance:
                maintenance.execute(SQL_OF["analyze"])
            values = bench.count_samples(conn)
            blocks_bytes, rows_bytes = table_bytes(conn)
            write_blocks, write_rows = write_times(conn, runs[-1])
            read_blocks, read_rows, read = read_times(conn, runs[-JUDGED_RUNS:], sql)
    finally:
        bench.drop_database(admin, name, checkpoint=False)
    per_run = values // len(runs)
    print(f"two layouts of {values:,} values ({len(runs)} runs of {per_run:,}); the "
          f"per-test-case table filled from the blocks in {fill:.1f} s\n")
    print("| layout | bytes per value (indexes included) | write one run "
          f"({per_run:,} values) | judge's read of {min(JUDGED_RUNS, len(runs))} runs' curves "
          f"({read:,} values) |\n|---|---|---|---|")
    print(f"| blocks: run × check × metric × point list (chosen) | "
          f"{blocks_bytes / values:.1f} | {write_blocks * 1000:,.0f} ms | "
          f"{read_blocks * 1000:,.0f} ms |")
    print(f"| rows: run × test case × metric | {rows_bytes / values:.1f} | "
          f"{write_rows * 1000:,.0f} ms | {read_rows * 1000:,.0f} ms |")
    print(f"| rows / blocks | {rows_bytes / blocks_bytes:.2f} | {write_rows / write_blocks:.1f} "
          f"| {read_rows / read_blocks:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
