"""Connection to perfguard's PostgreSQL and the versioned SQL migrations."""

from __future__ import annotations

import hashlib
import math
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql
from psycopg.adapt import Loader
from psycopg.conninfo import make_conninfo
from psycopg.pq import Format
from psycopg.types.json import JsonbLoader

from perfguard.errors import PerfguardError, UsageError
from perfguard.secrets import redact_secrets
from perfguard.states import FAILING

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
REPEATABLE_DIR = Path(__file__).parent / "repeatable"
#: The version the 24 migrations perfguard grew by (0001 … 0024, up to commit 5f6f1f8) were
#: folded into: a database they brought to 0024 holds the baseline's tables.
BASELINE = 24
#: The last perfguard that carries the folded migrations, for a database older than them.
BEFORE_BASELINE = "5f6f1f8"



def connect(dsn: str) -> psycopg.Connection:
    """A session without JIT: perfguard's queries are lookups and groupings of seconds at
    most, which JIT compiling made slower by up to 1.4 s each (benchmarks/ingest.py)."""
    try:
        conn = psycopg.connect(dsn, connect_timeout=5)
        conn.execute("SET jit = off")
        conn.commit()
        return conn
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PerfguardError(f"database {redact(dsn)} is unreachable: "
                             f"{redact_secrets(reason)}{_connect_hint(dsn, reason)}") from exc
    except psycopg.ProgrammingError as exc:  # a DSN libpq cannot parse
        raise UsageError(f"database DSN {redact(dsn)!r} is invalid: "
                         f"{redact_secrets(str(exc))}") from exc


def _connect_hint(dsn: str, reason: str) -> str:
    """What to fix for the failures a first setup meets: no password found (no passfile,
    one libpq ignores for its mode, one without the line), a wrong password (where it came
    from), no database."""
    if "no password supplied" in reason or "password authentication failed" in reason:
        try:
            params = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError:
            return ""
        passfile = str(params.get("passfile") or os.environ.get("PGPASSFILE")
                       or Path.home() / ".pgpass")
        if "no password supplied" in reason:
            return _passfile_hint(passfile, params)
        return _password_source(params, passfile)
    if "does not exist" in reason and "database" in reason:
        return " (check the database name in the DSN; the DBA creates it: docs/adopting.md)"
    return ""


def _passfile_hint(passfile: str, params: dict) -> str:
    """Why libpq found no password: the passfile missing, ignored for its mode, or without
    a line for these parameters; where a line differs from them in one field only (a
    misspelled database name in the DSN), that field is named, not the passfile."""
    if not os.access(passfile, os.R_OK):
        return (f" (the passfile {passfile} does not exist or cannot be read: create it, "
                f"mode 0600, with a line HOST:PORT:DB:USER:PASSWORD)")
    mode = os.stat(passfile).st_mode & 0o777
    if mode & 0o077:  # libpq: "password file has group or world access", then ignored
        return (f" (the passfile {passfile} has permissions {mode:04o}: libpq ignores it; "
                f"chmod 600 {passfile})")
    near = passfile_near_line(passfile, params)
    if near is not None:
        number, field, theirs, ours = near
        return (f" (the DSN's {field} is {ours!r}, the passfile {passfile} has line {number} "
                f"for {field} {theirs!r}: check the {field} in the DSN; if {ours!r} is "
                f"right, add its line to the passfile)")
    return (f" (the passfile {passfile} has no line for this host, port, database and "
            f"user: HOST:PORT:DB:USER:PASSWORD)")


def _password_source(params: dict, passfile: str) -> str:
    """Where the refused password came from: the DSN, $PGPASSWORD, or the passfile's line
    for this host, port, database and user (libpq's order)."""
    if params.get("password"):
        return " (the password is the DSN's)"
    if os.environ.get("PGPASSWORD"):
        return " (the password came from $PGPASSWORD)"
    line = passfile_line(passfile, params)
    if line is None:
        return ""
    return (f" (the password came from the passfile {passfile}, line {line}: correct it "
            f"there)")


