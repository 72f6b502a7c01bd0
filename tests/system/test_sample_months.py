"""Samples by month: the month an ingest creates, the nightly rollups of key figures,
`perfguard db prune`, and the marks a test case gets as it is stored, on the real
PostgreSQL."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg

from perfguard.present import dashboards
from perfguard.store import db, queries, report
from perfguard.store.ingest import RunMeta, ingest_paths
from tests.conftest import perfguard

SEPTEMBER, OCTOBER = datetime(2025, 9, 15, 2, tzinfo=timezone.utc), \
    datetime(2025, 10, 15, 2, tzinfo=timezone.utc)


def report_at(demo_report: Path, started: datetime, folder: Path) -> Path:
    """The real demo report as a new session that started at ``started``."""
    raw = json.loads(demo_report.read_text())
    raw["session_info"]["uuid"] = str(uuid.uuid4())
    shift = started.timestamp() - raw["session_info"]["time_start_unix"]
    for key in ("time_start_unix", "time_end_unix"):
        raw["session_info"][key] += shift
    path = folder / f"report-{started:%Y%m%d}.json"
    path.write_text(json.dumps(raw))
    return path


def store_run(conn, started: datetime, values: list[float]) -> None:
    """A run with one key figure per value, stored with plain INSERTs (what the triggers
    and generated columns see from any writer, not only ingest's COPY)."""
    system = conn.execute("INSERT INTO system (name) VALUES ('old') ON CONFLICT (name) DO "
                          "UPDATE SET name = 'old' RETURNING id").fetchone()[0]
    part = conn.execute("INSERT INTO partition (system_id, name) VALUES (%s, 'p') ON CONFLICT "
                        "(system_id, name) DO UPDATE SET name = 'p' RETURNING id",
                        (system,)).fetchone()[0]
    env = conn.execute("INSERT INTO environ (name) VALUES ('e') ON CONFLICT (name) DO UPDATE "
                       "SET name = 'e' RETURNING id").fetchone()[0]
    metric = conn.execute("INSERT INTO metric (name, unit) VALUES ('bw', 'MB/s') ON CONFLICT "
                          "(name, unit) DO UPDATE SET unit = 'MB/s' RETURNING id").fetchone()[0]
    run = conn.execute("INSERT INTO run (session_uuid, system_id, started_at) VALUES "
                       "(gen_random_uuid(), %s, %s) RETURNING id", (system, started)).fetchone()[0]
    conn.execute("SELECT ensure_sample_month(%s)", (started,))
    cases = []
    for index in range(len(values)):
        cases.append(conn.execute(
            "INSERT INTO testcase (run_id, check_name, unique_name, params, partition_id, "
            "environ_id, result) VALUES (%s, 'OldCheck', %s, %s, %s, %s, 'pass') RETURNING id",
            (run, f"OldCheck_{index}", json.dumps({"v": str(index)}), part,
             env)).fetchone()[0])
    conn.execute("INSERT INTO sample_block (run_id, started_at, check_name, metric_id, "
                 "point_ids, testcase_ids, point_values) VALUES (%s, %s, 'OldCheck', %s, "
                 "'{0}', %s, %s)", (run, started, metric, cases, [[v] for v in values]))
    conn.commit()


STORED_SQL = """
SELECT r.session_uuid::text, tc.unique_name, tc.run_index, m.name, pt.coords, s.value
FROM sample s JOIN testcase tc ON tc.id = s.testcase_id JOIN run r ON r.id = tc.run_id
JOIN metric m ON m.id = s.metric_id JOIN point pt ON pt.id = s.point_id
"""
BLOCKS_SQL = """
SELECT b.run_id, b.check_name, b.point_ids, b.testcase_ids, array_agg(tc.run_id),
       array_agg(tc.check_name)
FROM sample_block b JOIN testcase tc ON tc.id = ANY(b.testcase_ids)
GROUP BY b.run_id, b.check_name, b.metric_id, b.point_ids, b.testcase_ids
"""


def assert_each_value_stored_once(dsn: str, reports: list[Path]) -> None:
    """Every value of the reports is stored exactly once (0027: in the blocks, read here
    through the point-wise view `sample`), with its test case, metric and point; each
    block holds test cases of its run and check, in id order, points in id order."""
    expected = []
    for path in reports:
        parsed = report.load(path)
        expected += [(parsed.session_uuid, tc.unique_name, tc.run_index, s.metric,
                      json.dumps(s.point, sort_keys=True), s.value)
                     for tc in parsed.testcases for s in tc.samples]
    with db.connect(dsn) as conn:
        stored = [(*row[:4], json.dumps(row[4], sort_keys=True), row[5])
                  for row in conn.execute(STORED_SQL).fetchall()]
        blocks = conn.execute(BLOCKS_SQL).fetchall()
    assert expected and sorted(stored) == sorted(expected)
    for run, check, points, cases, runs, checks in blocks:
        assert set(runs) == {run} and set(checks) == {check}
        assert cases == sorted(cases) and points == sorted(points)


def test_earlier_attempts_are_marked_and_every_test_case_has_its_variant(
        migrated_dsn: str) -> None:
    """judged_testcase keeps the last attempt of a test case: whatever inserts a retry
    marks what it supersedes, in the same statement or a later one; other test cases and
    other runs are left alone. Every test case carries the variant the judge groups its
    history by."""
    def judged(conn) -> list[tuple]:
        return conn.execute("SELECT unique_name, run_index FROM judged_testcase "
                            "ORDER BY 1, 2").fetchall()

    with db.connect(migrated_dsn) as conn:
        store_run(conn, SEPTEMBER, [100.0, 200.0])
        store_run(conn, OCTOBER, [110.0])
        retry = ("INSERT INTO testcase (run_id, check_name, unique_name, partition_id, "
                 "environ_id, run_index, result) SELECT run_id, check_name, unique_name, "
                 "partition_id, environ_id, unnest(%s::int[]), 'pass' FROM testcase "
                 "WHERE unique_name = 'OldCheck_0' AND run_index = 0 "
                 "AND run_id = (SELECT min(run_id) FROM testcase)")
        conn.execute(retry, ([1],))
        conn.commit()
        assert judged(conn) == [("OldCheck_0", 0), ("OldCheck_0", 1), ("OldCheck_1", 0)]
        marked = "SELECT run_index FROM testcase WHERE superseded ORDER BY 1"
        assert conn.execute(marked).fetchall() == [(0,)]
        conn.execute(retry, ([3, 2],))  # two more attempts at once
        conn.commit()
        assert judged(conn) == [("OldCheck_0", 0), ("OldCheck_0", 3), ("OldCheck_1", 0)]
        assert conn.execute(marked).fetchall() == [(0,), (1,), (2,)]
        variants = conn.execute(
            "SELECT unique_name, variant = md5(check_name || ' ' || params::text)::uuid "
            "FROM testcase ORDER BY id").fetchall()
        assert len(variants) == 6 and all(same for _, same in variants), variants


def test_ingest_creates_its_month_and_prune_drops_whole_months_only(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    reports = [report_at(demo_report, at, tmp_path) for at in (SEPTEMBER, OCTOBER)]
    results = ingest_paths(tmp_path, migrated_dsn, reports, RunMeta("nightly"))
    assert all(r.stored for r in results)
    with db.connect(migrated_dsn) as conn:
        months = {m.name: m for m in db.sample_months(conn)}
        assert {"sample_2025_09", "sample_2025_10"} <= set(months)
        september_samples, october_samples = (months[m].rows
                                              for m in ("sample_2025_09", "sample_2025_10"))
        nights = conn.execute("SELECT count(*) FROM key_figure_night "
                              "WHERE night = '2025-09-15'").fetchone()[0]
        key_figures = conn.execute(
            "SELECT count(*) FROM key_verdict WHERE started_at = %s AND testcase_state = 'pass'",
            (SEPTEMBER,)).fetchone()[0]
    assert september_samples > 0 and october_samples == september_samples
    assert nights == key_figures > 0
    assert_each_value_stored_once(migrated_dsn, reports)
    # 40 days before 2025-11-20 is 2025-10-11: September ended before it, October did not.
    with db.connect(migrated_dsn) as conn:
        dropped = db.prune(conn, 40, now=datetime(2025, 11, 20, tzinfo=timezone.utc))
        assert [m.name for m in dropped] == ["sample_2025_09"]
        left = {m.name: m.pruned_at for m in db.sample_months(conn)}
        assert left["sample_2025_09"] is not None and left["sample_2025_10"] is None
        blocks = dict(conn.execute("SELECT tableoid::regclass::text, count(*) FROM sample_block "
                                   "GROUP BY 1").fetchall())
        assert conn.execute("SELECT to_regclass('sample_block_2025_09')").fetchone()[0] is None
        assert list(blocks) == ["sample_block_2025_10"] and blocks["sample_block_2025_10"] > 0
        kept = conn.execute(
            "SELECT (SELECT count(*) FROM run), (SELECT count(*) FROM testcase), "
            "(SELECT count(*) FROM key_figure_night WHERE night = '2025-09-15'), "
            "(SELECT count(*) FROM sample)").fetchone()
    assert kept[0] == 2 and kept[1] > 0 and kept[2] == nights
    assert kept[3] == october_samples
    # The trend panel still draws the pruned night, from the rollup.
    with db.connect(migrated_dsn) as conn:
        [query] = [q for q in dashboards.queries()
                   if q.panel.startswith("$check $metric over time") and q.ref == "A"]
        system, partition, check, metric = conn.execute(
            "SELECT system, partition, check_name, metric FROM key_figure_night "
            "WHERE night = '2025-09-15' LIMIT 1").fetchone()
        sql = dashboards.expand(query.sql, {"system": system, "partition": [partition],
                                            "check": check, "metric": metric},
                                datetime(2025, 9, 1, tzinfo=timezone.utc),
                                datetime(2025, 10, 1, tzinfo=timezone.utc))
        assert conn.execute(sql).fetchall(), "the pruned night vanished from the trend panel"


def test_prune_command_says_what_it_drops(migrated_dsn: str, demo_report: Path,
                                          tmp_path: Path) -> None:
    ingest_paths(tmp_path, migrated_dsn, [report_at(demo_report, SEPTEMBER, tmp_path)],
                 RunMeta())
    dry = perfguard("db", "prune", "--keep", "30", "--dry-run", "--dsn", migrated_dsn)
    assert dry.returncode == 0 and "would drop sample_2025_09" in dry.stdout, dry.stderr
    done = perfguard("db", "prune", "--keep", "30", "--dsn", migrated_dsn)
    assert done.returncode == 0 and "dropped sample_2025_09" in done.stdout, done.stderr
    listed = perfguard("db", "months", "--dsn", migrated_dsn)
    [row] = [line for line in listed.stdout.splitlines() if line.startswith("sample_2025_09")]
    assert row.split()[-2:][0].startswith("20"), row  # a pruned date, not "-"
    again = perfguard("db", "prune", "--keep", "30", "--dsn", migrated_dsn)
    assert "nothing to drop" in again.stdout
    negative = perfguard("db", "prune", "--keep", "-1", "--dsn", migrated_dsn)
    assert negative.returncode != 0 and "cannot be negative" in negative.stderr


def test_packed_arrays_load_what_psycopg_loads(migrated_dsn: str) -> None:
    """The curve read's fast loader: every shape it takes over (float8[] as numpy arrays,
    ids as tuples of ints), and those it hands back to psycopg's."""
    sql = ("SELECT '{}'::float8[], '{1.5,-2e300,0.1}'::float8[], '{7,-1,2147483647}'::int4[], "
           "'{{1,2,3},{4,5,6}}'::float8[], '{1,NULL}'::float8[], '{{{1}},{{2}}}'::int4[], "
           "'[0:1]={5,6}'::int4[], '{9007199254740993,-3}'::int8[], '{{1,2},{3,4}}'::int8[]")
    with db.connect(migrated_dsn) as conn:
        generic = conn.cursor(binary=True).execute(sql).fetchone()
        packed = db.packed_arrays(conn.cursor(binary=True)).execute(sql).fetchone()
    assert [a.tolist() for a in (packed[0], packed[1], packed[3])] == [
        [], [1.5, -2e300, 0.1], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]
    assert packed[1].dtype == packed[3].dtype == np.float64
    assert [packed[1].tolist(), packed[3].tolist()] == [generic[1], generic[3]]
    assert packed[2] == (7, -1, 2147483647) and list(packed[2]) == generic[2]
    assert packed[7] == (9007199254740993, -3) and list(packed[7]) == generic[7]
    assert all(type(i) is int for i in packed[2] + packed[7])
    assert packed[4] == generic[4] and packed[5] == generic[5] and packed[8] == generic[8]
    assert list(packed[6]) == generic[6]


def blocks_read(conn, runs: list[int], times: list[datetime], parts: bool) -> list:
    """The key-figure blocks of ``runs`` read as the verdict reads them, each block's
    values, sorted."""
    bound = {"runs": runs, "times": times, "checks": ["OldCheck"], "key_figures": True}
    rows = queries.arrays_in_parts(conn, "sample_blocks", bound, split=("runs", "times")) \
        if parts else queries.arrays(conn, "sample_blocks", bound)
    return sorted(row[4].ravel().tolist() for row in rows)


def test_blocks_read_in_parts_see_what_the_judge_sees(migrated_dsn: str) -> None:
    """The verdict reads its blocks in two parts, the second on a connection of its own
    (queries.arrays_in_parts): the same rows as one read; and alone where another
    session would see other rows: a judge holding one snapshot (REPEATABLE READ) does
    not see a run stored after it, a judge that has written sees its own rows."""
    nights = [datetime(2025, 9, day, 2, tzinfo=timezone.utc) for day in range(1, 8)]
    with psycopg.connect(migrated_dsn) as conn:
        for number, night in enumerate(nights[:6]):
            store_run(conn, night, [float(number), 10.0 + number])
    with db.connect(migrated_dsn) as judge:
        runs = [run for (run,) in judge.execute("SELECT id FROM run ORDER BY started_at")]
        assert blocks_read(judge, runs, nights[:6], parts=True) == blocks_read(
            judge, runs, nights[:6], parts=False) == [[float(n), 10.0 + n] for n in range(6)]
        judge.execute("UPDATE sample_block SET point_values = '{{99}, {99}}' WHERE run_id = %s",
                      (runs[-1],))  # not committed
        assert [99.0, 99.0] in blocks_read(judge, runs, nights[:6], parts=True)
        judge.rollback()
    with db.connect(migrated_dsn) as judge:
        judge.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        runs = [run for (run,) in judge.execute("SELECT id FROM run ORDER BY started_at")]
        with psycopg.connect(migrated_dsn) as writer:  # committed after the judge's snapshot
            store_run(writer, nights[6], [6.0, 16.0])
            runs.append(writer.execute("SELECT max(id) FROM run").fetchone()[0])
        assert blocks_read(judge, runs, nights, parts=True) == [
            [float(n), 10.0 + n] for n in range(6)]
