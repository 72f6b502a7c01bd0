"""Thresholds in the database: history, YAML exchange, derive, and ReFrame failing on them."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from perfguard.contract.references import References
from perfguard.judge import thresholds as th
from perfguard.run.reframe import RunRequest
from perfguard.store.ingest import RunMeta, ingest_paths
from perfguard.store.report import load
from tests.conftest import perfguard, run_checks

LAT = ["--system", "local", "--check", "UcxPerftestCheck", "--param", "test=tag_lat",
       "--metric", "latency", "--unit", "us", "--direction", "lower"]


def test_change_keeps_history(migrated_dsn: str) -> None:
    first = perfguard("thresholds", "set", "--dsn", migrated_dsn, *LAT, "--reference", "2",
                      "--upper", "20%", "--reason", "first")
    again = perfguard("thresholds", "set", "--dsn", migrated_dsn, *LAT, "--reference", "2",
                      "--upper", "20%")
    second = perfguard("thresholds", "set", "--dsn", migrated_dsn, *LAT, "--reference", "3",
                       "--upper", "20%", "--reason", "new fabric")
    assert first.stdout.startswith("set:") and again.stdout.startswith("unchanged:")
    assert second.stdout.startswith("set:")
    with psycopg.connect(migrated_dsn) as conn:
        rows = th.history(conn, "local")
        assert [(t.reference, t.valid_to is None) for t in rows] == [(2.0, False), (3.0, True)]
        assert rows[0].valid_to == rows[1].valid_from or rows[0].valid_to <= rows[1].valid_from
        assert [t.reference for t in th.current(conn, "local")] == [3.0]
    listing = perfguard("thresholds", "history", "--dsn", migrated_dsn)
    assert "first" in listing.stdout and "new fabric" in listing.stdout


def test_yaml_export_import_roundtrip(migrated_dsn: str, new_database, tmp_path: Path) -> None:
    fresh_dsn = new_database()
    perfguard("thresholds", "set", "--dsn", migrated_dsn, *LAT, "--reference", "2.5",
              "--upper", "3.0", "--point", "size=8", check=True)
    exported = tmp_path / "local.yaml"
    perfguard("thresholds", "export", "--dsn", migrated_dsn, "--system", "local", "-o",
              str(exported), check=True)
    perfguard("db", "upgrade", "--dsn", fresh_dsn, check=True)
    imported = perfguard("thresholds", "import", "--dsn", fresh_dsn, str(exported), check=True)
    assert "1 thresholds, 1 changed" in imported.stdout
    with psycopg.connect(fresh_dsn) as conn:
        [t] = th.current(conn, "local")
    assert (t.bounds, t.upper, t.point, t.params) == ("absolute", 3.0, {"size": 8},
                                                      {"test": "tag_lat"})


def test_bad_yaml_is_named(tmp_path: Path, migrated_dsn: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("system: local\nthresholds:\n  - check: X\n    metric: bw\n")
    result = perfguard("thresholds", "import", "--dsn", migrated_dsn, str(bad))
    assert result.returncode == 2
    assert f"{bad}: thresholds[0]" in result.stderr and "reference" in result.stderr


def test_derive_proposes_then_applies(migrated_dsn: str, demo_report: Path,
                                      tmp_path: Path) -> None:
    ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta(labels=("good",)))
    proposed = perfguard("thresholds", "derive", "--dsn", migrated_dsn, "--from-run", "good",
                         "--tolerance", "15%")
    assert "proposed" in proposed.stdout and "direction: lower" in proposed.stdout
    with psycopg.connect(migrated_dsn) as conn:
        assert th.current(conn) == []
    perfguard("thresholds", "derive", "--dsn", migrated_dsn, "--from-run", "good", "--apply",
              check=True)
    with psycopg.connect(migrated_dsn) as conn:
        derived = th.current(conn)
    key_figures = sum(1 for tc in load(demo_report).testcases for s in tc.samples
                      if not s.point)
    assert len(derived) == key_figures
    lat = next(t for t in derived if t.metric == "latency")
    assert (lat.direction, lat.upper, lat.lower) == ("lower", 0.10, None)


def test_reframe_fails_check_that_misses_db_threshold(layout, tmp_path: Path) -> None:
    dsn = layout.dsn
    perfguard("db", "upgrade", "--dsn", dsn, check=True)
    perfguard("thresholds", "set", "--dsn", dsn, *LAT, "--reference", "0.001", "--upper",
              "10%", "--reason", "impossible on purpose", check=True)
    try:
        outcome = run_checks(RunRequest(names=("UcxPerftestCheck",),
                                         extra=("-x", "UcxPerftestCheck%test=tag_bw"),
                                         setvars=("iterations=2000",)))
    finally:
        perfguard("thresholds", "set", "--dsn", dsn, *LAT, "--reference", "1000", "--upper",
                  "10%", "--reason", "restore a passing bound", check=True)
    cases = {tc.params["test"]: tc for tc in load(outcome.report).testcases
             if tc.check == "UcxPerftestCheck"}
    assert outcome.returncode != 0
    assert cases["tag_lat"].result == "fail" and cases["tag_lat"].fail_phase == "performance"
    assert "latency" in cases["tag_lat"].fail_reason
    assert cases["ucp_put_lat"].result == "pass"


def test_a_check_picks_from_the_references_file_what_matching_threshold_picks(
        migrated_dsn: str, tmp_path: Path) -> None:
    """The checks read references from a file (no database driver in them): for every
    variant, the row they take is the one the database's matching_threshold() takes,
    which the verdict and the dashboards use."""
    rng = random.Random(7)
    with psycopg.connect(migrated_dsn) as conn:
        for i in range(40):
            keys = rng.sample(["x", "y"], rng.randint(0, 2))
            th.set_threshold(conn, th.Threshold(
                system="agree", check="C", metric=rng.choice(["latency", "bandwidth"]),
                reference=float(i + 1), direction="lower", upper=0.1, unit="us",
                partition=rng.choice([None, "p1", "p2"]), environ=rng.choice([None, "e1"]),
                params={k: rng.choice(["a", "b"]) for k in keys}))
        conn.commit()
        written = th.references_in_force(conn, "agree").write(tmp_path / "references.json")
        from_file = References.read(written)
        compared = 0
        for partition, environ, x, y in itertools.product(
                ["p1", "p2", "p3"], ["e1", "e2"], ["a", "b"], ["a", "b"]):
            params = {"x": x, "y": y}
            picked = from_file.for_test("C", params, partition, environ,
                                        ["latency", "bandwidth"])
            for metric in ("latency", "bandwidth"):
                row = conn.execute(
                    "SELECT reference FROM matching_threshold('agree', 'C', %s, NULL, %s, %s, "
                    "%s, now())", (metric, partition, environ, Jsonb(params))).fetchone()
                assert (row and row[0]) == (picked.get(metric, (None,))[0] or None), \
                    (metric, partition, environ, params)
                compared += row is not None
    assert compared > 20  # most variants have a threshold: the comparison means something
