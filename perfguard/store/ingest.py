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
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from perfguard.errors import PerfguardError
from perfguard.store import db, queries
from perfguard.store.report import Report, ReportError, TestCase, load, no_cyclic_gc
from perfguard.store.spool import archive, archive_dir, in_spool, meta_path, reject, spool


@dataclass(frozen=True)
class RunMeta:
    """What the report itself does not say: why the run happened, which library ran, and
    each node's leaf switch as Slurm's tree had it then (the verdict tells a leaf's night
    from the fabric's by them; kept beside the report, a spooled run stored days later
    keeps them too)."""
    trigger: str = "manual"
    labels: tuple[str, ...] = ()
    library_revision: str | None = None
    leaves: dict[str, str] = field(default_factory=dict)

    def save_beside(self, report: Path) -> None:
        meta_path(report).write_text(json.dumps({
            "trigger": self.trigger, "labels": list(self.labels),
            "library_revision": self.library_revision, "leaves": self.leaves}) + "\n")

    @classmethod
    def beside(cls, report: Path, default: RunMeta | None = None) -> RunMeta:
        path = meta_path(report)
        if not path.exists():
            return default or cls()
        try:
            data = json.loads(path.read_text())
            labels, leaves = data.get("labels", []), data.get("leaves", {})
            if not isinstance(labels, list):
                raise TypeError("labels must be a list")
            if not isinstance(leaves, dict):
                raise TypeError("leaves must map each node to its leaf switch")
            return cls(str(data.get("trigger", "manual")), tuple(map(str, labels)),
                       data.get("library_revision"),
                       {str(node): str(leaf) for node, leaf in leaves.items()})
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
    #: Curve points not stored for a value not finite, each named (report.TestCase.dropped).
    dropped: tuple[str, ...] = ()


#: The advisory lock that lets one report at a time into the tables ("pfgi").
INGEST_LOCK = 0x70666769


def ingest_report(conn: psycopg.Connection, path: Path, meta: RunMeta,
                  kept_at: Path | None = None) -> IngestResult:
    """Store one report atomically; raises PerfguardError with file and reason on failure.

    ``kept_at`` is where the report will live once stored (run.report_path), if not
    where it is now.
    """
    # The cyclic collector stays off until the report is freed: a night's report is
    # 70,000 live containers that cannot form a cycle; enabled while it lives, the first
    # collection scans them all (30 ms of a 330 ms ingest, benchmarks/ingest.py).
    with no_cyclic_gc():
        return _stored(conn, path, meta, kept_at)


