"""Thresholds in the database: history, YAML exchange, derive, and ReFrame failing on them."""

from __future__ import annotations

import itertools
import json
import random
import re
import uuid
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from perfguard.contract.references import References
from perfguard.judge import thresholds as th
from perfguard.run.reframe import RunRequest
from perfguard.store.ingest import RunMeta, ingest_paths
from perfguard.store.report import load
from tests.conftest import perfguard, run_checks, verdict_rows

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


def predate_thresholds(dsn: str) -> None:
    """Make every threshold valid before the runs the test stores (thresholds are matched
    by the run's start: one set now never judges a run stored before)."""
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE threshold SET valid_from = '2000-01-01'")


def verdict_states(stdout: str, check: str) -> dict[tuple[str, str], str]:
    """(test parameter, metric) → the state of the line, for one check's lines."""
    return {(row["variant"].split("%test=")[1].split()[0], row["metric"]):
            row["verdict"].split(":")[0]
            for row in verdict_rows(stdout) if row["check"] == check}


def test_a_threshold_in_another_unit_is_converted_into_the_metrics_own(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """Latency is stored in µs: 50000 ns is stored as 50 µs (not 50000 µs, which any
    latency passed), a bandwidth unit is refused naming µs, and 10 ns judges a real
    latency (0.2–1 µs here) fail. An imported file converts alike."""
    ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta())
    lat = [*LAT[:-4], "--direction", "lower"]  # LAT without --unit us
    stored = perfguard("thresholds", "set", "--dsn", migrated_dsn, *lat, "--unit", "ns",
                       "--reference", "50000", "--upper", "60000", check=True)
    with psycopg.connect(migrated_dsn) as conn:
        [t] = th.current(conn, "local")
    assert (t.reference, t.upper, t.unit) == (50.0, 60.0, "us"), stored.stdout
    refused = perfguard("thresholds", "set", "--dsn", migrated_dsn, *lat, "--unit", "MB/s",
                        "--reference", "5", "--upper", "10%")
    assert refused.returncode == 2 and "latency is measured in 'us'" in refused.stderr
    assert "Traceback" not in refused.stderr

    perfguard("thresholds", "set", "--dsn", migrated_dsn, *lat, "--unit", "ns",
              "--reference", "10", "--upper", "10%", check=True)
    predate_thresholds(migrated_dsn)
    judged = perfguard("verdict", "--dsn", migrated_dsn)
    states = verdict_states(judged.stdout, "UcxPerftestCheck")
    assert judged.returncode == 1 and states[("tag_lat", "latency")] == "fail", judged.stdout

    ns = tmp_path / "ns.yaml"
    ns.write_text("system: local\nthresholds:\n- {check: UcxPerftestCheck, params: {test: "
                  "ucp_put_lat}, metric: latency, reference: 2000, upper: 0.5, unit: ns, "
                  "direction: lower}\n")
    perfguard("thresholds", "import", "--dsn", migrated_dsn, str(ns), check=True)
    with psycopg.connect(migrated_dsn) as conn:
        [put] = [t for t in th.current(conn, "local") if t.params == {"test": "ucp_put_lat"}]
    assert (put.reference, put.upper, put.unit) == (2.0, 0.5, "us")


def test_a_scope_that_nothing_has_is_refused_unless_forced(migrated_dsn: str) -> None:
    """No run is stored: the check library alone says what exists. A misspelt system,
    check, parameter or metric never matches a value, so it is refused naming what is
    known; --force pre-seeds it with a warning. `set` says it judges later runs only."""
    for wrong, said in ((["--system", "lcoal"], "system 'lcoal' (known: "),
                        (["--check", "UcxPerfTestCheck"], "UcxPerftestCheck"),
                        (["--param", "test=tag_latt"], "parameter test=tag_latt of "
                                                       "UcxPerftestCheck (known: "),
                        (["--metric", "latnecy"], "metric 'latnecy' of UcxPerftestCheck")):
        result = perfguard("thresholds", "set", "--dsn", migrated_dsn, *LAT, *wrong,
                           "--reference", "2", "--upper", "20%")
        assert result.returncode == 2, result.stdout
        assert "no stored run and no check has" in result.stderr and said in result.stderr
        assert "--force" in result.stderr and "Traceback" not in result.stderr
    with psycopg.connect(migrated_dsn) as conn:
        assert th.current(conn) == []
    forced = perfguard("thresholds", "set", "--dsn", migrated_dsn, *LAT, "--metric",
                       "latency_p99", "--reference", "2", "--upper", "20%", "--force",
                       check=True)
    assert "warning" in forced.stderr and "pre-seeded" in forced.stderr
    known = perfguard("thresholds", "set", "--dsn", migrated_dsn, *LAT, "--reference", "2",
                      "--upper", "20%", check=True)
    assert "runs stored before it are never judged by it" in known.stdout


