"""Seed 003 on the embedded cluster: GPCNeT's congestion tests and the allreduce over
node counts. GPCNeT's tables parsed as GPCNeT 1.3 prints them; both checks' real job
scripts through Slurm on 16 virtual nodes with the output recorded live replayed (CI
cannot build GPCNeT or OMB: tests/data/replay/SOURCES.md), through sanity, ingest and
verdict."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import psycopg
import pytest

from perfguard import cluster
from reframe_tests.gpcnet import parser
from reframe_tests.gpcnet.gpcnet import figure_name
from tests.conftest import DATA, TEST_PORT_BASE, TEST_ROOT, create_database, perfguard

REPLAY = DATA / "replay"
NETWORK_4 = REPLAY / "gpcnet_network_test_4n4t.txt"
LOAD_16 = REPLAY / "gpcnet_network_load_test_16n16t.txt"


def test_network_tests_table_is_read_row_by_row() -> None:
    result = parser.parse(NETWORK_4.read_text())
    assert (result.ranks, result.nodes) == (4, 4)
    [table] = result.tables
    assert table.title == "Isolated Network Tests" and len(table.rows) == 8
    assert table.rows["RR Two-sided Lat (8 B)"] == {"Avg": 18.3, "99%": 74.5}
    assert table.units["Multiple Alltoall (4096 B)"] == "MiB/s/rank"
    assert figure_name("", "RR Two-sided BW+Sync (131072 B)", "99%") == \
        "rr_two_sided_bw_sync_p99"


def test_the_load_test_has_its_congested_tables_and_impact_factors() -> None:
    result = parser.parse(LOAD_16.read_text())
    assert (result.ranks, result.nodes) == (16, 16)
    impact = result.table("Network Tests running with Congestion Tests - Key Results")
    assert impact is not None and set(impact.units.values()) == {"X"}
    assert all(v > 0 for row in impact.rows.values() for v in row.values())


@pytest.mark.parametrize("text, message", [
    ("", "no 'Test with N MPI ranks (M nodes)' line"),
    ("Network Tests v1.3\n  Test with 4 MPI ranks (4 nodes)\n", "no result table"),
    ("  Test with 4 MPI ranks (4 nodes)\n| Isolated Network Tests |\n| Name | Avg | 99% | "
     "Units |\n| RR Get Lat (8 B) | nan? | 1.0 | usec |\n", "row 'RR Get Lat (8 B)'"),
])
def test_what_is_not_gpcnets_output_is_named(text: str, message: str) -> None:
    with pytest.raises(parser.ParseError, match=re.escape(message)):
        parser.parse(text)


@pytest.fixture(scope="module")
def sixteen_nodes():
    """A 16-node embedded cluster of its own (network_load_test needs 10 nodes or more;
    the session's test cluster has 4)."""
    state = TEST_ROOT / "gpcnet16"
    running = cluster.up(state, nodes=16, port_base=TEST_PORT_BASE + 1100)
    yield state, running
    cluster.down(state)
    shutil.rmtree(state, ignore_errors=True)


def run_replayed(state: Path, dsn: str, name: str, *setvars: str) -> tuple:
    result = perfguard("run", "--dsn", dsn, "-n", name, *(f"-S{s}" for s in setvars),
                       state=state, env={"PERFGUARD_REPLAY": str(REPLAY)})
    report = Path(re.search(r"\(report (\S+)\)", result.stdout).group(1))
    return result, json.loads(report.read_text())["runs"][0]["testcases"]


def test_gpcnet_replayed_through_slurm_is_stored_and_judged(sixteen_nodes) -> None:
    """Both programs at the partition's 16 nodes, one rank each: GPCNeT's own scale line
    proves it ran there; every row becomes a key figure with its direction; the impact
    factors are stored; the run passes (nothing to compare with yet, said so). The
    embedded nodes share the host's cores: the load test is skipped saying so unless the
    site asks for it anyway (as here, to replay the live recording)."""
    state, running = sixteen_nodes
    _, dsn = create_database(running)
    perfguard("db", "upgrade", "--dsn", dsn, state=state, check=True)
    result, cases = run_replayed(state, dsn, "^GpcnetCheck%program=network_load_test")
    assert [c["result"] for c in cases if c["name"].startswith("GpcnetCheck")] == ["skip"]
    assert "share one host's CPUs: the congestors would compete for CPU" in result.stdout
    result, cases = run_replayed(state, dsn, "^GpcnetCheck",
                                 "GpcnetCheck.load_test_on_shared_cores=true")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert sorted(c["result"] for c in cases if c["name"].startswith("GpcnetCheck")) == \
        ["pass", "pass"]
    assert re.search(r"impact_rr_two_sided_lat_avg\s+[\d.]+\s+X\s", result.stdout)
    assert re.search(r"congested_rr_two_sided_bw_sync_avg\s+[\d.,]+\s+MiB/s/rank", result.stdout)
    with psycopg.connect(dsn) as conn:
        better = dict(conn.execute("SELECT metric, better FROM metric_direction WHERE "
                                   "check_name = 'GpcnetCheck'").fetchall())
        nodes = conn.execute("SELECT max(array_length(t.nodelist, 1)) FROM testcase t "
                             "WHERE t.check_name = 'GpcnetCheck'").fetchone()[0]
    assert better["rr_two_sided_lat_avg"] == "lower"
    assert better["rr_two_sided_bw_p99"] == "higher"
    assert better["impact_rr_two_sided_lat_avg"] == "lower"
    assert nodes == 16
    # one core per rank, each virtual node on its own share of the host's cores (as every
    # check there): --cpu-bind=cores had bound all 16 ranks to CPU 0 (mask 0x1)
    [case] = [c for c in cases if "network_test" in c["display_name"]]
    script = (Path(case["outputdir"]) / "rfm_job.sh").read_text()
    assert "pin_per_node.sh" in script and "--cpu-bind=none" in script, script
    err = (Path(case["outputdir"]) / "rfm_job.err").read_text()
    masks = re.findall(r"cpu-bind=\S+ - \S+, task +\d+ +\d+ \[\d+\]: mask (0x[0-9a-f]+) set",
                       err)
    assert len(masks) == 16 and len(set(masks)) == min(16, os.cpu_count() or 1), err[-3000:]


def test_allreduce_over_node_counts_is_one_line_per_count(sixteen_nodes) -> None:
    """2, 4, 8 and 16 nodes, each its own line with its curve over seed 003's sizes
    (8 B–2 KiB); 32 nodes and more skipped, saying the partition has 16; the report's
    chart of latency over node counts."""
    state, running = sixteen_nodes
    _, dsn = create_database(running)
    perfguard("db", "upgrade", "--dsn", dsn, state=state, check=True)
    result, cases = run_replayed(state, dsn, "^OsuAllreduceScalingCheck")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    ran = sorted(int(re.search(r"%nodes=(\d+)", c["display_name"]).group(1))
                 for c in cases if c["result"] == "pass" and "Scaling" in c["display_name"])
    assert ran == [2, 4, 8, 16]
    assert "32 nodes: the partition has 16 (topology nodes)" in result.stdout
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT (tc.params->>'nodes')::int, count(*), min(pt.coords->>'size') FROM "
            "testcase tc JOIN sample s ON s.testcase_id = tc.id JOIN point pt ON "
            "pt.id = s.point_id JOIN metric m ON m.id = s.metric_id WHERE tc.check_name = "
            "'OsuAllreduceScalingCheck' AND m.name = 'latency' AND s.point_id <> 0 "
            "GROUP BY 1 ORDER BY 1").fetchall()
    assert [(n, points) for n, points, _ in rows] == [(2, 9), (4, 9), (8, 9), (16, 9)]
    # the report draws the seed's chart: software collectives over the node counts (the
    # SHARP curve only where a partition has it: none here, `sharp=on` is not selected)
    run_id = re.search(r"^run (\d+): ", result.stdout, re.M).group(1)
    page = state / "allreduce.html"
    perfguard("report", run_id, "-o", str(page), "--dsn", dsn, state=state, check=True)
    html = page.read_text()
    assert '<section id="allreduce">' in html
    assert 'data-plot="allreduce" data-series="1"' in html


def test_a_fabric_congested_from_day_one_fails_on_night_one(sixteen_nodes) -> None:
    """No history, no threshold: the impact factors meet the check's own bound. With the
    average bound at 1.5X the recording's 1.8X (RR two-sided latency) is a failure the
    first night, naming the figure; the 1.5X of the allreduce is within it."""
    state, running = sixteen_nodes
    _, dsn = create_database(running)
    perfguard("db", "upgrade", "--dsn", dsn, state=state, check=True)
    result, cases = run_replayed(state, dsn, "^GpcnetCheck%program=network_load_test",
                                 "GpcnetCheck.load_test_on_shared_cores=true",
                                 "GpcnetCheck.impact_limits=avg:1.5,p99:10")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    [case] = [c for c in cases if c["name"].startswith("GpcnetCheck")]
    assert case["result"] == "fail" and case["fail_phase"] == "performance", case
    assert "impact_rr_two_sided_lat_avg" in case["fail_reason"]
    assert "impact_multiple_allreduce_avg" not in case["fail_reason"]
