"""Verdicts from history on the real database: a step is caught, a spike is not, a short
history is inconclusive, and one threshold-matching rule for CLI, run and dashboards."""

from __future__ import annotations

import getpass
import json
import random
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pytest
import yaml

from perfguard.judge import thresholds
from perfguard.judge.rules import load_rules
from perfguard.present import text as tx
from tests.conftest import perfguard, verdict_rows

#: Who accepts and acknowledges: the account that ran the command, not the shared role.
ME = getpass.getuser()
BW_LINE = "UcxPerftestCheck %hca=lo %memory=host %test=tag_bw bandwidth"


def store_nights(dsn: str, demo_report: Path, tmp_path: Path, factors: list[float],
                 cv: float = 0.01, seed: int = 7,
                 curve_factors: list[float] | None = None, from_size: int = 0,
                 kernel_from: int | None = None, slower: bool = False) -> list[int]:
    """One stored run per night, a day apart, every key figure of the real demo report
    scaled by the night's factor and a normal noise of ``cv`` (and every curve point from
    ``from_size`` up by the night's curve factor and noise), each judged as `perfguard
    ingest` judges it: run ids, oldest first."""
    return ingest(dsn, night_reports(demo_report, tmp_path, factors, cv, seed, curve_factors,
                                     from_size, kernel_from, slower), "--trigger", "nightly")


def night_reports(demo_report: Path, tmp_path: Path, factors: list[float],
                  cv: float = 0.01, seed: int = 7, curve_factors: list[float] | None = None,
                  from_size: int = 0, kernel_from: int | None = None,
                  slower: bool = False) -> list[Path]:
    """The reports ``store_nights`` stores, oldest first. ``slower``: a factor below 1
    slows every figure down as a fault would (latencies divided by it, not multiplied)."""

    def scaled(factor: float, metric: str) -> float:
        return 1 / factor if slower and "lat" in metric else factor

    raw = json.loads(demo_report.read_text())
    rng = random.Random(seed)
    paths = []
    for night, factor in enumerate(factors):
        copy = json.loads(json.dumps(raw))
        copy["session_info"]["uuid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        copy["session_info"]["time_start_unix"] += 86400 * (night - len(factors))
        for case in copy["runs"][0]["testcases"]:
            if kernel_from is not None and night >= kernel_from:
                for facts in (case.get("perfguard_fingerprints") or {}).values():
                    facts["kernel"] = "6.1.0-99-amd64"
            for key, entry in (case.get("perfvalues") or {}).items():
                entry[0] *= scaled(factor, key) * rng.gauss(1.0, cv)
            for series in case.get("perfguard_samples") or []:
                sizes = series["coords"].get("size") or []
                curve = scaled((curve_factors or factors)[night], str(series.get("metric")))
                series["values"] = [v * rng.gauss(1.0, cv) * (curve if s >= from_size else 1)
                                    for v, s in zip(series["values"], sizes)] or \
                    series["values"]
        path = tmp_path / f"night{night:03d}.json"
        path.write_text(json.dumps(copy))
        paths.append(path)
    return paths


def ingest(dsn: str, paths: list[Path], *options: str) -> list[int]:
    """`perfguard ingest` (stores, then judges and records each run): the run ids."""
    result = perfguard("ingest", "--dsn", dsn, *options, *map(str, paths),
                       state=paths[0].parent)  # a report it cannot store is spooled there
    assert result.returncode == 0, result.stdout + result.stderr
    return [int(n) for n in re.findall(r": stored as run (\d+) ", result.stdout)]


def state_of(dsn: str, run_id: int, line: str = BW_LINE) -> str:
    result = perfguard("verdict", str(run_id), "--explain", line, "--dsn", dsn)
    assert result.returncode in (0, 1), result.stderr
    decision = next(x for x in result.stdout.splitlines() if x.startswith("  decision:"))
    return decision.split()[1]


def test_a_five_percent_step_is_a_regression_within_two_nights(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 20 + [0.95] * 3,
                        slower=True)
    first, second = state_of(migrated_dsn, runs[20]), state_of(migrated_dsn, runs[21])
    assert "regression" in (first, second), (first, second)
    assert state_of(migrated_dsn, runs[19]) != "regression"  # the night before the step
    result = perfguard("verdict", str(runs[21]), "--dsn", migrated_dsn)
    assert result.returncode == 1 and "regression: -" in result.stdout
    explained = perfguard("verdict", str(runs[21]), "--explain", BW_LINE, "--dsn",
                          migrated_dsn).stdout
    assert re.search(r"baseline: median \S+, noise σ \S+ \(standard deviation of the values "
                     r"within 3\.5 MAD-σ of the median, at least 0\.1% of it; "
                     r"CV [01]\.\d\d%\)", explained), explained
    assert "better: higher" in explained


def test_dashboards_show_the_states_the_cli_prints(migrated_dsn: str, demo_report: Path,
                                                  tmp_path: Path) -> None:
    """`perfguard ingest` judges each run once and stores its lines; the dashboards read
    those, and they say what `perfguard verdict` says."""
    from datetime import timedelta

    from perfguard.present import dashboards

    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 20 + [0.95] * 3)
    stored_at_ingest = _stored_states(migrated_dsn, runs[21])
    assert stored_at_ingest[BW_LINE] == "regression"
    cli = perfguard("verdict", str(runs[21]), "--dsn", migrated_dsn).stdout
    for name, state in stored_at_ingest.items():
        check, *params, metric = name.split(" ")
        row = next(r for r in verdict_rows(cli) if r["check"] == check and
                   all(p in r["variant"] for p in params) and r["metric"] == metric)
        assert row["verdict"].split(":")[0] == state, (name, row)
    assert _stored_states(migrated_dsn, runs[21]) == stored_at_ingest  # judged alike again
    [panel] = [q for q in dashboards.queries() if q.panel.startswith("Verdict of run")]
    now = datetime.now(timezone.utc)
    sql = dashboards.expand(panel.sql, {"run": str(runs[21])}, now - timedelta(days=90), now)
    with psycopg.connect(migrated_dsn) as conn:
        shown = conn.execute(sql).fetchall()
    assert ("UcxPerftestCheck", "bandwidth", "regression") in {
        (row[0], row[3], row[8]) for row in shown if '"tag_bw"' in row[1]}
    assert shown[0][8] == "regression"  # the worst first


