"""A site's first week: no run that hangs, no run that passes without measuring, no
report stored for a run that never ran, a schema that is behind found before anything
runs (issue 38).

Real Slurm and PostgreSQL of the test cluster; real `perfguard` command lines.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import psycopg

from perfguard.store import db, spool
from tests.conftest import DATA, TEST_STATE, counts, perfguard

#: The benchmark programs come from the nodes' PATH only (Debian has no OMB package).
SYSTEM_ONLY = {"PERFGUARD_PREFIX": "", "PERFGUARD_REPLAY": "", "PERFGUARD_SPACK_ENV": ""}


def test_programs_missing_on_every_node_skip_every_check_and_the_run_measured_nothing(
        migrated_dsn: str) -> None:
    """Every OMB check skips after its job found the program missing; none keeps its
    partition's job slot (the embedded max_jobs is 4, OMB has 12 such variants: before the fix
    the fifth was never submitted and reframe spun until killed). The reason is said
    once, and the run is nothing-measured, exit 3, not PASS."""
    started = time.monotonic()
    result = perfguard("run", "-t", "omb", "--dsn", migrated_dsn, state=TEST_STATE,
                       env={**os.environ, **SYSTEM_ONLY})
    took = time.monotonic() - started
    out = result.stdout.split("perfguard verdict for run")[-1]  # after ReFrame's own
    assert result.returncode == 3, result.stdout + result.stderr
    assert took < 300, took
    # 12 variants find no program; the allreduce series' 8 to 128 nodes do not fit 4 nodes
    assert re.search(r"^run \d+: NOTHING-MEASURED \(0 test case\(s\) measured, 17 skipped",
                     out, re.M), out
    assert out.count("is not on PATH on node") == 1, out
    note = re.search(r"^\[(\d)\] (.+?) is not on PATH on node\d", out, re.M)
    assert note and {"osu_latency", "osu_bw", "osu_allreduce"} <= set(
        re.split(r",\s+", note.group(2))), out
    assert len(re.findall(rf"^  -  .*skipped \[{note.group(1)}\]$", out, re.M)) == 12, out
    assert "128, 16, 32, 64, 8 nodes: the partition has 4 (topology nodes)" in out
    assert re.search(r"^OsuPt2PtCheck %benchmark=osu_bw .*\(compute/gnu-openmpi on node", out,
                     re.M), out  # the table names each variant's nodes
    with psycopg.connect(migrated_dsn) as conn:
        outcome = conn.execute("SELECT outcome, failed, measured FROM run_outcome").fetchall()
    assert outcome == [("nothing-measured", False, 0)]


def test_a_dry_run_report_is_refused_by_ingest(migrated_dsn: str) -> None:
    dry = perfguard("run", "-n", "MpiHelloCheck", "--dry-run", state=TEST_STATE, check=True)
    report = Path(re.search(r"^report: (\S+)$", dry.stdout, re.M).group(1))
    before = counts(migrated_dsn)
    result = perfguard("ingest", str(report), "--dsn", migrated_dsn, state=TEST_STATE)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "a --dry-run report (ReFrame generated job scripts; no test ran" in result.stderr
    assert "Traceback" not in result.stderr
    assert counts(migrated_dsn) == before


def test_a_run_that_makes_no_progress_is_stopped_and_what_it_has_is_stored(
        migrated_dsn: str) -> None:
    """A local job that writes nothing for longer than $PERFGUARD_STALL_MINUTES: the
    watchdog ends reframe, the report is stored, and the run fails saying why."""
    started = time.monotonic()
    result = perfguard("run", "-n", "StallingCheck", "--dsn", migrated_dsn, "--",
                       "-c", str(DATA / "stalling_checks"), state=TEST_STATE,
                       env={**os.environ, "PERFGUARD_STALL_MINUTES": "0.3"})
    took = time.monotonic() - started
    assert took < 200, took
    assert result.returncode == 1, result.stdout + result.stderr
    assert "reframe made no progress for 0.3 min" in result.stderr, result.stderr
    assert re.search(r"^run \d+: FAIL", result.stdout, re.M), result.stdout
    with psycopg.connect(migrated_dsn) as conn:
        states = conn.execute("SELECT check_name, state FROM judged_testcase").fetchall()
    assert states == [("StallingCheck", "test-failed")]


def test_a_schema_that_is_behind_is_found_before_reframe_starts(fresh_dsn: str) -> None:
    result = perfguard("run", "-n", "MpiHelloCheck", "--dsn", fresh_dsn, state=TEST_STATE)
    assert result.returncode == 2, result.stdout + result.stderr
    pending = len(db.migrations() + db.repeatables())
    assert f"database schema is behind ({pending} change(s) pending, from 0024 baseline)" \
        in result.stderr
    assert "perfguard db upgrade --dsn OWNER_DSN" in result.stderr
    assert "nothing was run" in result.stderr
    assert "[ RUN" not in result.stdout and "Traceback" not in result.stderr


def test_a_report_that_meets_a_schema_behind_is_spooled(fresh_dsn: str, tmp_path: Path
                                                         ) -> None:
    kept = perfguard("run", "-n", "MpiHelloCheck", "--no-ingest", "--dsn", fresh_dsn,
                     state=TEST_STATE, check=True)
    report = Path(re.search(r"^report: (\S+)$", kept.stdout, re.M).group(1))
    state = tmp_path / "state"
    result = perfguard("ingest", str(report), "--dsn", fresh_dsn, state=state)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "spooled as" in result.stderr and "schema is behind" in result.stderr
    [spooled] = spool.spooled(state)
    assert spooled.read_bytes() == report.read_bytes()


def site_with(tmp_path: Path, edit) -> Path:  # noqa: ANN001 - the text edit
    """A site directory whose one system is the test cluster's topology, edited."""
    import json

    record = json.loads((TEST_STATE / "cluster.json").read_text())
    text = Path(record["topology_file"]).read_text().replace("system: local", "system: mine")
    site = tmp_path / "site"
    (site / "systems").mkdir(parents=True)
    (site / "systems" / "mine.yaml").write_text(edit(text))
    return site