def test_delete_ends_a_threshold_and_keeps_its_history(migrated_dsn: str) -> None:
    perfguard("thresholds", "set", "--dsn", migrated_dsn, *LAT, "--reference", "2",
              "--upper", "20%", "--reason", "first", check=True)
    with psycopg.connect(migrated_dsn) as conn:
        [t] = th.current(conn)
    deleted = perfguard("thresholds", "delete", "--dsn", migrated_dsn, str(t.id),
                        check=True)
    assert deleted.stdout.startswith(f"deleted: #{t.id}")
    assert perfguard("thresholds", "list", "--dsn", migrated_dsn).stdout == "no thresholds\n"
    with psycopg.connect(migrated_dsn) as conn:
        [kept] = th.history(conn)
    assert kept.id == t.id and kept.valid_to is not None and kept.reason == "first"
    again = perfguard("thresholds", "delete", "--dsn", migrated_dsn, str(t.id))
    assert again.returncode == 2 and f"#{t.id}" in again.stderr and "Traceback" not in \
        again.stderr


def test_a_missed_threshold_fails_its_own_figure_only(migrated_dsn: str, demo_report: Path,
                                                      tmp_path: Path) -> None:
    """ReFrame fails a whole test case when one figure misses its reference; the verdict
    fails that figure and judges the others on their own (they were measured). A check's
    own reference judges where the database has none, and a figure without a declared
    direction takes it from its threshold or its reference's one-sided bound."""
    raw = json.loads(demo_report.read_text())
    raw["session_info"]["uuid"] = str(uuid.uuid4())
    cases = {c["display_name"].split("%test=")[1].split()[0]: c
             for c in raw["runs"][0]["testcases"] if c["name"].startswith("UcxPerftest")}
    lat = cases["tag_lat"]
    value = lat["perfvalues"]["local:compute:latency"][0]
    lat["perfvalues"]["local:compute:latency"] = [value, 0.001, None, 0.1, "us", "fail"]
    lat["perfvalues"]["local:compute:latency_p50"] = [value, 0, None, None, "us", "pass"]
    lat.update(result="fail", fail_phase="performance",
               fail_reason=f"performance error: failed to meet reference(s): latency={value}"
                           f" us, expected 0.001 (l=-inf, u=0.0011)")
    for test, reference in (("tag_bw", [1e9, -0.1, None]), ("ucp_put_bw", [0, None, None])):
        case = cases[test]  # a plain ReFrame check: no perfguard_better
        case["name"] = case["name"].replace("UcxPerftestCheck", "PlainBwCheck")
        case["display_name"] = case["display_name"].replace("UcxPerftestCheck",
                                                            "PlainBwCheck")
        case["perfguard_better"] = None
        entry = case["perfvalues"]["local:compute:bandwidth"]
        entry[1:4] = reference
    # a check whose direction its own one-sided reference implies (base.py says which)
    implied = cases["ucp_put_lat"]
    for key in ("name", "display_name"):
        implied[key] = implied[key].replace("UcxPerftestCheck", "ImpliedLatCheck")
    implied.update(perfguard_better={"latency": "lower"},
                   perfguard_better_implied=["latency"])
    cases["tag_bw"].update(result="fail", fail_phase="performance",
                           fail_reason="performance error: failed to meet reference(s): "
                                       "bandwidth")
    report = tmp_path / "one-missed.json"
    report.write_text(json.dumps(raw))
    [stored] = ingest_paths(tmp_path, migrated_dsn, [report], RunMeta())
    perfguard("thresholds", "set", "--dsn", migrated_dsn, *LAT, "--reference", "0.001",
              "--upper", "10%", check=True)
    perfguard("thresholds", "set", "--dsn", migrated_dsn, "--system", "local", "--check",
              "PlainBwCheck", "--param", "test=ucp_put_bw", "--metric", "bandwidth",
              "--direction", "higher", "--reference", "1", "--lower=-10%", check=True)
    predate_thresholds(migrated_dsn)

    judged = perfguard("verdict", str(stored.run_id), "--dsn", migrated_dsn)
    ucx = verdict_states(judged.stdout, "UcxPerftestCheck")
    plain = verdict_states(judged.stdout, "PlainBwCheck")
    assert ucx[("tag_lat", "latency")] == "fail", judged.stdout
    assert ucx[("tag_lat", "latency_p50")] == "inconclusive", judged.stdout
    assert plain[("tag_bw", "bandwidth")] == "fail", judged.stdout  # the check's own
    failed = [row for row in verdict_rows(judged.stdout) if row["verdict"] == "fail"]
    assert len(failed) == 2, judged.stdout  # the two figures that missed, no other
    explained = perfguard("verdict", str(stored.run_id), "--dsn", migrated_dsn, "--explain",
                          "PlainBwCheck").stdout
    assert "not declared" not in explained, explained
    assert "better: higher (the threshold's)" in explained, explained
    assert "better: higher (the reference's lower bound)" in explained, explained
    # words true (issue 67): the check's own reference is no stored threshold
    assert re.search(r"the check's own reference \(no threshold stored\): reference "
                     r"1,000,000,000", explained), explained
    assert re.search(r"  threshold: reference 1, limits \[.*\] \(acceptance floor\)",
                     explained), explained
    assert explained.count("(acceptance floor)") == 1, explained
    said = perfguard("verdict", str(stored.run_id), "--dsn", migrated_dsn, "--explain",
                     "ImpliedLatCheck").stdout
    assert "better: lower (implied by its reference)" in said, said
    assert "better: lower (implied" not in perfguard(
        "verdict", str(stored.run_id), "--dsn", migrated_dsn, "--explain",
        "UcxPerftestCheck").stdout
