"""Load ReFrame reports into PostgreSQL: one transaction per report, COPY for the bulk.

Idempotent by session uuid, decided by the database: of several concurrent ingests
of one report exactly one stores it, the others find it "already stored". A report
that cannot be stored now (DB down, DB error) is copied to the spool under a name
of its own, with its metadata and the reason beside it; `ingest --spool` retries
it later. A report that can never be stored (malformed, truncated) is parked in
``spool/rejected/`` with the reason instead of being retried forever.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from perfguard.errors import PerfguardError
from perfguard.store import db
from perfguard.store.report import Report, ReportError, Series, TestCase, load, no_cyclic_gc
from perfguard.store.spool import archive, archive_dir, in_spool, meta_path, reject, spool


@dataclass(frozen=True)
class RunMeta:
    """What the report itself does not say: why the run happened and which library ran."""
    trigger: str = "manual"
    labels: tuple[str, ...] = ()
    library_revision: str | None = None

    def save_beside(self, report: Path) -> None:
        meta_path(report).write_text(json.dumps({
            "trigger": self.trigger, "labels": list(self.labels),
            "library_revision": self.library_revision}) + "\n")

    @classmethod
    def beside(cls, report: Path, default: RunMeta | None = None) -> RunMeta:
        path = meta_path(report)
        if not path.exists():
            return default or cls()
        try:
            data = json.loads(path.read_text())
            labels = data.get("labels", [])
            if not isinstance(labels, list):
                raise TypeError("labels must be a list")
            return cls(str(data.get("trigger", "manual")), tuple(map(str, labels)),
                       data.get("library_revision"))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise ReportError(f"{path}: unreadable run metadata of {report.name} "
                              f"({exc}); fix or delete it and ingest again") from exc


@dataclass
class IngestResult:
    report: Path
    run_id: int | None
    stored: bool
    testcases: int = 0
    samples: int = 0
    message: str = ""


#: The advisory lock that lets one report at a time into the tables ("pfgi").
INGEST_LOCK = 0x70666769


def ingest_report(conn: psycopg.Connection, path: Path, meta: RunMeta,
                  kept_at: Path | None = None) -> IngestResult:
    """Store one report atomically; raises PerfguardError with file and reason on failure.

    ``kept_at`` is where the report will live once stored (run.report_path), if not
    where it is now.
    """
    report = load(path)
    if report.dry_run:
        raise ReportError(f"{path}: a --dry-run report (ReFrame generated job scripts; no "
                          f"test ran, nothing was measured): not stored. Run without "
                          f"--dry-run to measure")
    report.path = (kept_at or path).resolve()
    try:
        # Its month's partition first, in a transaction of its own: creating one locks
        # the whole sample table, which must not wait for (or hold up) a long ingest.
        with conn.transaction():
            conn.execute("SELECT ensure_sample_month(%s)", (report.started,))
        with conn.transaction(), no_cyclic_gc():
            # Reports are stored one at a time: two at once deadlocked (measured: one
            # took its ANALYZE lock on testcase while waiting on a row the other had
            # inserted, the other then waited for that ANALYZE; one run was spooled).
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (INGEST_LOCK,))
            system = system_id(conn, _report_system(report))
            run_id = _insert_run(conn, system, report, meta)
            if run_id is None:
                existing = conn.execute("SELECT id FROM run WHERE session_uuid = %s",
                                        (report.session_uuid,)).fetchone()[0]
                return IngestResult(path, existing, False,
                                    message=f"session {report.session_uuid} already stored")
            samples = _copy_testcases(conn, system, run_id, report)
            conn.execute("SELECT analyze_testcases(%s)",  # before the views read a
                         (len(report.testcases),))  # large run (repeatable/20_testcases.sql)
            _insert_fingerprints(conn, system, run_id, report)
            _record_directions(conn, report)
            conn.execute("SELECT refresh_key_figure_nights(name, night, night) FROM system, "
                         "(SELECT (%s::timestamptz AT TIME ZONE 'UTC')::date AS night) n "
                         "WHERE id = %s", (report.started, system))
            conn.execute("UPDATE run SET missed_thresholds = (SELECT count(*) FROM key_verdict "
                         "WHERE run_id = %(id)s AND status = 'fail') WHERE id = %(id)s",
                         {"id": run_id})
            # New sample pages sit in unsummarized BRIN ranges, which every curve lookup
            # would scan until autovacuum gets to them: summarize them now.
            conn.execute("SELECT summarize_new_samples()")  # as the owner (SECURITY DEFINER)
    except psycopg.Error as exc:
        raise PerfguardError(f"{path}: database rejected the report: {exc}".strip()) from exc
    except (OverflowError, ValueError) as exc:  # a number PostgreSQL cannot hold
        raise ReportError(f"{path}: a value cannot be stored ({exc})") from exc
    return IngestResult(path, run_id, True, len(report.testcases), samples)


# --- dimension rows -----------------------------------------------------------
def _id(conn: psycopg.Connection, table: str, keys: dict[str, Any]) -> int:
    columns = ", ".join(keys)
    where = " AND ".join(f"{k} = %({k})s" for k in keys)
    values = ", ".join(f"%({k})s" for k in keys)
    row = conn.execute(f"SELECT id FROM {table} WHERE {where}", keys).fetchone()
    if row:
        return row[0]
    return conn.execute(
        f"INSERT INTO {table} ({columns}) VALUES ({values}) "
        f"ON CONFLICT ({columns}) DO UPDATE SET {list(keys)[0]} = EXCLUDED.{list(keys)[0]} "
        f"RETURNING id", keys).fetchone()[0]


def system_id(conn: psycopg.Connection, name: str) -> int:
    return _id(conn, "system", {"name": name})


def node_id(conn: psycopg.Connection, system: int, name: str) -> int:
    return _id(conn, "node", {"system_id": system, "name": name})


def _report_system(report: Report) -> str:
    """The one system a report's test cases ran on."""
    systems = {tc.system for tc in report.testcases} or {"unknown"}
    if len(systems) > 1:
        raise ReportError(f"{report.path}: one report, several systems {sorted(systems)}")
    return systems.pop()