#: The fields of a passfile line before the password, as messages name them.
PASSFILE_FIELDS = ("host", "port", "database", "user")


def passfile_line(passfile: str, params: dict) -> int | None:
    """The number of the passfile's first line that libpq would take for these connection
    parameters (``*`` matches anything; ``\\:`` and ``\\\\`` are escapes), or None."""
    wanted = _passfile_wanted(params)
    for number, fields in _passfile_lines(passfile):
        if all(f in ("*", w) for f, w in zip(fields[:4], wanted)):
            return number
    return None


def passfile_near_line(passfile: str, params: dict) -> tuple[int, str, str, str] | None:
    """The passfile's first line that matches these parameters in all fields but one:
    (its number, that field's name, the line's value, the DSN's), or None."""
    wanted = _passfile_wanted(params)
    for number, fields in _passfile_lines(passfile):
        differ = [i for i, (f, w) in enumerate(zip(fields[:4], wanted)) if f not in ("*", w)]
        if len(differ) == 1:
            i = differ[0]
            return number, PASSFILE_FIELDS[i], fields[i], wanted[i]
    return None


def _passfile_wanted(params: dict) -> list[str]:
    """Host, port, database and user as libpq matches them against a passfile."""
    wanted = [str(params.get("host") or os.environ.get("PGHOST") or "localhost"),
              str(params.get("port") or os.environ.get("PGPORT") or "5432"),
              str(params.get("dbname") or os.environ.get("PGDATABASE") or ""),
              str(params.get("user") or os.environ.get("PGUSER") or "")]
    wanted[2] = wanted[2] or wanted[3]
    if wanted[0].startswith("/"):
        wanted[0] = "localhost"  # a socket directory matches "localhost" in a passfile
    return wanted


def _passfile_lines(passfile: str) -> list[tuple[int, list[str]]]:
    """(number, fields) of each line that is not blank or a comment and has a password."""
    try:
        text = Path(passfile).read_text()
    except (OSError, UnicodeDecodeError):
        return []
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = _passfile_fields(line)
        if len(fields) >= 5:
            found.append((number, fields))
    return found


def _passfile_fields(line: str) -> list[str]:
    fields, current, escaped = [], "", False
    for char in line:
        if escaped:
            current, escaped = current + char, False
        elif char == "\\":
            escaped = True
        elif char == ":" and len(fields) < 4:
            fields.append(current)
            current = ""
        else:
            current += char
    return fields + [current]


def redact(dsn: str) -> str:
    """The DSN without its password, for messages."""
    return redact_secrets(dsn)


class _SchemaFile:
    """A file of the schema, checksummed as it is applied (what the ledgers keep)."""
    path: Path

    @property
    def sql(self) -> str:
        """The file with the verdict's failing states written in (states.FAILING)."""
        failing = ", ".join(f"'{state}'" for state in FAILING)
        return self.path.read_text().replace("@FAILING_STATES@", failing)

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class Migration(_SchemaFile):
    """A numbered change to the tables, applied once and never edited afterwards."""
    version: int
    name: str
    path: Path

    @property
    def label(self) -> str:
        return f"{self.version:04d} {self.name}"


@dataclass(frozen=True)
class Repeatable(_SchemaFile):
    """Views and functions with one current definition each (``CREATE OR REPLACE``),
    applied after the migrations and again whenever the file changes: what a reader of the
    schema looks up is in one place, not spread over the migrations that redefined it."""
    name: str
    path: Path

    @property
    def label(self) -> str:
        return f"repeatable/{self.name}.sql"


def migrations() -> list[Migration]:
    found = []
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        number, _, name = path.stem.partition("_")
        found.append(Migration(int(number), name, path))
    return found


def repeatables() -> list[Repeatable]:
    """In the order of their names: a file reads only what those before it define."""
    return [Repeatable(path.stem, path) for path in sorted(REPEATABLE_DIR.glob("*.sql"))]


