"""The schema's two ledgers on the real PostgreSQL: the baseline migration (the 24
migrations perfguard grew by, folded), and views and functions applied from their one
current definition whenever it changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from perfguard.errors import PerfguardError
from perfguard.states import FAILING, STATES
from perfguard.store import db
from tests.conftest import perfguard

#: Names of the folded migrations, as a database they brought to 0024 lists them.
FOLDED = ["results_schema", "dashboard_views", "testcase_states", "one_judge",
          "change_points", "stored_verdicts", "fabric_sweep", "recent_runs", "run_outcome",
          "writer_role", "samples_by_month", "testcase_statistics", "run_summary",
          "leaf_findings", "curves_by_testcase", "testcase_statistics_of_the_joins",
          "superseded_attempts", "testcase_variant", "sample_blocks",
          "testcase_statistics_when_stale", "nothing_measured", "findings", "acknowledged",
          "accepted_level"]


def ledger_as_folded(conn, up_to: int) -> None:
    """The ledger a database has that the folded migrations brought to ``up_to``, and no
    repeatable applied yet (the tables are the baseline's, as they are there at 0024)."""
    conn.execute("DELETE FROM schema_migration")
    conn.execute("DELETE FROM schema_repeatable")
    for version, name in enumerate(FOLDED[:up_to], start=1):
        conn.execute("INSERT INTO schema_migration (version, name, checksum) "
                     "VALUES (%s, %s, md5(%s))", (version, name, name))
    conn.commit()


def test_a_database_the_folded_migrations_brought_to_0024_is_at_the_baseline(
        fresh_dsn: str) -> None:
    with db.connect(fresh_dsn) as conn:
        db.upgrade(conn, up_to=24)  # the tables as the folded migrations left them
        ledger_as_folded(conn, 24)
        later = [m for m in db.migrations() if m.version > 24]
        assert [change.label for change in db.pending(conn)] == \
            [m.label for m in later] + [r.label for r in db.repeatables()]
        assert db.upgrade(conn) == later + db.repeatables()
        assert db.pending(conn) == [] and db.upgrade(conn) == []
    status = perfguard("db", "status", "--dsn", fresh_dsn)
    assert status.returncode == 0 and "0024 baseline" in status.stdout, status.stdout


def test_a_database_older_than_the_baseline_is_told_which_perfguard_brings_it_there(
        migrated_dsn: str) -> None:
    with db.connect(migrated_dsn) as conn:
        ledger_as_folded(conn, 20)
    result = perfguard("db", "upgrade", "--dsn", migrated_dsn)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "database schema is at migration 0020, older than the baseline 0024" in \
        result.stderr
    assert f"perfguard {db.BEFORE_BASELINE} (the last with migrations 0001-0024) first" in \
        result.stderr


def test_an_edited_migration_is_refused(migrated_dsn: str) -> None:
    with db.connect(migrated_dsn) as conn:
        conn.execute("UPDATE schema_migration SET checksum = md5('before') WHERE version = 24")
        conn.commit()
        with pytest.raises(PerfguardError, match="0024_baseline.sql was edited after it was "
                                                 "applied; add a new migration instead"):
            db.upgrade(conn)


def test_a_changed_view_is_applied_again_with_those_after_it(
        migrated_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A column appended to judged_testcase: its file and those after it are applied; the
    views that read it (key_verdict) are there still, and the new column is read."""
    files = tmp_path / "repeatable"
    shutil.copytree(db.REPEATABLE_DIR, files)
    testcases = files / "20_testcases.sql"
    testcases.write_text(testcases.read_text().replace(
        "       tc.variant\nFROM testcase tc", "       tc.variant, tc.slurm_jobid IS NOT NULL "
        "AS in_slurm\nFROM testcase tc"))
    monkeypatch.setattr(db, "REPEATABLE_DIR", files)
    with db.connect(migrated_dsn) as conn:
        assert [change.label for change in db.upgrade(conn)] == \
            ["repeatable/20_testcases.sql"]
        assert conn.execute("SELECT count(in_slurm) FROM judged_testcase").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM key_verdict").fetchone() == (0,)
        assert db.upgrade(conn) == []


def test_failing_status_in_sql_is_states_failing(migrated_dsn: str) -> None:
    with db.connect(migrated_dsn) as conn:
        failing = [state for state in STATES
                   if conn.execute("SELECT failing_status(%s)", (state,)).fetchone()[0]]
    assert tuple(failing) == FAILING
