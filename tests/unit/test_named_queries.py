"""The named queries (perfguard/store/queries/*.sql) are all used, and none says a
placeholder in a comment: psycopg counts a ``%s`` there as a parameter."""

from __future__ import annotations

import re
from pathlib import Path

from perfguard.store.queries import QUERIES_DIR

PACKAGE = Path(__file__).resolve().parents[2] / "perfguard"


def test_every_query_is_named_somewhere_and_none_is_missing() -> None:
    code = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    runners = "rows|shared_rows|first|arrays|arrays_in_parts|tuples|one|execute|execute_many|sql"
    named = set(re.findall(rf"queries\.(?:{runners})\(\s*(?:conn,\s*)?"
                           r"\"(\w+)\"", code))
    files = {path.stem for path in QUERIES_DIR.glob("*.sql")}
    assert named == files


def test_no_comment_holds_a_placeholder() -> None:
    for path in QUERIES_DIR.glob("*.sql"):
        for line in path.read_text().splitlines():
            assert not (line.lstrip().startswith("--") and "%" in line), (path.name, line)


def test_the_judge_reads_and_writes_only_through_named_queries() -> None:
    """No judge module imports the database driver or holds a statement of its own."""
    for path in (PACKAGE / "judge").glob("*.py"):
        code = path.read_text()
        assert not re.search(r"^\s*(?:import|from) psycopg", code, re.M), path.name
        assert not re.search(r"\b(?:SELECT|INSERT INTO|DELETE FROM|UPDATE \w+ SET)\b", code), \
            path.name


def test_the_reports_hold_no_statement_of_their_own() -> None:
    """What the CLI, the HTML report and the dashboards' builder read is a named query
    (or a dashboards/sql file), not a statement in the code."""
    for path in (PACKAGE / "present").glob("*.py"):
        assert not re.search(r"\b(?:SELECT|INSERT INTO|DELETE FROM|UPDATE \w+ SET)\b",
                             path.read_text()), path.name