def _insert_run(conn: psycopg.Connection, system: int, report: Report,
                meta: RunMeta) -> int | None:
    """The new run's id, or None when this session is stored already (possibly by a
    concurrent ingest, which this insert waits for)."""
    row = conn.execute(
        """INSERT INTO run (session_uuid, system_id, started_at, finished_at, reframe_version,
                            cmdline, library_revision, trigger, labels, hostname, username,
                            report_path)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
           ON CONFLICT (session_uuid) DO NOTHING RETURNING id""",
        (report.session_uuid, system, report.started, report.finished,
         report.reframe_version, report.cmdline, meta.library_revision, meta.trigger,
         list(meta.labels), report.hostname, report.user, str(report.path)),
    ).fetchone()
    return row[0] if row else None


def _dimension_ids(conn: psycopg.Connection, report: Report
                   ) -> tuple[dict[tuple[str, str], int], dict[tuple, int]]:
    """Ids of every metric and point of the report, upserted in bulk."""
    metric_units: set[tuple[str, str]] = set()
    keys: set[tuple] = set()
    seen: set[tuple] = set()
    for tc in report.testcases:
        found_metrics, found_keys = tc.dimensions(seen)
        metric_units |= found_metrics
        keys |= found_keys
    keys.discard(())
    metrics = {key: _id(conn, "metric", {"name": key[0], "unit": key[1]})
               for key in sorted(metric_units)}
    documents = [Jsonb(dict(key)) for key in keys]
    conn.execute("INSERT INTO point (coords) SELECT unnest(%s::jsonb[]) "
                 "ON CONFLICT (coords) DO NOTHING", (documents,))
    by_json = {_canonical(coords): point_id for point_id, coords in conn.execute(
        "SELECT id, coords FROM point WHERE coords = ANY(%s::jsonb[])", (documents,))}
    points = {key: by_json[_canonical(dict(key))] for key in keys}
    points[()] = 0
    return metrics, points


def _canonical(coords: dict) -> str:
    return json.dumps(coords, sort_keys=True)


def _copy_testcases(conn: psycopg.Connection, system: int, run_id: int, report: Report) -> int:
    """COPY test cases with ids drawn up front, then COPY their samples."""
    if not report.testcases:
        return 0
    partitions = {name: _id(conn, "partition", {"system_id": system, "name": name})
                  for name in {tc.partition for tc in report.testcases}}
    environs = {name: _id(conn, "environ", {"name": name})
                for name in {tc.environ for tc in report.testcases}}
    metrics, points = _dimension_ids(conn, report)
    ids = [r[0] for r in conn.execute(
        "SELECT nextval('testcase_id_seq') FROM generate_series(1, %s)",
        (len(report.testcases),)).fetchall()]
    with conn.cursor().copy(
            "COPY testcase (id, run_id, check_name, unique_name, hashcode, params, partition_id,"
            " environ_id, run_index, result, fail_phase, fail_reason, slurm_jobid, nodelist,"
            " job_exitcode, time_total) FROM STDIN") as copy:
        for tc_id, tc in zip(ids, report.testcases):
            copy.write_row(_testcase_row(tc_id, run_id, tc, partitions, environs))
    count = 0
    point_ids: dict[tuple, list[int]] = {}  # by series signature
    with conn.cursor().copy(
            "COPY sample (testcase_id, metric_id, point_id, value, ref_value, ref_lower,"
            " ref_upper, started_at) FROM STDIN") as copy:
        for chunk, rows in _sample_lines(ids, report.testcases, metrics, points, point_ids,
                                         report.started.isoformat()):
            copy.write(chunk)
            count += rows
    sweeps = _sweeps(ids, report.testcases, metrics, points, point_ids)
    with conn.cursor().copy(
            "COPY curve (testcase_id, metric_id, started_at, point_ids, point_values) "
            "FROM STDIN") as copy:
        copy.write(_curve_lines(sweeps, report.started.isoformat()))
    with conn.cursor().copy(
            "COPY sample_block (run_id, started_at, check_name, metric_id, point_ids, "
            "testcase_ids, point_values) FROM STDIN") as copy:
        for block in _sample_blocks(_key_figures(ids, report.testcases, metrics) + sweeps):
            copy.write_row((run_id, report.started, *block))
    return count