def test_a_wrong_site_file_is_one_error_before_anything_is_submitted(
        layout, migrated_dsn: str, tmp_path: Path) -> None:
    """A misspelled key, CPUs the nodes lack, a partition Slurm lacks and a bad CPU list:
    each named with file, place and fix by `site check` and by `run`, which submits no
    job (no ReFrame traceback, not one failed job per check)."""
    cases = [
        (lambda t: t.replace("measurement_options:", "measurment_options:"),
         "partitions[0].measurment_options: unknown key (did you mean "
         "'measurement_options'?)"),
        (lambda t: t.replace("      - 1\n", "      - 7\n", 1),
         "node.numa names CPUs 7, but Slurm's nodes of partition compute have 2 CPUs"),
        (lambda t: t.replace("--partition=compute", "--partition=gpu"),
         "access names Slurm partition gpu, which Slurm does not have (it has compute, "
         "service)"),
        (lambda t: t.replace("      cpus:\n      - 1\n", "      cpus: 0-1x\n"),
         "partitions[0] (compute).node.numa[1].cpus: bad CPU list '0-1x'"),
    ]
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    for edit, message in cases:
        site = site_with(tmp_path / str(len(message)), edit)
        checked = perfguard("--site", str(site), "site", "check", "--system", "mine",
                            state=TEST_STATE)
        assert checked.returncode == 2 and message in checked.stdout, checked.stdout
        assert str(site / "systems" / "mine.yaml") in checked.stdout
        run = perfguard("--site", str(site), "run", "--system", "mine", "-n", "MpiHelloCheck",
                        "--dsn", migrated_dsn, state=TEST_STATE)
        assert run.returncode == 2 and message in run.stderr, run.stdout + run.stderr
        assert "nothing was run" in run.stderr and "Traceback" not in run.stderr + run.stdout
    assert not [name for name in slurm_jobs(layout, started)
                if name.startswith("rfm_MpiHelloCheck")]  # nothing was submitted
    right = site_with(tmp_path / "right", lambda t: t)
    checked = perfguard("--site", str(right), "site", "check", "--system", "mine",
                        state=TEST_STATE)
    assert checked.returncode == 0 and "system mine fits Slurm's partitions" in checked.stdout


def slurm_jobs(layout, since: str) -> list[str]:  # noqa: ANN001 - the cluster layout
    """The names of the jobs Slurm started or queued since ``since``."""
    import subprocess

    return subprocess.run(["sacct", "-n", "-X", "-a", "-S", since, "-o", "JobName%80"],
                          env=layout.client_env(), capture_output=True, text=True,
                          check=True).stdout.split()


def test_a_site_directory_that_is_not_there_is_an_error() -> None:
    missing = perfguard("site", "show", env={"PERFGUARD_SITE": "/nonexistent/site"})
    assert missing.returncode == 2
    assert "PERFGUARD_SITE=/nonexistent/site: no such directory" in missing.stderr


