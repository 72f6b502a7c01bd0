"""Named queries: SQL the judge runs, one file each in ``store/queries/<name>.sql``, run
here so that a judge module needs no database driver of its own (it reads and writes
through these few functions and gets plain rows back).

Judge modules that read this way: fingerprint, curves, changepoints, run_findings; the
verdict's bulk reads (verdict, history, thresholds, sweep) still hold their SQL (issue 41).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

QUERIES_DIR = Path(__file__).parent / "queries"
#: The connection the judge is handed (it only passes it on).
Connection = psycopg.Connection


@functools.cache
def sql(name: str) -> str:
    """The query in store/queries/``name``.sql."""
    return (QUERIES_DIR / f"{name}.sql").read_text()


def rows(conn: Connection, name: str, params: Any = None) -> list[dict]:
    """Every row, as a mapping of column names."""
    return conn.cursor(row_factory=dict_row).execute(sql(name), params).fetchall()


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