_LEDGERS = ("""
CREATE TABLE IF NOT EXISTS schema_migration (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)""", """
CREATE TABLE IF NOT EXISTS schema_repeatable (
    name        text PRIMARY KEY,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)""")


def applied(conn: psycopg.Connection) -> dict[int, str]:
    """Applied migrations (version → checksum); none where the ledger does not exist yet.
    A database the folded migrations brought to 0024 has the baseline. Reading needs no
    DDL: a writer role (runs only) may ask too."""
    if conn.execute("SELECT to_regclass('schema_migration')").fetchone()[0] is None:
        return {}
    rows = conn.execute("SELECT version, name, checksum FROM schema_migration").fetchall()
    done = {version: checksum for version, _, checksum in rows}
    folded = {version for version, name, _ in rows
              if version < BASELINE or (version == BASELINE and name != "baseline")}
    if folded and not set(range(1, BASELINE + 1)) <= folded:
        newest = max(folded)
        raise PerfguardError(
            f"database schema is at migration {newest:04d}, older than the baseline "
            f"{BASELINE:04d} this perfguard starts from: run `perfguard db upgrade` with "
            f"perfguard {BEFORE_BASELINE} (the last with migrations 0001-{BASELINE:04d}) "
            f"first, then with this one")
    if folded:
        baseline = next(m for m in migrations() if m.version == BASELINE)
        done = {v: c for v, c in done.items() if v > BASELINE} | {BASELINE: baseline.checksum}
    return done


def applied_repeatables(conn: psycopg.Connection) -> dict[str, str]:
    """Applied repeatable files (name → checksum of what was applied)."""
    if conn.execute("SELECT to_regclass('schema_repeatable')").fetchone()[0] is None:
        return {}
    return dict(conn.execute("SELECT name, checksum FROM schema_repeatable").fetchall())


def pending(conn: psycopg.Connection) -> list[Migration | Repeatable]:
    """What `db upgrade` would apply: migrations not applied, then the repeatable files
    that are new or changed since they were applied."""
    done, current = applied(conn), applied_repeatables(conn)
    return [m for m in migrations() if m.version not in done] + \
        [r for r in repeatables() if current.get(r.name) != r.checksum]


def upgrade(conn: psycopg.Connection,
            up_to: int | None = None) -> list[Migration | Repeatable]:
    """Apply every pending migration (up to version ``up_to``: an older schema, to test a
    migration on data stored before it), each in its own transaction, refusing edited
    ones; then the repeatable files if any is new or changed. Only the schema's owner
    may: the writer and reader roles are told so."""
    try:
        return _upgrade(conn, up_to)
    except psycopg.errors.InsufficientPrivilege as exc:
        conn.rollback()
        user = conn.execute("SELECT current_user").fetchone()[0]
        raise UsageError(
            f"db upgrade needs the owner role of the schema; role {user} may not change it "
            f"({str(exc).splitlines()[0]}): run `perfguard db upgrade --dsn OWNER_DSN` as "
            f"the role that owns the database (docs/adopting.md)") from None


def _upgrade(conn: psycopg.Connection, up_to: int | None) -> list[Migration | Repeatable]:
    for ledger in _LEDGERS:
        conn.execute(ledger)
    done = applied(conn)
    conn.commit()
    newly: list[Migration | Repeatable] = []
    for migration in migrations():
        if up_to is not None and migration.version > up_to:
            return newly
        if migration.version in done:
            if done[migration.version] != migration.checksum:
                raise PerfguardError(
                    f"migration {migration.path.name} was edited after it was applied; "
                    f"add a new migration instead")
            continue
        with conn.transaction():
            conn.execute(migration.sql)
            conn.execute("INSERT INTO schema_migration (version, name, checksum) "
                         "VALUES (%s, %s, %s)",
                         (migration.version, migration.name, migration.checksum))
        newly.append(migration)
    return newly + _apply_repeatables(conn)


