"""Runs that tell the truth: overlapping runs, the database ReFrame reads, one nightly at
a time, a filter that selects nothing, shapes that cannot fit the nodes given.

Real Slurm and PostgreSQL of the test cluster; real `perfguard` command lines.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import psycopg

from perfguard.workflows import nightly as workflows
from tests.conftest import DATA, TEST_STATE, perfguard, perfguard_command

UCX_LAT = "^UcxPerftestCheck%hca=lo%test=tag_lat%memory=host"


def report_of(stdout: str) -> dict:
    path = Path(re.search(r"\(report (\S+)\)", stdout).group(1))
    return json.loads(path.read_text())["runs"][0]["testcases"]


def test_two_runs_started_together_both_store_right_verdicts(migrated_dsn: str) -> None:
    """Each run has its own ReFrame stage and output directories."""
    command = perfguard_command("run", "-n", "MpiHelloCheck", "--dsn", migrated_dsn,
                                state=TEST_STATE)
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=600) for run in runs]
    for run, (out, err) in zip(runs, outputs):
        assert run.returncode == 0, out + err
        assert "1 passed without a figure (MpiHelloCheck)" in out, out  # a sanity check
    stages = {case["stagedir"] for out, _ in outputs for case in report_of(out)
              if case["name"].startswith("MpiHelloCheck")}
    assert len(stages) == 2, stages
    with psycopg.connect(migrated_dsn) as conn:
        states = conn.execute("SELECT o.failed, count(*) FROM run_outcome o "
                              "JOIN judged_testcase tc ON tc.run_id = o.run_id "
                              "WHERE tc.check_name = 'MpiHelloCheck' AND tc.state = 'pass' "
                              "GROUP BY 1").fetchall()
    assert states == [(False, 2)]


def test_dsn_is_the_database_reframe_reads_references_from(migrated_dsn: str) -> None:
    """A threshold that only --dsn's database holds fails the test case in ReFrame's own
    performance stage (the default database has no such threshold)."""
    perfguard("thresholds", "set", "--dsn", migrated_dsn, "--system", "local", "--check",
              "UcxPerftestCheck", "--param", "test=tag_lat", "--param", "memory=host",
              "--metric", "latency", "--reference", "0.000001", "--upper", "0.000001",
              "--unit", "us", "--direction", "lower", check=True)
    result = perfguard("run", "--dsn", migrated_dsn, "-n", UCX_LAT,
                       "-S", "UcxPerftestCheck.iterations=2000", state=TEST_STATE)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "no references" not in result.stdout + result.stderr
    [case] = [c for c in report_of(result.stdout) if c["name"].startswith("UcxPerftestCheck")]
    assert case["fail_phase"] == "performance", case["fail_reason"]


def test_a_second_nightly_is_refused_naming_the_first() -> None:
    with workflows.nightly_lock(TEST_STATE, "local"):
        second = perfguard("nightly", state=TEST_STATE)
    assert second.returncode == 75, second.stdout + second.stderr
    assert re.search(r"another nightly is running \(pid \d+ on \S+, system local",
                     second.stderr), second.stderr
    assert "did not start" in second.stderr


def test_a_filter_that_selects_nothing_says_so() -> None:
    result = perfguard("run", "-n", "NoSuchCheck", "--no-ingest", state=TEST_STATE)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no check selected on system local -n NoSuchCheck" in result.stderr


def test_shapes_that_cannot_fit_the_nodes_given_are_skipped_before_submission(
        migrated_dsn: str) -> None:
    """What `upgrade-check --nodes node[3-4]` sets: a 4-node collective is skipped with the
    reason, never sent to sbatch to fail there."""
    result = perfguard("run", "--dsn", migrated_dsn, "-n",
                       "^OsuCollectiveCheck%hca=lo%benchmark=osu_barrier",
                       "-S", "nodes_available=2", state=TEST_STATE,
                       env={"PERFGUARD_REPLAY": str(DATA / "replay")})
    assert result.returncode == 3, result.stdout + result.stderr  # its one check skipped
    assert "NOTHING-MEASURED" in result.stdout.splitlines()[-1]
    [case] = [c for c in report_of(result.stdout)
              if c["name"].startswith("OsuCollectiveCheck")]
    assert case["result"] == "skip"
    assert case.get("jobid") in (None, "")  # never submitted
    assert "needs 4 nodes, this run may use 2" in result.stdout


def test_a_program_the_node_lacks_is_a_skip_that_names_the_node(migrated_dsn: str) -> None:
    """Programs of provider 'system' are looked up on the compute node, in the job (a login
    node may lack what the nodes have, or have what they lack): one the node lacks skips
    the test after its job ran, and the stored verdict names the program and the node."""
    result = perfguard("run", "--dsn", migrated_dsn, "-n", UCX_LAT,
                       "-S", "UcxPerftestCheck.programs_on_node_path=perfguard-no-such-program",
                       "-S", "UcxPerftestCheck.iterations=2000", state=TEST_STATE)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-2000:]  # nothing
    [case] = [c for c in report_of(result.stdout) if c["name"].startswith("UcxPerftestCheck")]
    assert case["result"] == "skip" and case["jobid"], case  # skipped after its job
    assert re.search(r"^\[\d\] perfguard-no-such-program is not on PATH on node\d",
                     result.stdout, re.M), result.stdout[-2000:]  # said once, under the table
    counted = result.stdout.splitlines()[-2]  # the counts, then "run N: …"
    assert "1 skipped" in counted
    # nothing measured: no "pass" (the SpackStack fixture ran, measuring nothing)
    assert not re.search(r"\d+ pass\b", counted), counted


def test_a_site_floor_makes_a_run_that_measured_too_little_nothing_measured(
        migrated_dsn: str) -> None:
    """`run: {min_measured_share: 0.75}` in the site's verdict rules: one check measured and
    one skipped (a shape that cannot fit) is nothing-measured, exit 3, saying so."""
    site = TEST_STATE / "shared" / "floor-site"
    site.mkdir(parents=True, exist_ok=True)
    shipped = (Path(__file__).parents[2] / "site_config" / "verdict_rules.yaml").read_text()
    assert "min_measured_share: 0\n" in shipped
    (site / "verdict_rules.yaml").write_text(
        shipped.replace("min_measured_share: 0\n", "min_measured_share: 0.75\n"))
    result = perfguard("--site", str(site), "run", "--dsn", migrated_dsn, "-n", UCX_LAT,
                       "-n", "^OsuCollectiveCheck%hca=lo%benchmark=osu_barrier",
                       "-S", "nodes_available=2", "-S", "UcxPerftestCheck.iterations=2000",
                       state=TEST_STATE,
                       env={"PERFGUARD_REPLAY": str(DATA / "replay")})
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-2000:]
    assert result.stdout.splitlines()[-1].endswith(
        "NOTHING-MEASURED (1 test case(s) measured, 1 skipped: nothing was measured that "
        "could pass)"), result.stdout[-1000:]
