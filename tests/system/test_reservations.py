"""Slurm's own ways to run where an admin says (issue 68): `--reservation`, `--qos` and
`--account` on every job of a run, a site's defaults in the partition's `access`, and
docs/operations.md's maintenance flow run on the embedded cluster."""

from __future__ import annotations

import getpass
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from perfguard import cli
from perfguard.errors import PerfguardError
from perfguard.workflows import pipeline
from tests.conftest import TEST_STATE, perfguard

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
RESERVED = {"node3", "node4"}


@pytest.fixture()
def dsn(layout) -> str:
    perfguard("db", "upgrade", "--dsn", layout.dsn, check=True)
    return layout.dsn


def slurm(layout, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True,
                          env={**os.environ, "SLURM_CONF": str(layout.slurm_conf)})


@pytest.fixture()
def reservation(layout):
    """A maintenance reservation on node3 and node4, deleted afterwards."""
    name = "pg-maint"
    slurm(layout, "scontrol", "delete", f"reservation={name}")
    made = slurm(layout, "scontrol", "create", "reservation", f"ReservationName={name}",
                 "Nodes=node[3-4]", "StartTime=now", "Duration=60",
                 f"Users={getpass.getuser()}", "Flags=maint")
    assert made.returncode == 0, made.stderr
    yield name
    slurm(layout, "scontrol", "delete", f"reservation={name}")


def sbatch_lines(report_line: str) -> dict[str, list[str]]:
    """`report: PATH` of a dry run → each test case's ``#SBATCH`` lines."""
    report = Path(report_line.split("report: ")[1].split()[0])
    return {case["display_name"]: [line for line in
                                    (Path(case["stagedir"]) / "rfm_job.sh").read_text()
                                    .splitlines() if line.startswith("#SBATCH")]
            for case in json.loads(report.read_text())["runs"][0]["testcases"]
            if not case.get("fixture")}


def test_a_dry_runs_job_script_carries_reservation_qos_and_account(layout) -> None:
    done = perfguard("run", "--dry-run", "-n", "MpiHelloCheck", "--reservation", "maint-42",
                     "--qos", "bench", "--account", "hpcops", state=TEST_STATE)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    [lines] = sbatch_lines(done.stdout).values()
    assert lines[-3:] == ["#SBATCH --reservation=maint-42", "#SBATCH --qos=bench",
                          "#SBATCH --account=hpcops"], lines
    assert lines.index("#SBATCH --partition=compute") < lines.index(
        "#SBATCH --reservation=maint-42")
    wrong = perfguard("run", "--dry-run", "-n", "MpiHelloCheck", "--qos", "two words",
                      state=TEST_STATE)
    assert wrong.returncode == 2 and "--qos 'two words'" in wrong.stderr, wrong.stderr


def test_a_site_default_in_access_and_the_commands_option_after_it(layout,
                                                                   tmp_path: Path) -> None:
    """docs/topology.md: the site's default account and QOS in the partition's `access`;
    the command's `--qos` comes after it in the script, and Slurm takes the last."""
    site = tmp_path / "site"
    (site / "systems").mkdir(parents=True)
    shipped = (ROOT / "site_config" / "systems" / "ndr4x4.yaml").read_text()
    (site / "systems" / "ndr4x4.yaml").write_text(shipped.replace(
        "access: ['--partition=gpu', '--exclusive']",
        "access: ['--partition=gpu', '--exclusive', '--account=hpcops', '--qos=bench']"))
    done = perfguard("--site", str(site), "run", "--dry-run", "--system", "ndr4x4", "-n",
                     "OsuMultiPairCheck%hca=mlx5_0",
                     "--qos", "maint", state=TEST_STATE)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    [lines] = sbatch_lines(done.stdout).values()
    assert "#SBATCH --account=hpcops" in lines
    assert lines.index("#SBATCH --qos=bench") < lines.index("#SBATCH --qos=maint")


@pytest.mark.parametrize("command", [
    ["run", "-n", "MpiHelloCheck"],
    ["nightly", "-t", "sanity"],
    ["upgrade-check", "--baseline", "pre-maint", "--nodes", "node[3-4]", "-t", "sanity"],
    ["sweep", "--nodes", "node[3-4]", "--topology", "none"],
], ids=lambda command: command[0])
def test_every_command_gives_every_job_the_options(command: list[str], dsn: str,
                                                   reservation: str, monkeypatch) -> None:
    """run, nightly, upgrade-check and sweep each hand ReFrame the options (`-J`), and a
    run in a reservation skips shapes beyond its nodes; stopped at ReFrame's door."""
    if command[0] == "upgrade-check":
        perfguard("run", "-n", "MpiHelloCheck", "--label", "pre-maint", state=TEST_STATE,
                  check=True)
    asked = []

    def captured(ctx, request, references=None):
        asked.append(request)
        raise PerfguardError("reframe not started (test)")

    monkeypatch.setattr(pipeline, "run_reframe", captured)
    status = cli.main(["--state-dir", str(TEST_STATE), *command, "--reservation",
                       reservation, "--qos", "normal", "--account", "root"])
    assert status == 1 and asked, command
    [request] = asked
    assert request.job_options == (f"--reservation={reservation}", "--qos=normal",
                                   "--account=root")
    assert "nodes_available=2" in request.setvars
    from perfguard.run.reframe import reframe_command

    argv = reframe_command(request, Path("r.json"), Path("d"))
    assert argv[argv.index(f"reservation={reservation}") - 1] == "-J"


