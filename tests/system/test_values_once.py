"""Each value stored once (migration 0027): a history stored and judged by the code before
(the three copies: `sample`, `curve`, `sample_block`) is converted in place by `perfguard
db upgrade`, every run then judged again alike; and the new layout survives pg_dump and
pg_restore."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from perfguard.cluster.services import POSTGRES_BIN
from perfguard.store import db
from tests.conftest import create_database, drop_databases, perfguard, verdict_rows
from tests.system.test_history_verdicts import ingest, night_reports

REPOSITORY = Path(__file__).resolve().parents[2]
#: The last commit whose store kept each value three times (0026, before issue 52).
BEFORE = "0444924"


def code_before(folder: Path) -> Path:
    """The perfguard package of ``BEFORE`` and the shipped site files it reads, from git
    (``git archive``), under ``folder``."""
    archive = subprocess.run(["git", "-C", str(REPOSITORY), "archive", BEFORE, "perfguard",
                              "site_config", "dashboards"], capture_output=True)
    if archive.returncode:
        pytest.skip(f"no git history with {BEFORE}: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def perfguard_before(tree: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI of the code before (run in its folder: `python -m` puts the working
    directory first on the path)."""
    return subprocess.run([sys.executable, "-m", "perfguard.cli", *args], capture_output=True,
                          text=True, timeout=600, cwd=tree,
                          env={**os.environ, "PYTHONPATH": str(tree)})


def verdict_of(dsn: str, run_id: int, *options: str, tree: Path | None = None) -> list[dict]:
    result = (perfguard_before(tree, "verdict", str(run_id), "--dsn", dsn, *options)
              if tree else perfguard("verdict", str(run_id), "--dsn", dsn, *options))
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return sorted(verdict_rows(result.stdout), key=repr)  # a new verdict lists its own order


def stored_values(dsn: str) -> list[tuple]:
    with db.connect(dsn) as conn:
        return conn.execute("SELECT testcase_id, metric_id, point_id, value FROM sample "
                            "ORDER BY 1, 2, 3, 4").fetchall()


def test_a_history_of_three_copies_is_converted_and_judged_alike(
        layout, fresh_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """Ten nights (a step down in the key figures and the curves' upper sizes on the last
    three) stored and judged by the code before; after `perfguard db upgrade` every value
    is in the blocks once, `curve` is gone, and every run judged again by this code has
    the same lines, states and figures as the code before recorded. The upgraded
    database, dumped and restored, holds the same values and gives the same verdicts."""
    tree = code_before(tmp_path / "before")
    upgraded = perfguard_before(tree, "db", "upgrade", "--dsn", fresh_dsn)
    assert upgraded.returncode == 0, upgraded.stderr
    factors = [1.0] * 7 + [0.8] * 3
    reports = night_reports(demo_report, tmp_path, factors, curve_factors=factors,
                            from_size=4096)
    stored = perfguard_before(tree, "--state-dir", str(tmp_path), "ingest", "--dsn", fresh_dsn,
                              "--trigger", "nightly", *map(str, reports))
    assert stored.returncode == 0, stored.stdout + stored.stderr
    with db.connect(fresh_dsn) as conn:
        runs = [r for (r,) in conn.execute("SELECT id FROM run ORDER BY started_at")]
        assert conn.execute("SELECT to_regclass('curve')").fetchone()[0] == "curve"
        three_copies = conn.execute("SELECT count(*) FROM sample").fetchone()[0]
    assert len(runs) == len(reports) and three_copies > 0
    before = {run: verdict_of(fresh_dsn, run, tree=tree) for run in runs}
    values = stored_values(fresh_dsn)
    assert all(before.values()), before

    upgrade = perfguard("db", "upgrade", "--dsn", fresh_dsn)
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    with db.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT to_regclass('curve')").fetchone()[0] is None
        assert conn.execute("SELECT relkind FROM pg_class WHERE relname = 'sample'"
                            ).fetchone()[0] == "v"
    assert stored_values(fresh_dsn) == values
    for run in runs:
        assert verdict_of(fresh_dsn, run, "--rejudge") == before[run], f"run {run}"

    dump = tmp_path / "values_once.dump"
    subprocess.run([str(POSTGRES_BIN / "pg_dump"), "-Fc", "-f", str(dump), fresh_dsn],
                   check=True, capture_output=True)
    name, restored = create_database(layout)
    try:
        result = subprocess.run([str(POSTGRES_BIN / "pg_restore"), "--no-owner", "-d",
                                 restored, str(dump)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert stored_values(restored) == values
        assert verdict_of(restored, runs[-1], "--rejudge") == before[runs[-1]]
        later = tmp_path / "later"
        later.mkdir()
        again = perfguard("ingest", "--dsn", restored, "--trigger", "nightly",
                          str(night_reports(demo_report, later, [0.8], seed=99)[0]),
                          state=later)
        assert again.returncode == 0 and "stored as run" in again.stdout, again.stderr
    finally:
        drop_databases(layout, [name])


def test_ingest_stores_each_value_once(migrated_dsn: str, demo_report: Path,
                                       tmp_path: Path) -> None:
    """No table but the blocks holds values: `sample` and `curve` are no tables, and the
    blocks' values number the report's."""
    [run] = ingest(migrated_dsn, night_reports(demo_report, tmp_path, [1.0]))
    with db.connect(migrated_dsn) as conn:
        kinds = dict(conn.execute("SELECT relname, relkind FROM pg_class WHERE relname IN "
                                  "('sample', 'curve', 'sample_block')").fetchall())
        blocks = conn.execute("SELECT sum(cardinality(testcase_ids) * cardinality(point_ids)) "
                              "FROM sample_block WHERE run_id = %s", (run,)).fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM sample WHERE run_id = %s",
                            (run,)).fetchone()[0]
    assert kinds == {"sample": "v", "sample_block": "p"}
    assert blocks == rows > 0


def test_the_key_figures_series_are_series_value_at_point_zero(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """key_series_value (read by change-point detection and thresholds from history, which
    through series_value unpacked every curve) holds series_value's key figures, row for
    row, and no curve point."""
    ingest(migrated_dsn, night_reports(demo_report, tmp_path, [1.0, 0.9]))
    columns = ("run_id, started_at, system, check_name, params::text, partition, environ, "
               "metric, unit, value, nodelist")
    with db.connect(migrated_dsn) as conn:
        keys = conn.execute(f"SELECT {columns} FROM key_series_value ORDER BY 1, 4, 5, 8, 10"
                            ).fetchall()
        at_zero = conn.execute(f"SELECT {columns} FROM series_value WHERE point_id = 0 "
                               "ORDER BY 1, 4, 5, 8, 10").fetchall()
        curve_points = conn.execute("SELECT count(*) FROM series_value WHERE point_id <> 0"
                                    ).fetchone()[0]
    assert keys == at_zero and len(keys) > 0 and curve_points > 0