def _copy_value(value: float | None) -> str:
    return "\\N" if value is None else repr(value)


def _point_ids(series: Series, points: dict[tuple, int],
               known: dict[tuple, list[int]]) -> list[int]:
    """The ids of ``series``' points, looked up once per series signature (``known``,
    shared by the samples' and the sweeps' rows of one ingest)."""
    signature = series.signature()
    if signature not in known:
        known[signature] = [points[key] for key in series.point_keys()]
    return known[signature]


def _sample_lines(ids: list[int], testcases: list[TestCase],
                  metrics: dict[tuple[str, str], int], points: dict[tuple, int],
                  point_ids: dict[tuple, list[int]], started: str, chunk_rows: int = 20000):
    """COPY text rows built directly (adapting 250,000 rows one by one is the bottleneck),
    streamed in chunks so the server parses one chunk while we build the next. Every
    sample carries its run's start, the key of its month's partition."""
    lines: list[str] = []
    no_reference = f"\t\\N\t\\N\t\\N\t{started}\n"
    for tc_id, tc in zip(ids, testcases):
        for s in tc.key_samples:
            lines.append(f"{tc_id}\t{metrics[(s.metric, s.unit)]}\t0\t{s.value!r}\t"
                         f"{_copy_value(s.reference)}\t{_copy_value(s.lower)}\t"
                         f"{_copy_value(s.upper)}\t{started}\n")
        for series in tc.series:
            prefix = f"{tc_id}\t{metrics[(series.metric, series.unit)]}\t"
            lines.extend(f"{prefix}{point_id}\t{value!r}{no_reference}"
                         for point_id, value in zip(_point_ids(series, points, point_ids),
                                                    series.values))
        if len(lines) >= chunk_rows:
            yield "".join(lines), len(lines)
            lines = []
    if lines:
        yield "".join(lines), len(lines)


class Sweep(NamedTuple):
    """A test case's sweep of one metric, its points in id order."""
    testcase_id: int
    check: str
    metric_id: int
    point_ids: tuple[int, ...]
    values: tuple[float, ...]


def _sweeps(ids: list[int], testcases: list[TestCase], metrics: dict[tuple[str, str], int],
            points: dict[tuple, int], point_ids: dict[tuple, list[int]]) -> list[Sweep]:
    """Every sweep of the report, points in id order (the order `curve` keeps them in):
    a curve whose nights list the same points alike is split into series by one
    transposition (history.py)."""
    sweeps = []
    for tc_id, tc in zip(ids, testcases):
        for series in tc.series:
            if series.values:
                in_order, values = zip(*sorted(zip(_point_ids(series, points, point_ids),
                                                   series.values)))
                sweeps.append(Sweep(tc_id, tc.check, metrics[(series.metric, series.unit)],
                                    in_order, values))
    return sweeps


def _curve_lines(sweeps: list[Sweep], started: str) -> str:
    """COPY text rows of every sweep, whole (`curve`), built directly as the samples are."""
    return "".join(f"{s.testcase_id}\t{s.metric_id}\t{started}\t"
                   f"{{{','.join(map(str, s.point_ids))}}}\t{{{','.join(map(repr, s.values))}}}\n"
                   for s in sweeps)


def _key_figures(ids: list[int], testcases: list[TestCase],
                 metrics: dict[tuple[str, str], int]) -> list[Sweep]:
    """Every key figure of the report as a sweep of the one point 0."""
    return [Sweep(tc_id, tc.check, metrics[(s.metric, s.unit)], (0,), (s.value,))
            for tc_id, tc in zip(ids, testcases) for s in tc.key_samples]