def test_a_reservation_slurm_lacks_stops_the_run_before_anything_runs(dsn: str) -> None:
    done = perfguard("run", "-n", "MpiHelloCheck", "--reservation", "no-such-maint",
                     state=TEST_STATE)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr
    assert "--reservation no-such-maint: Slurm has no such reservation" in done.stderr
    assert "nothing was run" in done.stderr and "[ReFrame Setup]" not in done.stdout


def test_a_scheduled_nightly_carries_them_every_night(dsn: str, layout) -> None:
    printed = perfguard("nightly", "--print-scrontab", "--reservation", "maint-42", "--qos",
                        "bench", "--account", "hpcops", state=TEST_STATE)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines()[-2].endswith(
        "nightly --system local --reservation maint-42 --qos bench --account hpcops")
    submitted = perfguard("nightly", "--submit-recurring", "--at", "now+600",
                          "--reservation", "maint-42", "--account", "hpcops",
                          state=TEST_STATE)
    try:
        assert submitted.returncode == 0, submitted.stderr
        job = re.search(r"nightly job (\d+)", submitted.stdout)[1]
        wrapped = slurm(layout, "scontrol", "write", "batch_script", job, "-").stdout
        # tonight's nightly and the submission of tomorrow's both name them
        assert wrapped.count("--reservation maint-42 --account hpcops") == 2, wrapped
    finally:
        perfguard("nightly", "--cancel-recurring", state=TEST_STATE)


def maintenance_block() -> list[str]:
    """The commands of docs/operations.md's maintenance flow, in order."""
    section = OPERATIONS.read_text().split(
        "\n## Upgraded nodes in a maintenance reservation\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def reserved_jobs(conn: psycopg.Connection, run_id: int) -> list[str]:
    return [job for (job,) in conn.execute(
        "SELECT slurm_jobid FROM testcase WHERE run_id = %s AND slurm_jobid IS NOT NULL",
        (run_id,))]


def accounting(layout, jobs: list[str]) -> list[list[str]]:
    """sacct's JobID, Reservation and NodeList of ``jobs`` once slurmdbd has their end
    (slurmctld sends it a moment after the job ended: a row read earlier may still lack
    the reservation and name part of the nodes)."""
    deadline = time.monotonic() + 60
    while True:
        listed = slurm(layout, "sacct", "-X", "-n", "-P", "-j", ",".join(jobs), "-o",
                       "JobID,State,Reservation,NodeList").stdout
        rows = [line.split("|") for line in listed.split()]
        if (len(rows) == len(jobs) and all(state == "COMPLETED" and reserved
                                           for _, state, reserved, _ in rows)) \
                or time.monotonic() > deadline:
            return [[job, reserved, nodes] for job, _, reserved, nodes in rows]
        time.sleep(2)


def test_the_maintenance_flow_of_operations_md(dsn: str, layout) -> None:
    """docs/operations.md's block, command by command (its upgrade check limited to the
    sanity checks, `-t sanity`, as the suite's other upgrade checks): the upgrade check's
    jobs ran in the reservation on node3 and node4 (sacct); the same check without
    --reservation is held by Slurm (ReqNodeNotAvail), which ReFrame cancels: the test case
    fails with that reason, the job never started; the reservation is gone at the end."""
    commands = maintenance_block()
    assert [c.split()[:2] for c in commands] == [["scontrol", "create"],
                                                 ["perfguard", "upgrade-check"],
                                                 ["scontrol", "delete"]]
    perfguard("run", "-n", "MpiHelloCheck", "--label", "pre-upgrade", state=TEST_STATE,
              check=True)
    env = {**os.environ, "SLURM_CONF": str(layout.slurm_conf), "USER": getpass.getuser(),
           "PERFGUARD_STATE_DIR": str(TEST_STATE),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}

    def shell(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                              env=env, timeout=600)

    try:
        made = shell(commands[0])
        assert made.returncode == 0, made.stderr
        checked = shell(commands[1] + " -t sanity")
        assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr
        run_id = int(re.search(r": run (\d+) against baseline", checked.stdout)[1])
        with psycopg.connect(dsn) as conn:
            jobs = reserved_jobs(conn, run_id)
        assert jobs
        accounted = accounting(layout, jobs)
        assert all(reserved == "upgrade" and nodes == "node[3-4]"
                   for _, reserved, nodes in accounted), accounted
        outside = without_the_reservation(layout, dsn, commands[1])
        assert "job cancelled because it was blocked due to reason: ReqNodeNotAvail" \
            in outside, outside
    finally:
        released = shell(commands[2])
    assert released.returncode == 0, released.stderr
    assert "upgrade" not in slurm(layout, "scontrol", "show", "reservation").stdout


def without_the_reservation(layout, dsn: str, command: str) -> str:
    """The doc's upgrade check without --reservation: Slurm holds its job (node3 and node4
    are reserved for maintenance), ReFrame cancels a job blocked so, and the test case
    fails with Slurm's reason, never having started on the reserved nodes."""
    argv = command.split()[1:]
    cut = argv.index("--reservation")
    done = perfguard(*argv[:cut], *argv[cut + 2:], "-t", "sanity", state=TEST_STATE)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    run_id = int(re.search(r": run (\d+) against baseline", done.stdout)[1])
    with psycopg.connect(dsn) as conn:
        [(job, reason)] = conn.execute(
            "SELECT slurm_jobid, fail_reason FROM testcase WHERE run_id = %s",
            (run_id,)).fetchall()
    never = slurm(layout, "sacct", "-X", "-n", "-P", "-j", job, "-o",
                  "State,Reservation,NodeList").stdout
    assert never.startswith("CANCELLED") and never.strip().endswith("|None assigned"), never
    return reason