def test_first_setup_mistakes_say_what_to_fix(layout, migrated_dsn: str) -> None:
    """The writer's DSN given to `db upgrade`, a passfile that is not there, a database
    name that is wrong: each names the fix, none is an internal error."""
    from urllib.parse import urlsplit

    where = urlsplit(migrated_dsn)
    granted = perfguard("db", "grant", "firstweek_writer", "--kind", "writer", "--dsn",
                        migrated_dsn, env={"PERFGUARD_GRANT_PASSWORD": "w-secret"})
    assert granted.returncode == 0, granted.stderr
    writer = f"postgresql://firstweek_writer:w-secret@{where.netloc.split('@')[1]}{where.path}"
    upgrade = perfguard("db", "upgrade", "--dsn", writer)
    assert upgrade.returncode == 2, upgrade.stderr
    assert "db upgrade needs the owner role of the schema; role firstweek_writer may not " \
           "change it" in upgrade.stderr and "w-secret" not in upgrade.stderr
    no_passfile = migrated_dsn.split("?")[0] + "?passfile=/nonexistent/pgpass"
    missing = perfguard("db", "upgrade", "--dsn", no_passfile)
    assert "the passfile /nonexistent/pgpass does not exist or cannot be read" in missing.stderr
    wrong_db = migrated_dsn.replace(where.path, "/no_such_db")
    unknown = perfguard("db", "upgrade", "--dsn", wrong_db)
    assert 'database "no_such_db" does not exist (check the database name' in unknown.stderr
    for result in (missing, unknown):
        assert result.returncode == 1 and "internal error" not in result.stderr


def test_a_passfile_libpq_ignores_or_a_wrong_password_in_it_says_so(
        layout, migrated_dsn: str, tmp_path: Path) -> None:
    """A passfile of mode 0644 is ignored by libpq ("group or world access"): the error says
    so and how to fix it, not that the file lacks the line; a wrong password names the
    passfile and line it came from."""
    secret = layout.state / "secrets" / "pgpass"
    loose = tmp_path / "pgpass-loose"
    loose.write_text(secret.read_text())
    loose.chmod(0o644)
    base = migrated_dsn.split("?")[0]
    ignored = perfguard("db", "upgrade", "--dsn", f"{base}?passfile={loose}")
    assert ignored.returncode == 1, ignored.stderr
    assert f"the passfile {loose} has permissions 0644: libpq ignores it; chmod 600 {loose}" \
        in ignored.stderr, ignored.stderr
    assert "has no line" not in ignored.stderr
    wrong = tmp_path / "pgpass-wrong"
    wrong.write_text("# the DBA's\n127.0.0.1:*:*:perfguard:not-the-password\n")
    wrong.chmod(0o600)
    refused = perfguard("db", "upgrade", "--dsn", f"{base}?passfile={wrong}")
    assert refused.returncode == 1, refused.stderr
    assert "password authentication failed" in refused.stderr
    assert f"the password came from the passfile {wrong}, line 2" in refused.stderr, \
        refused.stderr
    assert "not-the-password" not in refused.stderr


def test_an_unknown_partition_is_refused_before_reframe_listing_the_partitions(
        migrated_dsn: str) -> None:
    """`--system local:nosuch` reached ReFrame (its error, exit 1): now exit 2 before
    ReFrame starts, naming the system's partitions, for a dry run and a run alike."""
    for dry in (["--dry-run"], []):
        result = perfguard("run", "--system", "local:nosuchpartition", "-n", "MpiHelloCheck",
                           "--dsn", migrated_dsn, *dry, state=TEST_STATE)
        assert result.returncode == 2, result.stdout[-2000:] + result.stderr
        assert "--system local:nosuchpartition: system local has no partition " \
               "'nosuchpartition' (it has compute" in result.stderr, result.stderr
        assert "reframe" not in (result.stdout + result.stderr).lower().replace(
            "perfguard", ""), result.stdout[-2000:]


def test_no_colour_codes_off_a_terminal_nor_under_no_color(layout) -> None:
    """ReFrame colours its output; written into a pipe (a log, mail, CI) or with NO_COLOR
    set at a terminal, there are no escape codes."""
    import pty
    import subprocess
    import sys

    piped = perfguard("run", "--dry-run", "-n", "MpiHelloCheck", state=TEST_STATE)
    assert piped.returncode == 0, piped.stderr
    assert "MpiHelloCheck" in piped.stdout and "\x1b[" not in piped.stdout + piped.stderr
    primary, secondary = pty.openpty()
    at_terminal = subprocess.run(
        [sys.executable, "-m", "perfguard.cli", "--state-dir", str(TEST_STATE), "run",
         "--dry-run", "-n", "MpiHelloCheck"], stdout=secondary, stderr=secondary,
        env={**os.environ, "NO_COLOR": "1"}, timeout=600)
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert at_terminal.returncode == 0 and b"MpiHelloCheck" in shown, shown[-2000:]
    assert b"\x1b[" not in shown, shown[-2000:]