def _sample_blocks(sweeps: list[Sweep]) -> list[tuple]:
    """The run's sweeps (key figures: of the point 0) of one check, metric and point list
    as one block (0019): its test cases in id order and their values as one matrix,
    big-endian float8."""
    blocks: dict[tuple, list[Sweep]] = defaultdict(list)
    for sweep in sorted(sweeps, key=lambda sweep: sweep.testcase_id):
        blocks[(sweep.check, sweep.metric_id, sweep.point_ids)].append(sweep)
    return [(check, metric_id, list(point_ids), [s.testcase_id for s in members],
             np.array([s.values for s in members], dtype=">f8").tobytes())
            for (check, metric_id, point_ids), members in blocks.items()]


def _testcase_row(tc_id: int, run_id: int, tc: TestCase, partitions: dict[str, int],
                  environs: dict[str, int]) -> tuple:
    return (tc_id, run_id, tc.check, tc.unique_name, tc.hashcode, Jsonb(tc.params),
            partitions[tc.partition], environs[tc.environ], tc.run_index, tc.result,
            tc.fail_phase, tc.fail_reason, tc.jobid, sorted(set(tc.nodelist)),
            tc.job_exitcode, tc.time_total)


FINGERPRINT_FIELDS = ("kernel", "os", "rdma_core", "ofed", "gpu_driver", "mpi", "ucx",
                      "spack_lock_hash")


def _record_directions(conn: psycopg.Connection, report: Report) -> None:
    """What each check declares better; the newest declaration stands."""
    declared = {(tc.check, metric): better for tc in report.testcases
                for metric, better in tc.better.items()}
    if declared:
        conn.cursor().executemany(
            "INSERT INTO metric_direction (check_name, metric, better) VALUES (%s, %s, %s) "
            "ON CONFLICT (check_name, metric) DO UPDATE SET better = EXCLUDED.better",
            [(check, metric, better) for (check, metric), better in sorted(declared.items())])


def _insert_fingerprints(conn: psycopg.Connection, system: int, run_id: int,
                         report: Report) -> None:
    """Fingerprints per node; several test cases on one node record it once (first wins)."""
    seen: set[str] = set()
    for tc in report.testcases:
        for node, fp in tc.fingerprints.items():
            if node in seen:
                continue
            seen.add(node)
            extra = {k: v for k, v in fp.items()
                     if k not in FINGERPRINT_FIELDS + ("hcas", "gpus", "collected_at")}
            conn.execute(
                "INSERT INTO fingerprint (run_id, node_id, collected_at, kernel, os, rdma_core,"
                " ofed, gpu_driver, mpi, ucx, spack_lock_hash, hcas, gpus, extra)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (run_id, node_id(conn, system, node), fp.get("collected_at"),
                 *(fp.get(f) or None for f in FINGERPRINT_FIELDS),
                 Jsonb(fp.get("hcas") or []), Jsonb(fp.get("gpus") or []), Jsonb(extra)))


def ingest_paths(state: Path, dsn: str, reports: list[Path],
                 default_meta: RunMeta) -> list[IngestResult]:
    """Ingest each report; failures are spooled or parked and reported, never raised
    mid-way: a bad file does not keep the good ones of a batch from being stored."""
    results = []
    try:
        conn = db.connect(dsn)
    except PerfguardError as exc:
        for report in reports:
            results.append(_keep_for_later(state, report, str(exc)))
        return results
    with conn:
        try:
            db.require_current(conn)
        except PerfguardError as exc:  # kept, to be stored once the schema is upgraded
            return [_keep_for_later(state, report, str(exc)) for report in reports]
        for report in reports:
            results.append(_ingest_one(state, conn, report, default_meta))
    return results


def _keep_for_later(state: Path, report: Path, reason: str) -> IngestResult:
    if not report.is_file():
        return IngestResult(report, None, False, message=f"cannot read report: {reason}")
    kept = spool(state, report, reason)
    return IngestResult(report, None, False, message=f"spooled as {kept}: {reason}")


def _ingest_one(state: Path, conn: psycopg.Connection, report: Path,
                default_meta: RunMeta) -> IngestResult:
    from_spool = in_spool(state, report)
    kept_at = archive_dir(state) / report.name if from_spool else None
    try:
        result = ingest_report(conn, report, RunMeta.beside(report, default_meta), kept_at)
    except ReportError as exc:
        if not report.is_file():
            return IngestResult(report, None, False, message=str(exc))
        parked = reject(state, report, str(exc))
        reason = str(exc).removeprefix(f"{report}: ")  # the result names the report itself
        return IngestResult(report, None, False,
                            message=f"{reason} (parked as {parked}; it will not be retried)")
    except PerfguardError as exc:
        conn.rollback()
        return _keep_for_later(state, report, str(exc))
    if from_spool:
        archive(state, report)
    return result