def _apply_repeatables(conn: psycopg.Connection) -> list[Repeatable]:
    """All the files, in order and in one transaction, when any is new or changed: a view
    that reads a changed one is defined again after it. A change that CREATE OR REPLACE
    cannot make (a view's columns removed, a function's result type) begins its file with
    the DROP it needs."""
    current = applied_repeatables(conn)
    files = repeatables()
    changed = [r for r in files if current.get(r.name) != r.checksum]
    if not changed:
        return []
    with conn.transaction():
        for repeatable in files:
            conn.execute(repeatable.sql)
            conn.execute("INSERT INTO schema_repeatable (name, checksum) VALUES (%s, %s) "
                         "ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, "
                         "applied_at = now()", (repeatable.name, repeatable.checksum))
    return changed


class SchemaBehind(PerfguardError):
    """The database lacks migrations this perfguard needs: nothing can be stored yet."""


def require_current(conn: psycopg.Connection) -> None:
    behind = pending(conn)
    conn.commit()
    if behind:
        raise SchemaBehind(
            f"database schema is behind ({len(behind)} change(s) pending, from "
            f"{behind[0].label}): run `perfguard db upgrade --dsn OWNER_DSN` with the role "
            f"that owns the schema (the embedded cluster: `perfguard db upgrade`)")


#: A query that reads a run's history in bulk: sorts in memory, and no JIT. Its cost
#: estimates make PostgreSQL compile it, which took 1.1 of the 1.2 s the key figures'
#: verdict query ran at 2·10^7 samples (and 1.4 of 2 s of a curve query at 3·10^6).
BULK = {"work_mem": "256MB", "jit": "off"}
#: BULK with hash joins only: through the views (judged_testcase's state, jsonb point
#: tests) PostgreSQL's row estimates are off by 10^5 and it picks nested loops; the
#: curves of a run of 2,000 test cases took 84 s, with this 8 s. Not for lookups of a few
#: rows, which it slows down.
HASH_JOINS = {**BULK, "enable_nestloop": "off", "enable_mergejoin": "off"}
#: BULK without merge joins: for a run's own rows joined to the big tables by id (the
#: verdict's key figures), where PostgreSQL merged by walking the whole test case primary
#: key (0.8 of 1.5 s for a run of 50,000 test cases).
NO_MERGE_JOINS = {**BULK, "enable_mergejoin": "off"}


@contextmanager
def parallel_readers(conn: psycopg.Connection, count: int) -> Iterator[list]:
    """``count`` more connections as ``conn``'s user, read-only, with ``conn``'s planner
    settings, closed afterwards: each sees the database as one more statement of
    ``conn``'s would (READ COMMITTED: every statement takes its own snapshot). None (an
    empty list, ``conn`` then reads alone) where another session would see something else:
    ``conn``'s transaction has written (its rows are its own until it commits) or holds
    one snapshot for all its statements (REPEATABLE READ, SERIALIZABLE); or where no
    connection is to be had."""
    state = conn.execute("SELECT pg_current_xact_id_if_assigned() IS NULL AND "
                         "current_setting('transaction_isolation') = 'read committed'"
                         ).fetchone()[0]
    readers: list[psycopg.Connection] = []
    try:
        if state:
            settings = conn.execute("SELECT name, current_setting(name) FROM "
                                    "unnest(%s::text[]) name", (sorted(HASH_JOINS),)).fetchall()
            for _ in range(count):
                readers.append(psycopg.connect(make_conninfo(
                    conn.info.dsn, password=conn.info.password), connect_timeout=5))
                readers[-1].read_only = True
                for name, value in settings:  # as planned() set them
                    readers[-1].execute("SELECT set_config(%s, %s, false)", (name, value))
    except BaseException as exc:
        for reader in readers:
            reader.close()
        if not isinstance(exc, psycopg.Error):
            raise
        readers = []
    try:
        yield readers
    finally:
        for reader in readers:
            reader.close()