def _stored_states(dsn: str, run_id: int) -> dict[str, str]:
    """Key-figure lines of a run as stored in verdict_line, named as the CLI names them."""
    from perfguard.judge.verdict import variant_name

    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT check_name, params, metric, status FROM verdict_line "
                            "WHERE run_id = %s AND point = '{}' AND metric NOT LIKE '%% curve'",
                            (run_id,)).fetchall()
    return {f"{variant_name(c, p)} {m}": s for c, p, m, s in rows}


def test_a_curve_that_regressed_at_large_sizes_only_names_them(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The key figure (1 MiB) is steady, the curve lost 6 % from 64 KiB up: the verdict
    names the sizes, and the run fails."""
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 23,
                        curve_factors=[1.0] * 20 + [0.94] * 3, from_size=65536, slower=True)
    result = perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn)
    assert result.returncode == 1, result.stdout
    [line] = [r["verdict"] for r in verdict_rows(result.stdout)
              if r["check"] == "UcxPerftestCheck" and "%test=tag_bw" in r["variant"]
              and r["metric"] == "bandwidth curve"]
    assert re.search(r"regression: regressed at 64 KiB–1 MiB by \d\.\d%–\d\.\d%", line), line
    assert re.findall(r"regressed at ([^;]+?) by", line) == ["64 KiB–1 MiB"], line
    # the same sweep's latency rose by as much: worse, and said so
    assert any(r["metric"] == "latency curve" and
               r["verdict"].startswith("regression: regressed at 64 KiB–1 MiB")
               for r in verdict_rows(result.stdout))


def test_a_single_spike_never_alarms(migrated_dsn: str, demo_report: Path,
                                     tmp_path: Path) -> None:
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 20 + [0.7] + [1.0] * 2)
    assert state_of(migrated_dsn, runs[20]) == "inconclusive"  # said, but does not fail
    assert state_of(migrated_dsn, runs[21]) == "pass"
    assert state_of(migrated_dsn, runs[22]) == "pass"
    assert perfguard("verdict", str(runs[20]), "--dsn", migrated_dsn).returncode == 0


def test_a_short_history_is_inconclusive(migrated_dsn: str, demo_report: Path,
                                         tmp_path: Path) -> None:
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 4)
    explained = perfguard("verdict", str(runs[-1]), "--explain", BW_LINE, "--dsn",
                          migrated_dsn).stdout
    assert "decision: inconclusive — not yet judged: history 1 of 8 runs" in explained


def test_a_tie_between_thresholds_resolves_alike_in_cli_run_and_dashboards(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """Two thresholds as specific as each other (one names the partition, one the
    environ): the newest stored wins everywhere."""
    [run] = store_nights(migrated_dsn, demo_report, tmp_path, [1.0])
    bw = ["--system", "local", "--check", "UcxPerftestCheck", "--param", "test=tag_bw",
          "--param", "memory=host", "--param", "hca=lo", "--metric", "bandwidth", "--unit", "MiB/s"]
    perfguard("thresholds", "set", "--dsn", migrated_dsn, *bw, "--partition", "compute",
              "--reference", "1", "--lower=-10%", check=True)
    perfguard("thresholds", "set", "--dsn", migrated_dsn, *bw, "--environ", "gnu-openmpi",
              "--reference", "1e12", "--lower=-10%", check=True)
    with psycopg.connect(migrated_dsn) as conn:
        conn.execute("UPDATE threshold SET valid_from = '2000-01-01'")
        newest = conn.execute("SELECT max(id) FROM threshold").fetchone()[0]
        dashboard = conn.execute(
            "SELECT threshold_id, status FROM key_verdict WHERE run_id = %s AND "
            "check_name = 'UcxPerftestCheck' AND metric = 'bandwidth' "
            "AND params->>'test' = 'tag_bw' AND params->>'memory' = 'host'", (run,)).fetchone()
        by_run = thresholds.references_in_force(conn, "local").for_test(
            "UcxPerftestCheck", {"test": "tag_bw", "memory": "host", "hca": "lo"},
            "compute", "gnu-openmpi", ["bandwidth"])
    assert dashboard == (newest, "fail")
    assert by_run["bandwidth"][0] == 1e12
    explained = perfguard("verdict", str(run), "--rejudge", "--explain", BW_LINE, "--dsn",
                          migrated_dsn)  # set after the run was judged: judged again
    assert "threshold: reference 1,000,000,000,000" in explained.stdout
    assert explained.returncode == 1


def test_thresholds_derived_from_history_sit_a_few_noise_below_the_median(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 12)
    result = perfguard("thresholds", "derive", "--from-history", "12", "--dsn", migrated_dsn)
    assert result.returncode == 0, result.stderr
    entries = yaml.safe_load(result.stdout)["thresholds"]
    [bw] = [e for e in entries if e["check"] == "UcxPerftestCheck"
            and e["params"] == {"hca": "lo", "memory": "host", "test": "tag_bw"}]
    assert bw["direction"] == "higher" and "upper" not in bw
    assert -0.08 < bw["lower"] < -0.02  # 4 noise at CV 1 %
    assert bw["reason"] == f"median of the last 12 runs up to run {runs[-1]}, 4 sigma"
    narrower = perfguard("thresholds", "derive", "--from-history", "12", "--sigmas", "2",
                         "--dsn", migrated_dsn)  # docs/verdicts.md's `[--sigmas 4]`
    [bw2] = [e for e in yaml.safe_load(narrower.stdout)["thresholds"]
             if e["check"] == "UcxPerftestCheck" and e["params"] == bw["params"]]
    assert bw2["lower"] == pytest.approx(-max(-bw["lower"] / 2, 0.01), rel=1e-3)
    assert bw2["reason"].endswith(", 2 sigma")
    short = perfguard("thresholds", "derive", "--from-history", "30", "--dsn", migrated_dsn)
    assert "12 runs of history, 8 needed" not in short.stdout  # 12 ≥ 8: proposed
    assert "# 0 thresholds" not in short.stdout


def test_change_points_name_the_run_and_what_changed_there(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """A -7 % level shift from night 20, with a new kernel on that night; one spike at
    night 8 is no change point."""
    factors = [1.0] * 8 + [0.6] + [1.0] * 11 + [0.93] * 10
    runs = store_nights(migrated_dsn, demo_report, tmp_path, factors, kernel_from=20)
    elsewhere = perfguard("changepoints", "--system", "elsewhere", "--dsn", migrated_dsn)
    assert elsewhere.stdout.splitlines() == ["0 change points stored"], elsewhere.stdout
    result = perfguard("changepoints", "--system", "local", "--dsn", migrated_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == perfguard("changepoints", "--dsn", migrated_dsn).stdout
    lines = [x for x in result.stdout.splitlines() if x.startswith(BW_LINE.rsplit(" ", 1)[0])
             and " bandwidth " in x]
    assert len(lines) == 1, result.stdout
    [line] = lines
    assert re.search(rf"bandwidth on compute/gnu-openmpi: -[5-9]\.\d% since run {runs[20]} "
                     r"\(regression: ", line), line
    assert "changed there: node" in line and "kernel" in line and "6.1.0-99-amd64" in line
    with psycopg.connect(migrated_dsn) as conn:  # Grafana's annotation query
        annotations = conn.execute("SELECT time, text, kind FROM change_point_annotation"
                                   ).fetchall()
    assert any(kind == "regression" and text.startswith("UcxPerftestCheck bandwidth -")
               and "6.1.0-99-amd64" in text for _, text, kind in annotations), annotations


def test_latency_is_judged_by_its_own_rule(migrated_dsn: str, demo_report: Path,
                                           tmp_path: Path) -> None:
    """site_config/verdict_rules.yaml: latency k = 2 (measured), bandwidth the default."""
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 12)
    lat = perfguard("verdict", str(runs[-1]), "--explain", "%test=tag_lat latency",
                    "--dsn", migrated_dsn).stdout
    bw = perfguard("verdict", str(runs[-1]), "--explain", BW_LINE, "--dsn", migrated_dsn).stdout
    assert "rule: a run is beyond when 2σ" in lat and "rule: a run is beyond when 1.3σ" in bw
    assert "on average 1.8σ" in lat and "on average 1.8σ" in bw
    assert "decide; not where 3 earlier runs were at that level (half to twice as far out, " \
        "at least 3σ) and came back: a state the line returns to" in bw


def test_same_fingerprint_rule_learns_the_new_level_after_an_upgrade(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """A kernel upgrade and a −5 % level on the same night: judged against all history it
    is a regression; with ``same_fingerprint`` the new epoch is too short for a baseline
    (inconclusive), and once it has eight runs of its own the new level raises no alarm."""
    from perfguard.judge import verdict as vd

    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 15 + [0.95] * 11,
                        kernel_from=15)
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text("rules:\n  - metric: bandwidth\n    same_fingerprint: true\n")
    epoch_rules = load_rules(rules_file)

    def state(run_id: int, rules) -> str:
        with psycopg.connect(migrated_dsn) as conn:
            return next(line.status for line in vd.verdict(conn, run_id, rules)
                        if tx.name_of(line) == BW_LINE)

    assert state(runs[16], None) == "regression"
    assert state(runs[16], epoch_rules) == "inconclusive"
    assert state(runs[-1], epoch_rules) in ("pass", "inconclusive")  # the new level: no alarm
    # Against all history, 8 of the 23 earlier runs are the new level already: the
    # baseline's noise doubles and the 5 % step is about 2σ of it, so this seed's last
    # night is inconclusive (regression on a quarter of seeds, under the rule before too).
    assert state(runs[-1], None) in ("regression", "inconclusive")


def test_the_curve_verdict_reads_the_newest_nights_and_rereads_curves_missing_one(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The curve verdict reads only the newest runs that the rule's values take (33 of
    the 36 recent runs ``read`` reads), and again from all recent runs the curves that
    found fewer there (a test case failed on one of those nights): every measured size
    then holds the same values the rule judges by as ``read`` gives it."""
    from perfguard.judge import history
    from perfguard.judge.rules import DEFAULT_RULES
    from perfguard.store import queries
    from perfguard.store.ingest import RunMeta, ingest_paths

    reports = night_reports(demo_report, tmp_path, [1.0] * 36)
    runs = [stored.run_id for stored in ingest_paths(tmp_path, migrated_dsn, reports,
                                                     RunMeta("nightly"))]  # not judged
    with psycopg.connect(migrated_dsn) as conn:
        conn.execute("UPDATE testcase SET result = 'fail' WHERE run_id = %s AND "
                     "check_name = 'UcxPerftestCheck' AND params->>'test' = 'tag_bw'",
                     (runs[30],))
        sizes = sorted(dict(queries.tuples(conn, "sized_points")))
        checks = ["UcxPerftestCheck"]
        every = history.read(conn, runs[-1], checks, sizes, DEFAULT_RULES)
        found = history.curves(conn, runs[-1], checks, sizes, DEFAULT_RULES)
        measured = history.named(conn, [row for curve in found for row in curve.rows
                                        if row[5]])
    assert measured and set(measured) <= set(every)
    lengths = {}
    for key, series in measured.items():
        assert series.values == every[key].values[-len(series.values):]
        lengths[json.loads(series.params_text)["test"]] = len(series.values)
    assert lengths.pop("tag_bw") == 35 and set(lengths.values()) == {33}, lengths


def test_key_figures_are_read_from_the_newest_nights_and_reread_where_one_is_missing(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The key figures too are read from the newest runs the rule's values take (33 of
    36), and again from all recent runs for the variants that found fewer there (a
    failed test case): each measured series ends in the values a rule that reads every
    night (a window of 40) finds."""
    from dataclasses import replace

    from perfguard.judge import history
    from perfguard.judge.rules import DEFAULT_RULE, DEFAULT_RULES, Rules
    from perfguard.store.ingest import RunMeta, ingest_paths

    reports = night_reports(demo_report, tmp_path, [1.0] * 36)
    runs = [stored.run_id for stored in ingest_paths(tmp_path, migrated_dsn, reports,
                                                     RunMeta("nightly"))]  # not judged
    every_night = Rules((("*", "*", replace(DEFAULT_RULE, window=40)),))
    with psycopg.connect(migrated_dsn) as conn:
        conn.execute("UPDATE testcase SET result = 'fail' WHERE run_id = %s AND "
                     "check_name = 'UcxPerftestCheck' AND params->>'test' = 'tag_bw'",
                     (runs[30],))
        checks = [c for (c,) in conn.execute(
            "SELECT DISTINCT check_name FROM testcase WHERE run_id = %s", (runs[-1],))]
        every = history.read(conn, runs[-1], checks, [0], every_night)
        newest = history.read(conn, runs[-1], checks, [0], DEFAULT_RULES)
    measured = {key: series for key, series in newest.items() if series.measured}
    assert len(measured) >= 3 and set(measured) <= set(every)
    lengths: dict[str, set[int]] = {}
    for key, series in measured.items():
        assert series.values == every[key].values[-len(series.values):], key
        failed = series.check == "UcxPerftestCheck" and '"tag_bw"' in series.params_text
        what = "tag_bw" if failed else series.check
        lengths.setdefault(what, set()).add(len(series.values))
    assert lengths.pop("tag_bw") == {35}
    assert set().union(*lengths.values()) == {33}, lengths


def test_a_step_on_every_line_is_one_finding_that_pages(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """Every key figure 5 % worse for two nights: one finding naming the shared cause,
    paged, stored, and said before the table and in the run line."""
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 20 + [0.95] * 2,
                        slower=True)
    result = perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn)
    assert result.returncode == 1, result.stdout
    block = result.stdout.split("findings (")[1].split("\n\n")[0]
    # the demo's lines all ran between node1 and node2: a cause that names both
    paged = re.findall(r"^  PAGE  (\S+(?:, \S+)*): (\d+) of \d+ line\(s\) worse "
                       r"by a median \d+\.\d%", block, re.M)
    assert len(paged) == 1 and int(paged[0][1]) >= 2, block
    assert re.search(rf"^run {runs[-1]}: FAIL \(1 finding\(s\) paged: {re.escape(paged[0][0])}",
                     result.stdout, re.M), result.stdout[-500:]
    with psycopg.connect(migrated_dsn) as conn:
        stored = conn.execute("SELECT subject, paged, lines FROM finding WHERE run_id = %s "
                              "AND paged", (runs[-1],)).fetchall()
    assert stored == [(paged[0][0], True, int(paged[0][1]))]
    # the report lists it first; JUnit has a failing test case named by the cause
    html, junit = tmp_path / "r.html", tmp_path / "junit.xml"
    last = tmp_path / f"night{len(runs) - 1:03d}.xml"  # ReFrame's JUnit beside the report
    last.write_text(demo_report.with_suffix(".xml").read_text())
    assert perfguard("report", str(runs[-1]), "-o", str(html), "--junit", str(junit), "--dsn",
                     migrated_dsn, state=tmp_path).returncode == 1  # the run failed
    page = html.read_text()
    assert page.index('id="findings"') < page.index('id="attention"')
    assert re.search(r'data-paged="true">.*?page</span>\s*' + re.escape(paged[0][0]), page,
                     re.S)
    assert re.search(r'<testcase classname="perfguard.findings" name="'
                     + re.escape(paged[0][0]) + r'"><failure type="finding"', junit.read_text())
    # acknowledged: known, being fixed; judged again (asked), shown with who and why, no
    # page (tests/system/test_ack_and_history.py: the night as judged stays FAIL)
    acked = perfguard("ack", paged[0][0], "--reason", "cable swap on Friday", "--dsn",
                      migrated_dsn)
    assert acked.returncode == 0, acked.stderr
    again = perfguard("verdict", str(runs[-1]), "--rejudge", "--dsn", migrated_dsn)
    assert again.returncode == 0, again.stdout
    assert re.search(rf"^  ack   {re.escape(paged[0][0])}: .*; acknowledged by {ME} on "
                     rf"\d{{4}}-\d\d-\d\d: cable swap on Friday$", again.stdout, re.M), again.stdout
    listed = perfguard("ack", "--list", "--dsn", migrated_dsn).stdout
    ack_id = re.search(rf"^#(\d+) local {re.escape(paged[0][0])}: by ", listed, re.M).group(1)
    perfguard("ack", "--clear", ack_id, "--dsn", migrated_dsn, check=True)
    assert perfguard("verdict", str(runs[-1]), "--rejudge", "--dsn",
                     migrated_dsn).returncode == 1


def test_a_step_with_a_fingerprint_change_that_night_pages_at_once(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """The night the kernel changed on the nodes, the lines that moved are explained by it
    and page on that first night (without a change, its lines wait for a second night)."""
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 20 + [0.9],
                        kernel_from=20, slower=True)
    result = perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn)
    assert result.returncode == 1, result.stdout
    assert re.search(r"^  PAGE  kernel \S+ → 6\.1\.0-99-amd64: \d+ of \d+ line\(s\) worse",
                     result.stdout, re.M), result.stdout


def test_an_accepted_new_level_stops_the_regression_and_says_who_accepted_it(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """A planned change costs 5 %: accepted from its first night, the lines are judged
    (asked: `--rejudge`) against the new level (the three accepted runs), the run passes,
    and each line says who accepted it and why."""
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 20 + [0.95] * 3,
                        slower=True)
    assert perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn).returncode == 1
    accepted = perfguard("accept", "*", "--from-run", str(runs[20]), "--reason",
                         "firmware 20.41 costs 5 %", "--dsn", migrated_dsn)
    assert accepted.returncode == 0, accepted.stderr
    shown = perfguard("verdict", str(runs[-1]), "--dsn", migrated_dsn)  # as judged
    assert shown.returncode == 1 and f"accepted since: *: new level from run {runs[20]}" \
        in shown.stdout, shown.stdout
    result = perfguard("verdict", str(runs[-1]), "--rejudge", "--dsn", migrated_dsn)
    assert result.returncode == 0, result.stdout
    explained = perfguard("verdict", str(runs[-1]), "--explain", BW_LINE, "--dsn",
                          migrated_dsn).stdout
    assert re.search(rf"decision: pass — new level from run {runs[20]} accepted by "
                     rf"{ME} on \d{{4}}-\d\d-\d\d: firmware 20\.41 costs 5 %; within noise",
                     explained), explained
    listed = perfguard("accept", "--list", "--dsn", migrated_dsn).stdout
    assert f"* from run {runs[20]}: by {ME} " in listed


def test_the_report_marks_a_curves_sizes_as_its_verdict_judged_them(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """Every curve 10 % slower for three nights, accepted as the new level: the report of
    the last night marks the regressed sizes while its stored verdict is the one judged
    before the accept (a report written after the accept is the same), and none once the
    run is judged again with the level, as its verdict then says (before, the marks were
    judged against the whole history: red sizes under a verdict that passed)."""
    from perfguard.present import htmlreport

    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 23,
                        curve_factors=[1.0] * 20 + [0.9] * 3, slower=True)

    def marked() -> list[str]:
        with psycopg.connect(migrated_dsn) as conn:
            report = htmlreport.build(conn, runs[-1])
        return [c.name for c in report.curves if ">regressed<" in c.svg]

    before = marked()
    assert before, "no curve marked regressed on the third slow night"
    assert perfguard("accept", "*", "--from-run", str(runs[20]), "--reason",
                     "firmware 20.41 costs 10 %", "--dsn", migrated_dsn).returncode == 0
    assert marked() == before  # the verdict as judged, before the accept
    assert perfguard("verdict", str(runs[-1]), "--rejudge", "--dsn",
                     migrated_dsn).returncode == 0
    assert marked() == []


def test_a_level_accepted_while_a_run_is_judged_is_not_in_its_report_as_judged(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """A verdict is stored with the time its judgement began, before it read the accepted
    levels: a level accepted while the judgement ran (a 100,000-line verdict runs seconds)
    was not read by it, and the report of that run does not take it as judged either
    (stored with the time of its recording, the report took such a level, and marked the
    run's curves against a level its verdict never saw)."""
    from perfguard.judge import run_findings
    from perfguard.judge import verdict as vd
    from perfguard.store import queries

    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 23,
                        curve_factors=[1.0] * 20 + [0.9] * 3, slower=True)
    with psycopg.connect(migrated_dsn, autocommit=True) as conn:
        [begins] = queries.one(conn, "judgement_begins")
        lines = vd.verdict(conn, runs[-1])  # the levels it reads: none
        assert perfguard("accept", "*", "--from-run", str(runs[20]), "--reason",
                         "accepted while the run was judged", "--dsn",
                         migrated_dsn).returncode == 0
        found, critical = run_findings.find(conn, runs[-1], lines)
        vd.record(conn, runs[-1], lines, run_findings.rows(runs[-1], found, critical),
                  judged_at=begins)
        assert vd.accepted_levels(conn, runs[-1])  # the level is there
        assert vd.levels_as_judged(conn, runs[-1]) == []  # and was not judged with
        [judged_at] = queries.one(conn, "judged_at", {"run": runs[-1]})
        assert judged_at == begins


def test_a_fault_stays_out_of_the_baseline_and_the_line_passes_when_it_is_gone(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """Bandwidth 10 % lower for twelve nights, then back. Every faulty night stays a
    regression: the fault never becomes the level it is judged against (before, once its
    nights were most of the history they were the baseline: the later faulty nights
    passed and the repaired night was an "improvement"). The repaired night passes.
    Accepted as the new level, the faulty nights are the baseline."""
    runs = store_nights(migrated_dsn, demo_report, tmp_path,
                        [1.0] * 10 + [0.9] * 12 + [1.0], slower=True)
    assert {state_of(migrated_dsn, run) for run in runs[11:22]} == {"regression"}
    assert state_of(migrated_dsn, runs[22]) == "pass"
    assert perfguard("accept", BW_LINE, "--from-run", str(runs[10]), "--reason", "the new "
                     "cable is slower", "--dsn", migrated_dsn).returncode == 0
    assert state_of(migrated_dsn, runs[21]) == "regression"  # as judged, until asked
    perfguard("verdict", str(runs[21]), "--rejudge", "--dsn", migrated_dsn)
    assert state_of(migrated_dsn, runs[21]) == "pass"  # 12 nights of the new level
