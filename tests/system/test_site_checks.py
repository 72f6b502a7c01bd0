"""A site's own checks: the example of docs/writing-checks.md, as written there, runs on
the embedded cluster from a site directory's `checks/` and is stored and judged like the
shipped checks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg

from perfguard import paths
from perfguard.run.reframe import RunRequest, check_directories
from tests.conftest import TEST_STATE, perfguard

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "writing-checks.md"


def guide_files(site: Path, section: str = "A complete example") -> list[Path]:
    """The code blocks of the guide's ``section`` (the heading's start), each written where
    its first line says (SITE/...)."""
    written = []
    text = GUIDE.read_text().split(f"\n## {section}", 1)[1].split("\n## ", 1)[0]
    for block in re.findall(r"```(?:python|c)\n(.*?)```", text, re.S):
        where = re.match(r"(?:#|/\*) SITE/(\S+?)(?::| |$)", block.splitlines()[0])
        assert where, block.splitlines()[0]
        target = site / where.group(1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block)
        written.append(target)
    return written


def test_the_guides_check_is_short_and_complete(tmp_path: Path) -> None:
    check, source = guide_files(tmp_path)
    assert check.name == "triad.py" and source.name == "triad.c"
    assert len(check.read_text().splitlines()) <= 40
    assert "MeasuredCheck" in check.read_text() and "perfguard_better" in check.read_text()


def test_the_site_directorys_checks_are_searched_and_a_missing_directory_is_named(
        tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "checks").mkdir(parents=True)
    assert check_directories(RunRequest(), site) == [paths.TESTS_DIR, site / "checks"]
    assert check_directories(RunRequest(), tmp_path) == [paths.TESTS_DIR]
    result = perfguard("run", "--checks", str(tmp_path / "absent"), "-n", "X",
                       state=TEST_STATE)
    assert result.returncode == 2
    assert f"--checks {tmp_path / 'absent'}: no such directory" in result.stderr


def test_a_site_check_runs_and_is_stored_and_judged_like_a_shipped_one(
        layout, migrated_dsn: str, tmp_path: Path) -> None:
    """The guide's triad, from a directory given with --checks: built, launched by srun on
    a node it owns, its figure stored with its direction and judged (not yet: no history),
    the node's fingerprint beside it."""
    guide_files(tmp_path / "site")
    result = perfguard("run", "--checks", str(tmp_path / "site" / "checks"), "-n",
                       "SiteTriadCheck", "--dsn", migrated_dsn, state=TEST_STATE)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    [line] = [line for line in result.stdout.splitlines() if line.strip().startswith("triad")]
    assert re.match(r"\s*triad\s+[\d,.]+\s+MB/s\s", line), line
    assert "inconclusive: not yet judged: history 0 of 8 runs" in line
    with psycopg.connect(migrated_dsn) as conn:
        [value] = conn.execute(
            "SELECT s.value FROM sample s JOIN testcase t ON t.id = s.testcase_id JOIN metric "
            "m ON m.id = s.metric_id WHERE t.check_name = 'SiteTriadCheck' AND m.name = "
            "'triad' AND m.unit = 'MB/s'").fetchone()
        [better] = conn.execute("SELECT better FROM metric_direction WHERE check_name = "
                                "'SiteTriadCheck' AND metric = 'triad'").fetchone()
        nodes = conn.execute("SELECT count(*) FROM fingerprint f JOIN testcase t ON "
                             "t.run_id = f.run_id WHERE t.check_name = 'SiteTriadCheck'"
                             ).fetchone()[0]
    assert value > 100 and better == "higher" and nodes >= 1