@contextmanager
def planned(conn: psycopg.Connection, settings: dict[str, str]) -> Iterator[None]:
    """Planner ``settings`` (BULK, HASH_JOINS) for the queries of the block; what was
    set before is set again afterwards (blocks nest), also inside a caller's
    transaction."""
    before = {name: conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]
              for name in settings}
    for name, value in settings.items():
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    try:
        yield
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.INERROR:
            for name, value in before.items():
                conn.execute("SELECT set_config(%s, %s, false)", (name, value))


#: What `perfguard db grant` gives: the group role of each kind of user.
GRANT_GROUPS = {"writer": "perfguard_writer", "reader": "perfguard_grafana"}


def grant(conn: psycopg.Connection, user: str, kind: str, password: str | None) -> bool:
    """Make ``user`` a login role in the group of ``kind`` (writer: runs and verdicts, no
    DDL; reader: SELECT only); returns whether the role was created. Needs a role that
    may create roles (the schema owner on the embedded cluster, a DBA elsewhere)."""
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone()
    role = sql.Identifier(user)
    if not exists:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(role))
    if password is not None:
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(role, sql.Literal(password)))
    conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(GRANT_GROUPS[kind]), role))
    # A DBA closes the database to PUBLIC (docs/adopting.md): the role may connect.
    conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
        sql.Identifier(conn.info.dbname), role))
    conn.commit()
    return not exists


@dataclass(frozen=True)
class SampleMonth:
    """One month of stored values (sample_block's partition of it, 0027)."""
    name: str
    starts: datetime
    ends: datetime
    pruned_at: datetime | None
    #: Values stored (every block's test cases × points) and bytes with indexes; 0 once
    #: pruned.
    rows: int
    size: int


MONTHS_SQL = """
SELECT m.name, m.starts, m.ends, m.pruned_at,
       CASE WHEN b.oid IS NULL THEN 0 ELSE (
           SELECT coalesce(sum(cardinality(s.testcase_ids) * cardinality(s.point_ids)), 0)
           FROM sample_block s
           WHERE s.started_at >= m.starts AND s.started_at < m.ends) END::bigint AS rows,
       coalesce(pg_total_relation_size(b.oid), 0) AS size
FROM sample_month m
LEFT JOIN pg_class b ON b.oid = to_regclass('sample_block' || substr(m.name, 7))
                    AND m.pruned_at IS NULL
ORDER BY m.starts
"""


def sample_months(conn: psycopg.Connection) -> list[SampleMonth]:
    return [SampleMonth(*row) for row in conn.execute(MONTHS_SQL).fetchall()]


def prune(conn: psycopg.Connection, keep_days: int, dry_run: bool = False,
          now: datetime | None = None) -> list[SampleMonth]:
    """Drop the sample months that ended ``keep_days`` or more days ago (the database's
    prune_sample_months: whole partitions, the nights rolled up first); returns them."""
    cutoff = (now or datetime.now(timezone.utc)) - timedelta(days=keep_days)
    doomed = [m for m in sample_months(conn) if m.pruned_at is None and m.ends <= cutoff]
    if dry_run or not doomed:
        conn.rollback()
        return doomed
    try:
        with conn.transaction():
            conn.execute("SELECT prune_sample_months(%s)", (cutoff,)).fetchall()
    except psycopg.errors.InsufficientPrivilege as exc:
        raise PerfguardError("pruning drops tables: run `perfguard db prune` with the schema "
                             "owner's DSN (the writer role may not)") from exc
    return doomed