def _stored(conn: psycopg.Connection, path: Path, meta: RunMeta,
            kept_at: Path | None) -> IngestResult:
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
        with conn.transaction():
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
            queries.execute_many(conn, "insert_run_leaf", [
                {"run_id": run_id, "node": node, "leaf": leaf}
                for node, leaf in sorted(meta.leaves.items())])
            _record_directions(conn, report)
            conn.execute("SELECT refresh_key_figure_nights(name, night, night) FROM system, "
                         "(SELECT (%s::timestamptz AT TIME ZONE 'UTC')::date AS night) n "
                         "WHERE id = %s", (report.started, system))
    except psycopg.Error as exc:
        raise PerfguardError(f"{path}: database rejected the report: {exc}".strip()) from exc
    except (OverflowError, ValueError) as exc:  # a number PostgreSQL cannot hold
        raise ReportError(f"{path}: a value cannot be stored ({exc})") from exc
    dropped = tuple(f"{tc.unique_name} {d}" for tc in report.testcases for d in tc.dropped)
    return IngestResult(path, run_id, True, len(report.testcases), samples, dropped=dropped)


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
    """COPY test cases with ids drawn up front, then their values in blocks (one binary
    COPY); returns how many values."""
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
    blocks = _blocks(ids, report.testcases, metrics, points)
    with conn.cursor().copy(
            "COPY sample_block (run_id, started_at, check_name, metric_id, point_ids, "
            "testcase_ids, point_values, ref_values, ref_lowers, ref_uppers) "
            "FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(binary_copy(run_id, report.started, blocks))
    return sum(block.values.size for block in blocks)


class Block(NamedTuple):
    """A run's values of one check, metric and point list (0027: each value's one copy):
    its test cases in id order and their values, test cases × points; a key figure's
    (the point list (0,)) references as ReFrame compared it, None where it has none."""
    check: str
    metric_id: int
    point_ids: np.ndarray
    testcase_ids: np.ndarray
    values: np.ndarray
    references: tuple[list, list, list] | None = None


class _Sweeps:
    """The sweeps of one point list: each series' values as they lie in the report, put in
    point id order by one permutation for all of them."""

    def __init__(self, point_ids: list[int]):
        self.order = np.argsort(np.asarray(point_ids, dtype=np.int32), kind="stable")
        self.point_ids = np.asarray(point_ids, dtype=np.int32)[self.order]
        self.testcases: list[int] = []
        self.rows: list[list[float]] = []


def _blocks(ids: list[int], testcases: list[TestCase], metrics: dict[tuple[str, str], int],
            points: dict[tuple, int]) -> list[Block]:
    """Every value of the report in its block: key figures grouped by check and metric,
    sweeps by check, metric and point list; the values of a block become one numpy
    matrix (the report's lists converted in C, no loop over the values here)."""
    keys: dict[tuple[str, int], list[tuple]] = defaultdict(list)
    sweeps: dict[tuple[str, int, tuple], _Sweeps] = {}
    by_signature: dict[tuple, tuple] = {}
    for tc_id, tc in zip(ids, testcases):
        for s in tc.key_samples:
            keys[(tc.check, metrics[(s.metric, s.unit)])].append(
                (tc_id, s.value, s.reference, s.lower, s.upper))
        for series in tc.series:
            if not series.values:
                continue
            signature = series.signature()
            if signature not in by_signature:
                by_signature[signature] = tuple(points[key] for key in series.point_keys())
            key = (tc.check, metrics[(series.metric, series.unit)], by_signature[signature])
            if key not in sweeps:
                sweeps[key] = _Sweeps(list(key[2]))
            sweeps[key].testcases.append(tc_id)
            sweeps[key].rows.append(series.values)
    blocks = []
    for (check, metric_id), rows in keys.items():
        tc_ids, values, *references = zip(*rows)
        blocks.append(Block(check, metric_id, np.zeros(1, np.int32),
                            np.asarray(tc_ids, np.int64),
                            np.asarray(values, np.float64).reshape(-1, 1),
                            tuple(map(list, references))
                            if any(r is not None for r in references[0]) else None))
    for (check, metric_id, _), sweep in sweeps.items():
        blocks.append(Block(check, metric_id, sweep.point_ids,
                            np.asarray(sweep.testcases, np.int64),
                            np.asarray(sweep.rows, np.float64)[:, sweep.order]))
    return blocks


#: PostgreSQL's binary COPY: signature, flags, header extension; the trailer.
_COPY_HEADER = b"PGCOPY\n\xff\r\n\0" + struct.pack(">ii", 0, 0)
_COPY_TRAILER = struct.pack(">h", -1)
_POSTGRES_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
_INT4, _INT8, _FLOAT8 = 23, 20, 701


def binary_copy(run_id: int, started: datetime, blocks: list[Block]) -> bytes:
    """The blocks as one binary COPY stream (PostgreSQL's documented format): the arrays
    are numpy buffers with each element's length interleaved, built in C."""
    at = started - _POSTGRES_EPOCH
    micros = (at.days * 86400 + at.seconds) * 1_000_000 + at.microseconds
    prefix = (struct.pack(">hiqiq", 10, 8, run_id, 8, micros))
    parts = [_COPY_HEADER]
    for block in blocks:
        check = block.check.encode()
        parts += [prefix, struct.pack(">i", len(check)), check,
                  struct.pack(">ih", 2, block.metric_id),
                  _array(block.point_ids, ">i4", _INT4),
                  _array(block.testcase_ids, ">i8", _INT8),
                  _array(block.values, ">f8", _FLOAT8)]
        if block.references is None:
            parts.append(struct.pack(">iii", -1, -1, -1))
        else:
            parts += [_nullable_array(column) for column in block.references]
    parts.append(_COPY_TRAILER)
    return b"".join(parts)


def _array(values: np.ndarray, dtype: str, oid: int) -> bytes:
    """One array field of a binary COPY row (no NULL elements): length, header with
    each dimension, then every element as length 4 or 8 and its big-endian bytes."""
    size = np.dtype(dtype).itemsize
    elements = np.empty(values.size, dtype=[("length", ">i4"), ("value", dtype)])
    elements["length"] = size
    elements["value"] = values.reshape(-1)
    header = struct.pack(f">iiI{2 * values.ndim}i", values.ndim, 0, oid,
                         *[n for dim in values.shape for n in (dim, 1)])
    body = elements.tobytes()
    return struct.pack(">i", len(header) + len(body)) + header + body


def _nullable_array(column: list[float | None]) -> bytes:
    """A float8[] field with NULL elements (a key figure without a reference): few, one
    per test case and key figure."""
    body = b"".join(struct.pack(">i", -1) if v is None else struct.pack(">id", 8, v)
                    for v in column)
    header = struct.pack(">iiIii", 1, 1, _FLOAT8, len(column), 1)
    return struct.pack(">i", len(header) + len(body)) + header + body


def _testcase_row(tc_id: int, run_id: int, tc: TestCase, partitions: dict[str, int],
                  environs: dict[str, int]) -> tuple:
    return (tc_id, run_id, tc.check, tc.unique_name, tc.hashcode, Jsonb(tc.params),
            partitions[tc.partition], environs[tc.environ], tc.run_index, tc.result,
            tc.fail_phase, tc.fail_reason, tc.jobid, sorted(set(tc.nodelist)),
            tc.job_exitcode, tc.time_total)


FINGERPRINT_FIELDS = ("kernel", "os", "rdma_core", "ofed", "gpu_driver", "mpi", "ucx",
                      "spack_lock_hash")


def _record_directions(conn: psycopg.Connection, report: Report) -> None:
    """What each check declares better (or its reference implies); the newest stands."""
    declared = {(tc.check, metric): (better, metric in tc.implied) for tc in report.testcases
                for metric, better in tc.better.items()}
    if declared:
        conn.cursor().executemany(
            "INSERT INTO metric_direction (check_name, metric, better, implied) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (check_name, metric) "
            "DO UPDATE SET better = EXCLUDED.better, implied = EXCLUDED.implied",
            [(check, metric, better, implied)
             for (check, metric), (better, implied) in sorted(declared.items())])


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
        room = f"; {parked.said()}" if parked.removed else ""
        return IngestResult(report, None, False, message=f"{reason} (parked as "
                            f"{parked.path}; it will not be retried{room})")
    except PerfguardError as exc:
        conn.rollback()
        return _keep_for_later(state, report, str(exc))
    if from_spool:
        archive(state, report)
    return result