def test_a_site_checks_own_reference_judges_unless_the_database_has_one(
        layout, migrated_dsn: str, tmp_path: Path) -> None:
    """The guide's triad with a reference of its own that no node reaches (10^9 MB/s):
    the run fails on it (it ran OK with a log line "no reference"). A threshold in the
    database then replaces the check's reference, said once, and the run passes; without
    perfguard_better, the threshold's lower bound says higher is better."""
    check, _ = guide_files(tmp_path / "site")
    better = '    perfguard_better = {"triad": "higher"}\n'
    own = '    reference = {"*": {"triad": (1e9, -0.1, None, "MB/s")}}\n'
    assert better in check.read_text()
    check.write_text(check.read_text().replace(better, better + own))
    run = ["run", "--checks", str(tmp_path / "site" / "checks"), "-n", "SiteTriadCheck",
           "--dsn", migrated_dsn]
    missed = perfguard(*run, state=TEST_STATE)
    assert missed.returncode == 1, missed.stdout[-3000:] + missed.stderr[-2000:]
    [line] = [line for line in missed.stdout.splitlines() if line.strip().startswith("triad")]
    assert re.search(r"\sfail\b", line), line

    check.write_text(check.read_text().replace(better, ""))
    with psycopg.connect(migrated_dsn) as conn:
        conn.execute("DELETE FROM metric_direction WHERE check_name = 'SiteTriadCheck'")
    perfguard("thresholds", "set", "--dsn", migrated_dsn, "--system", "local", "--check",
              "SiteTriadCheck", "--metric", "triad", "--reference", "1", "--lower=-10%",
              "--direction", "higher", check=True)
    passed = perfguard(*run, state=TEST_STATE)
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-2000:]
    said = "the database's threshold replaces its own reference"
    assert (passed.stdout + passed.stderr).count(said) == 1, passed.stdout[-3000:]
    with psycopg.connect(migrated_dsn) as conn:
        [direction] = conn.execute("SELECT better FROM metric_direction WHERE check_name = "
                                   "'SiteTriadCheck' AND metric = 'triad'").fetchone()
    assert direction == "higher"


def test_site_check_refuses_a_thresholds_file_naming_a_check_that_does_not_exist(
        tmp_path: Path) -> None:
    """A misspelt check never matches a test case: its threshold would judge nothing and
    `site check` passed it. Now each such entry is a problem naming file, entry and the
    check meant; a site's own check (SITE/checks/) is known."""
    site = tmp_path / "site"
    guide_files(site)  # SiteTriadCheck, the site's own
    (site / "thresholds").mkdir(parents=True)
    (site / "thresholds" / "mine.yaml").write_text(
        "system: local\nthresholds:\n"
        "- {check: OsuPt2PtChek, metric: latency, reference: 2.0, upper: 0.1,"
        " direction: lower}\n"
        "- {check: SiteTriadCheck, metric: triad_bandwidth, reference: 9000, lower: -0.1,"
        " direction: higher}\n")
    checked = perfguard("--site", str(site), "site", "check", state=tmp_path / "state")
    assert checked.returncode != 0, checked.stdout
    problems = [line for line in checked.stdout.splitlines() if line.startswith("problem:")]
    assert problems == [f"problem: {site / 'thresholds' / 'mine.yaml'}: thresholds[0]: check "
                        f"'OsuPt2PtChek' is no check of the library or of the site's checks/ "
                        f"(did you mean OsuPt2PtCheck?)"], checked.stdout


def test_the_guides_server_client_check_runs_as_written(
        layout, migrated_dsn: str, tmp_path: Path) -> None:
    """The guide's server/client example and its run line, as written there: the server
    step on the job's first node, the client on its last, the round trip stored. A site's
    first try failed twice (the binary SingleSource built was named after the test; the
    composed steps replaced `self.executable`)."""
    site = tmp_path / "site"
    check, source = guide_files(site, section="A server and a client")
    assert (check.name, source.name) == ("pingpong.py", "pingpong.c")
    section = GUIDE.read_text().split("\n## A server and a client", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-xc", block], capture_output=True, text=True,
        timeout=900, env={**os.environ, "PERFGUARD_SITE": str(site),
                          "PERFGUARD_STATE_DIR": str(TEST_STATE), "PERFGUARD_DSN": migrated_dsn,
                          "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    [line] = [line for line in done.stdout.splitlines()
              if line.strip().startswith("round_trip")]
    assert re.match(r"\s*round_trip\s+[\d,.]+\s+us\s", line), line
    with psycopg.connect(migrated_dsn) as conn:
        [better] = conn.execute("SELECT better FROM metric_direction WHERE check_name = "
                                "'SitePingPongCheck' AND metric = 'round_trip'").fetchone()
    assert better == "lower"