class _PackedArrayLoader(Loader):
    """An array of one or two dimensions without NULLs, in binary, unpacked at C speed
    (psycopg's generic array loader takes 3 µs an array, most of reading a run's curves).
    Anything else (NULLs, more dimensions) goes to the generic loader."""

    format = Format.BINARY

    def __init__(self, oid: int, context=None):
        super().__init__(oid, context)
        self._generic = psycopg.adapters.get_loader(oid, Format.BINARY)(oid, context)

    def load(self, data: bytes | bytearray | memoryview):
        # Header: dimensions, has-NULLs flag, element type; per dimension its length and
        # lower bound; then each element as its length (int4) and its bytes.
        ndim, has_null, _ = struct.unpack_from(">iii", data)
        if ndim == 0:
            return self._unpacked(data, 0, (0,))
        if ndim > 2 or has_null:
            return self._generic.load(data)
        shape = struct.unpack_from(">" + "ii" * ndim, data, 12)[::2]
        return self._unpacked(data, 12 + 8 * ndim, shape)

    def _unpacked(self, data, offset: int, shape: tuple[int, ...]):
        raise NotImplementedError


class _Float8Array(_PackedArrayLoader):
    """float8[] as a numpy array of its shape: the curve verdict screens whole matrices."""

    _element = np.dtype([("length", ">i4"), ("value", ">f8")])

    def _unpacked(self, data, offset: int, shape: tuple[int, ...]) -> np.ndarray:
        count = math.prod(shape)
        elements = np.frombuffer(data, self._element, count, offset)
        return elements["value"].astype(np.float64).reshape(shape)


class _IntArray(_PackedArrayLoader):
    """int4[] and int8[] (one dimension) as a tuple of ints: ids, used as Python ints."""

    code = ""

    def _unpacked(self, data, offset: int, shape: tuple[int, ...]) -> tuple:
        if len(shape) > 1:
            return self._generic.load(data)
        return struct.unpack_from(">" + ("i" + self.code) * shape[0], data, offset)[1::2]


class _Int4Array(_IntArray):
    code = "i"


class _Int8Array(_IntArray):
    code = "q"


class _NumpyArray(_PackedArrayLoader):
    """An array of one dimension as a numpy array of ``element`` (native byte order):
    the 1.65·10^6 test cases a 100,000-line verdict reads, without a Python int each."""

    element = ""

    def _unpacked(self, data, offset: int, shape: tuple[int, ...]) -> np.ndarray:
        if len(shape) > 1:
            return self._generic.load(data)
        dtype = np.dtype([("length", ">i4"), ("value", self.element)])
        values = np.frombuffer(data, dtype, shape[0], offset)["value"]
        return values.astype(values.dtype.newbyteorder("="))


class _Int8Numpy(_NumpyArray):
    element = ">i8"


class _UuidNumpy(_NumpyArray):
    """uuid[] as 16-byte values (numpy void), compared and sorted as bytes."""

    element = "V16"


def packed_arrays(cursor: psycopg.Cursor, numpy_ids: bool = False) -> psycopg.Cursor:
    """``cursor`` (binary) loading float8[] as numpy arrays, int4[] and int8[] of one
    dimension as tuples of ints, each at C speed; ``numpy_ids``: int8[] and uuid[] as
    numpy arrays (``_NumpyArray``)."""
    loaders = [("float8", _Float8Array), ("int4", _Int4Array)]
    loaders += [("int8", _Int8Numpy), ("uuid", _UuidNumpy)] if numpy_ids else \
        [("int8", _Int8Array)]
    for name, loader in loaders:
        cursor.adapters.register_loader(psycopg.postgres.types.get(name).array_oid, loader)
    return cursor


def shared_json(cursor: psycopg.Cursor) -> psycopg.Cursor:
    """``cursor`` (text) parsing each distinct jsonb text once, every row that holds it
    given the same (never to be changed) object: a run's 100,000 verdict lines hold
    50,000 parameter sets and one empty point, 1.2 s of json.loads parsed row by row."""
    parsed: dict[bytes, object] = {}

    class SharedJsonbLoader(JsonbLoader):
        def load(self, data):
            key = bytes(data)
            if key not in parsed:
                parsed[key] = super().load(data)
            return parsed[key]

    cursor.adapters.register_loader("jsonb", SharedJsonbLoader)
    return cursor
