"""Named queries: SQL the judge runs, one file each in ``store/queries/<name>.sql``, run
here so that no judge module needs a database driver of its own: it reads and writes
through these few functions and gets plain rows back (tuples, dicts, or for the
verdict's bulk reads numpy arrays), and names the planner settings a bulk read needs.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from perfguard.store import db

QUERIES_DIR = Path(__file__).parent / "queries"
#: The connection the judge is handed (it only passes it on).
Connection = psycopg.Connection
#: What the database raises when it refuses a statement.
DatabaseError = psycopg.Error
#: Planner settings for a bulk read (``planned``): store/db says why each exists.
BULK, HASH_JOINS, NO_MERGE_JOINS = db.BULK, db.HASH_JOINS, db.NO_MERGE_JOINS


@functools.cache
def sql(name: str) -> str:
    """The query in store/queries/``name``.sql."""
    return (QUERIES_DIR / f"{name}.sql").read_text()


def rows(conn: Connection, name: str, params: Any = None) -> list[dict]:
    """Every row, as a mapping of column names."""
    return conn.cursor(row_factory=dict_row).execute(sql(name), params).fetchall()


def shared_rows(conn: Connection, name: str, params: Any = None) -> list[dict]:
    """``rows``, each distinct jsonb value parsed once and shared (``db.shared_json``):
    for the verdict's 100,000 lines of 50,000 parameter sets."""
    return db.shared_json(conn.cursor(row_factory=dict_row)).execute(
        sql(name), params).fetchall()


def first(conn: Connection, name: str, params: Any = None) -> dict | None:
    """The first row as a mapping of column names (None where there is none)."""
    return conn.cursor(row_factory=dict_row).execute(sql(name), params).fetchone()


def arrays(conn: Connection, name: str, params: Any = None, *, one: bool = False):
    """Rows read in binary with their arrays as numpy arrays (``db.packed_arrays``: float8,
    int8 and uuid arrays at C speed), every row or ``one``."""
    cursor = db.packed_arrays(conn.cursor(binary=True), numpy_ids=True).execute(
        sql(name), params)
    return cursor.fetchone() if one else cursor.fetchall()


def arrays_in_parts(conn: Connection, name: str, params: dict, split: tuple[str, ...],
                    parts: int = 2) -> list:
    """``arrays``' rows, read in ``parts`` at once: the lists ``split`` of ``params`` (runs
    and their start times) cut alike, each part but the first on a connection of its own
    (``db.parallel_readers``; alone where those would not see what ``conn`` sees).
    PostgreSQL sends a float8[] an element at a time (array_send: 225 ms of a 4,000-line
    verdict's 8·10^6 curve values), on the one core of the backend that reads it."""
    count = len(params[split[0]])
    if parts < 2 or count < 2 * parts:
        return arrays(conn, name, params)
    bounds = [count * part // parts for part in range(parts + 1)]
    pieces = [{**params, **{key: params[key][low:high] for key in split}}
              for low, high in zip(bounds, bounds[1:])]
    with db.parallel_readers(conn, parts - 1) as readers:
        if not readers:
            return arrays(conn, name, params)
        with ThreadPoolExecutor(len(readers)) as pool:
            others = [pool.submit(arrays, reader, name, piece)
                      for reader, piece in zip(readers, pieces[1:])]
            rows = arrays(conn, name, pieces[0])
            for other in others:
                rows += other.result()
    return rows


#: The block's queries under planner settings (BULK, HASH_JOINS, NO_MERGE_JOINS).
planned = db.planned


def tuples(conn: Connection, name: str, params: Any = None) -> list[tuple]:
    """Every row, as a tuple."""
    return conn.execute(sql(name), params).fetchall()


def one(conn: Connection, name: str, params: Any = None) -> tuple | None:
    """The first row (None where there is none)."""
    return conn.execute(sql(name), params).fetchone()


def json(value: Any) -> Jsonb:
    """A parameter stored as jsonb."""
    return Jsonb(value)


def execute(conn: Connection, name: str, params: Any = None) -> None:
    """A statement that returns nothing (INSERT, UPDATE, DELETE)."""
    conn.execute(sql(name), params)


def execute_many(conn: Connection, name: str, params: list) -> None:
    """One statement for each of ``params`` (the rows of a verdict, of findings)."""
    with conn.cursor() as cursor:
        cursor.executemany(sql(name), params)
