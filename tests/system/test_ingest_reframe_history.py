"""A site that already runs ReFrame brings its history: every session of its results
database (ReFrame 4.7+ results.db) is stored oldest first as perfguard's runs, through the
same ingest as a report (idempotent by session uuid), and a plain ReFrame report's
performance variables are ingested too. The database is produced here by plain ReFrame
running a plain check (tests/data/plain_reframe) that measures with dd."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.conftest import DATA, perfguard

PLAIN = DATA / "plain_reframe"


def plain_reframe(home: Path, session: int) -> Path:
    """One session of plain ReFrame (its builtin generic system, no perfguard settings)
    with results storage on; its report file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RFM_")}
    env.update(HOME=str(home), RFM_ENABLE_RESULTS_STORAGE="1",
               RFM_SQLITE_DB_FILE=str(home / "results.db"))
    report = home / f"session{session}.json"
    subprocess.run([str(Path(sys.executable).with_name("reframe")), "-c", str(PLAIN), "-r",
                    "--prefix", str(home / "rfm"), "--report-file", str(report)],
                   env=env, check=True, capture_output=True, timeout=300)
    return report


def test_a_reframe_results_database_becomes_history(migrated_dsn: str, tmp_path: Path) -> None:
    reports = [plain_reframe(tmp_path, n) for n in range(3)]
    imported = perfguard("ingest", "--results-db", str(tmp_path / "results.db"), "--dsn",
                         migrated_dsn, state=tmp_path)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    runs = [int(n) for n in re.findall(r": stored as run (\d+) \(1 test cases", imported.stdout)]
    assert len(runs) == 3 and runs == sorted(runs), imported.stdout
    with psycopg.connect(migrated_dsn) as conn:
        values = conn.execute(
            "SELECT k.value FROM key_verdict k WHERE k.check_name = 'PlainCopyCheck' AND "
            "k.metric = 'copy_rate' AND k.system = 'generic' ORDER BY k.started_at").fetchall()
    assert len(values) == 3 and all(v > 10 for (v,) in values)  # MB/s of a real copy
    again = perfguard("ingest", "--results-db", str(tmp_path / "results.db"), "--dsn",
                      migrated_dsn, state=tmp_path)
    assert again.returncode == 0 and again.stdout.count("nothing changed") == 3, again.stdout
    # the last session's own report file: the same session, already there
    report = perfguard("ingest", str(reports[-1]), "--dsn", migrated_dsn, state=tmp_path)
    assert f"(run {runs[-1]}); nothing changed" in report.stdout, report.stdout


def test_a_file_that_is_no_results_database_is_named(tmp_path: Path, migrated_dsn: str) -> None:
    bogus = tmp_path / "results.db"
    bogus.write_text("not sqlite")
    result = perfguard("ingest", "--results-db", str(bogus), "--dsn", migrated_dsn,
                       state=tmp_path)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"{bogus}: not a ReFrame results database" in result.stderr
    missing = perfguard("ingest", "--results-db", str(tmp_path / "absent.db"), "--dsn",
                        migrated_dsn, state=tmp_path)
    assert "absent.db: no such file" in missing.stderr