def test_a_reader_that_stops_reading_is_no_error() -> None:
    """`perfguard site show | head -1`: the pipe closes early; exit 141, nothing said."""
    import subprocess
    import sys

    shown = subprocess.Popen([sys.executable, "-m", "perfguard.cli", "site", "show"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    shown.stdout.close()
    assert shown.wait(timeout=60) == 141
    assert shown.stderr.read() == b""


def test_a_himeno_size_the_nodes_cannot_hold_is_skipped_saying_so(layout) -> None:
    """The embedded nodes declare 2048 MiB (RealMemory and node.memory_mib): XL (14.4 GiB
    on one node) is skipped before it is submitted; L (1.8 GiB) is not."""
    dry = perfguard("run", "-t", "himeno", "--dry-run", state=TEST_STATE)
    assert dry.returncode == 0, dry.stdout[-2000:] + dry.stderr
    assert "size XL needs 14407 MiB per node on 1 node(s), the partition's nodes have 2048 " \
           "MiB (node.memory_mib)" in dry.stdout, dry.stdout[-3000:]
    shown = re.sub(r"\x1b\[[0-9;]*m", "", dry.stdout)  # ReFrame's colours
    assert re.search(r"DRY\s*\] HimenoCheck %size=L %nodes=1 %ranks_step=1 ", shown)
    assert not re.search(r"SKIP.*%size=L %nodes=1 %ranks_step=1 ", shown)
    # every skipped variant says why: those that depend on a skipped one name it
    from perfguard.store.report import load

    report = load(Path(re.search(r"^report: (\S+)$", dry.stdout, re.M).group(1)))
    skipped = {" ".join(f"%{k}={v}" for k, v in sorted(c.params.items())): c.fail_reason
               for c in report.testcases if c.result == "skip"}
    assert skipped and all(skipped.values()), skipped
    assert skipped["%nodes=2 %ranks_step=1 %size=XL"] == (
        "its dependency HimenoCheck %nodes=1 %ranks_step=1 %size=XL was skipped: size XL "
        "needs 14407 MiB per node on 1 node(s), the partition's nodes have 2048 MiB "
        "(node.memory_mib)")


def test_checks_lists_what_a_system_would_run_and_why_the_rest_is_skipped(layout) -> None:
    """`perfguard checks` (a dry run, nothing submitted): one line per variant, "runs" or
    "skipped: why"; ReFrame's own `--list` through `perfguard run -- --list`."""
    listed = perfguard("checks", "-t", "himeno", state=TEST_STATE)
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    lines = listed.stdout.splitlines()
    assert re.search(r"^HimenoCheck %nodes=1 %ranks_step=1 %size=L\s+compute/gnu-openmpi\s+"
                     r"runs$", listed.stdout, re.M), listed.stdout
    assert re.search(r"^HimenoCheck %nodes=1 %ranks_step=1 %size=XL\s+compute/gnu-openmpi\s+"
                     r"skipped: size XL needs 14407 MiB per node", listed.stdout, re.M)
    assert re.search(r"^HimenoCheck %nodes=4 %ranks_step=all %size=XL .* skipped: its "
                     r"dependency HimenoCheck %nodes=1 %ranks_step=1 %size=XL was skipped",
                     listed.stdout, re.M)
    assert not [line for line in lines if line.endswith("skipped: no reason given")]
    assert "SpackStack" not in listed.stdout  # a fixture, no check
    assert re.search(r"^system local: \d+ variant\(s\) would run, \d+ skipped \(a dry run, "
                     r"nothing submitted", listed.stdout, re.M), listed.stdout[-500:]
    reframe_list = perfguard("run", "-n", "MpiHelloCheck", "--", "--list", state=TEST_STATE)
    assert reframe_list.returncode == 0, reframe_list.stdout[-2000:] + reframe_list.stderr
    assert "- MpiHelloCheck" in reframe_list.stdout, reframe_list.stdout[-2000:]


def test_checks_skips_perftest_where_run_would_the_partition_has_no_rdma_device(layout) -> None:
    """The embedded nodes talk over the loopback, no RDMA device: `perfguard checks`
    listed all 44 perftest variants as 'runs', which `run` then skipped. The topology
    decides it (never this host), so the dry run skips them as the run does."""
    listed = perfguard("checks", "-t", "perftest", state=TEST_STATE)
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    rows = [line for line in listed.stdout.splitlines()
            if line.startswith(("PerftestCheck ", "PerftestInterferenceCheck "))]
    assert rows and not [row for row in rows if row.endswith(" runs")], rows
    assert all("perftest needs InfiniBand or RoCE" in row for row in rows), rows[:3]
