"""Nightly and after-upgrade workflows on the embedded cluster, through real Slurm."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid
from datetime import datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import psycopg
import pytest

from tests.conftest import TEST_STATE, perfguard

REPLAY = Path(__file__).parents[1] / "data" / "replay"


@pytest.fixture()
def dsn(layout) -> str:
    perfguard("db", "upgrade", "--dsn", layout.dsn, check=True)
    return layout.dsn


def test_recurring_nightly_fires_night_after_night_with_its_driver_off_the_measured_nodes(
        dsn: str, layout) -> None:
    """Scheduled every minute, the nightly fires twice by itself. Its driver job sits in the
    service partition, so the collectives that take every compute node run at once (a
    driver on node1 kept them pending until their time limit); each next night is
    submitted to the same partition with the same arguments."""
    label = f"scheduled-{uuid.uuid4().hex[:8]}"
    since = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    submitted = perfguard("nightly", "--submit-recurring", "--schedule", "* * * * *",
                          "--at", "now", "-t", "collectives", "--label", label,
                          state=TEST_STATE, env={"PERFGUARD_REPLAY": str(REPLAY)})
    assert submitted.returncode == 0, submitted.stderr
    try:
        runs = wait_for_runs(dsn, label, 2, 360)
        with psycopg.connect(dsn) as conn:
            for run_id, trigger in runs:
                assert trigger == "nightly"
                cases = conn.execute(
                    "SELECT result, nodelist FROM testcase WHERE run_id = %s "
                    "AND check_name = 'OsuCollectiveCheck'", (run_id,)).fetchall()
                assert len(cases) == 3, cases  # allreduce, alltoall, barrier
                assert all(result == "pass" and sorted(nodes) == [
                    "node1", "node2", "node3", "node4"] for result, nodes in cases), cases
        drivers = [line for line in slurm(
            layout, "sacct", "-n", "-X", "-P", "--name", "perfguard-nightly", "-S", since,
            "-o", "Partition,NodeList").splitlines() if "None assigned" not in line]
        assert len(drivers) >= 2 and set(drivers) == {"service|service1"}, drivers
    finally:
        perfguard("nightly", "--cancel-recurring", state=TEST_STATE)


#: A site directory whose own checks make a night that lasts minutes (tag slow-night).
SLOW_NIGHT_SITE = Path(__file__).parents[1] / "data" / "slow_night_site"


def recurring_night_in_progress(label: str, layout, *site: str) -> str:
    """Submit the recurring nightly (replayed collectives, or with ``site`` (--site DIR)
    the site's slow night; labelled) to start now; its driver job's id once the nightly
    holds its lock (its checks are under way). First the night an earlier test let finish
    (`--cancel-recurring` stops none in progress) ends: its lock is not this night's."""
    wait_for_no_nightly(layout)
    lock = TEST_STATE / "nightly.lock"
    if lock.exists():
        lock.write_text("")
    tag = "slow-night" if site else "collectives"
    submitted = perfguard(*site, "nightly", "--submit-recurring", "--schedule", "* * * * *",
                          "--at", "now", "-t", tag, "--label", label,
                          state=TEST_STATE, env={"PERFGUARD_REPLAY": str(REPLAY)})
    assert submitted.returncode == 0, submitted.stderr
    job = re.search(r"nightly job (\d+)", submitted.stdout).group(1)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip():
            return job
        time.sleep(1)
    raise AssertionError(f"the nightly of job {job} did not start within 300 s")


def job_end(layout, job: str, timeout: float = 600) -> str:
    """The job's end state in Slurm's accounting, once it ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = slurm(layout, "sacct", "-n", "-X", "-P", "-j", job, "-o", "State").strip()
        if state and state not in ("PENDING", "RUNNING", "REQUEUED", "COMPLETING"):
            return state
        time.sleep(2)
    raise AssertionError(f"job {job} did not end within {timeout}s")


def queued_nightlies(layout) -> str:
    return slurm(layout, "squeue", "-h", "--name", "perfguard-nightly", "-o", "%i %T").strip()


def wait_for_no_nightly(layout, timeout: float = 600) -> None:
    """Until no nightly driver job is queued or running (polled every 2 s)."""
    deadline = time.monotonic() + timeout
    while queued_nightlies(layout):
        assert time.monotonic() < deadline, \
            f"nightly jobs still queued after {timeout:.0f} s: {queued_nightlies(layout)}"
        time.sleep(2)


def test_cancel_recurring_lets_the_night_in_progress_finish_and_submits_no_next(
        dsn: str, layout) -> None:
    """`--cancel-recurring` during a night: that night runs to its end (stored, its HTML
    report written), and no next night is submitted. It cancelled the running job before
    (its report never written)."""
    label = f"cancelled-{uuid.uuid4().hex[:8]}"
    job = recurring_night_in_progress(label, layout)
    try:
        cancelled = perfguard("nightly", "--cancel-recurring", state=TEST_STATE)
        assert cancelled.returncode == 0, cancelled.stderr
        assert f"the running nightly (job {job}) finishes and submits no next night" in \
            cancelled.stdout, cancelled.stdout
        status = perfguard("nightly", "--status", state=TEST_STATE)
        assert status.returncode == 0, status.stderr
        assert re.search(rf"^running now: recurring job {job} in partition service since "
                         rf"\S+ \(cancelled: submits no next night\)$", status.stdout, re.M), \
            status.stdout
        assert job_end(layout, job) != "CANCELLED"
        [(run_id, _)] = wait_for_runs(dsn, label, 1, 60)
        assert (TEST_STATE / "reports" / f"run-{run_id}.html").is_file()
        log = (TEST_STATE / "log" / f"nightly-{job}.log").read_text()
        assert f"HTML report: {TEST_STATE / 'reports' / f'run-{run_id}.html'}" in log, log
        assert "no next night submitted" in log, log[-2000:]
        assert queued_nightlies(layout) == ""
    finally:
        perfguard("nightly", "--cancel-recurring", state=TEST_STATE)


def test_cancel_recurring_now_stops_the_night_in_progress_which_still_reports(
        dsn: str, layout) -> None:
    """`--cancel-recurring --now`: the night in progress stops its checks, stores what
    finished and writes its report; no next night."""
    label = f"stopped-{uuid.uuid4().hex[:8]}"
    job = recurring_night_in_progress(label, layout, "--site", str(SLOW_NIGHT_SITE))
    try:
        stopped = perfguard("nightly", "--cancel-recurring", "--now", state=TEST_STATE)
        assert stopped.returncode == 0, stopped.stderr
        assert f"the running nightly (job {job}) stops its checks" in stopped.stdout
        assert job_end(layout, job, 400) != "CANCELLED"  # far less than SlowNightCheck's 600 s
        [(run_id, _)] = wait_for_runs(dsn, label, 1, 60)
        with psycopg.connect(dsn) as conn:
            cases = dict(conn.execute("SELECT check_name, result FROM testcase "
                                      "WHERE run_id = %s", (run_id,)).fetchall())
        assert cases.get("SlowNightCheck") != "pass", cases  # stopped, not run to its end
        assert (TEST_STATE / "reports" / f"run-{run_id}.html").is_file()
        log = (TEST_STATE / "log" / f"nightly-{job}.log").read_text()
        assert "stopped on request (perfguard nightly --cancel-recurring --now" in log, log
        assert "no next night submitted" in log, log[-2000:]
        assert queued_nightlies(layout) == ""
        alone = perfguard("nightly", "--now", state=TEST_STATE)
        assert alone.returncode == 2 and "--now goes with --cancel-recurring" in alone.stderr
    finally:
        perfguard("nightly", "--cancel-recurring", state=TEST_STATE)


def wait_for_runs(dsn: str, label: str, count: int, timeout: float) -> list[tuple]:
    deadline = time.monotonic() + timeout
    rows: list[tuple] = []
    while time.monotonic() < deadline:
        with psycopg.connect(dsn) as conn:
            rows = conn.execute("SELECT id, trigger FROM run WHERE %s = ANY(labels) "
                                "ORDER BY id", (label,)).fetchall()
        if len(rows) >= count:
            return rows
        time.sleep(3)
    raise AssertionError(f"{len(rows)} run(s) labelled {label} within {timeout}s, not {count}")


def test_driver_partition_refuses_a_measured_or_unknown_partition(dsn: str) -> None:
    measured = perfguard("nightly", "--print-scrontab", "--partition", "compute",
                         state=TEST_STATE)
    assert measured.returncode == 2
    assert "would hold node[1-4] of partition compute" in measured.stderr
    unknown = perfguard("nightly", "--submit-recurring", "--partition", "nosuch",
                        state=TEST_STATE)
    assert unknown.returncode == 2
    assert "--partition nosuch: Slurm has no such partition" in unknown.stderr


def slurm(layout, *argv: str) -> str:
    return subprocess.run(list(argv), env=layout.client_env(), capture_output=True,
                          text=True, check=True).stdout


class Hook(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802 - the http.server API
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hook.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_nightly_notifies_webhook_and_mail(dsn: str, tmp_path: Path) -> None:
    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    mail = tmp_path / "mail.txt"
    try:
        result = perfguard("nightly", "-t", "sanity", "--webhook",
                           f"http://127.0.0.1:{server.server_port}/hook",
                           "--mail-cmd", f"cat > {mail}", state=TEST_STATE)
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stdout + result.stderr
    [payload] = Hook.received
    assert payload["status"] == "pass" and payload["counts"]["pass"] >= 1
    assert payload["run_id"] and payload["failures"] == []
    assert mail.read_text().startswith("perfguard nightly PASS")
    html = Path(payload["html_report"])  # written beside the run, named in mail and hook
    assert html == TEST_STATE / "reports" / f"run-{payload['run_id']}.html"
    assert f"HTML report: {html}" in mail.read_text()
    assert "<title>perfguard run" in html.read_text()
    assert html.with_suffix(".md").read_text().startswith(
        f"## perfguard run {payload['run_id']} on local: PASS")
    junit = tmp_path / "ci" / "junit.xml"  # what the CI job publishes
    copied = perfguard("report", str(payload["run_id"]), "-o", str(tmp_path / "ci" / "r.html"),
                       "--junit", str(junit), state=TEST_STATE)
    assert copied.returncode == 0, copied.stderr
    assert "<testsuite" in junit.read_text() and "MpiHelloCheck" in junit.read_text()


def test_scrontab_entry_and_missing_client(dsn: str) -> None:
    printed = perfguard("nightly", "--print-scrontab", "--schedule", "15 3 * * 1-5",
                        "--webhook", "https://chat.example/hook", state=TEST_STATE)
    lines = printed.stdout.splitlines()
    assert lines[1] == "#SCRON --job-name=perfguard-nightly"
    command = lines[-2]
    assert command.startswith("15 3 * * 1-5 cd ")
    assert f"PERFGUARD_STATE_DIR={TEST_STATE}" in command
    assert "PERFGUARD_DSN=" in command  # every night alike, not the submitting shell's
    assert "#SCRON --partition=service" in lines  # the driver off the measured nodes
    assert command.endswith("nightly --system local --webhook https://chat.example/hook")
    installed = perfguard("nightly", "--install-scrontab", state=TEST_STATE)
    if installed.returncode != 0:  # Debian's slurm-client has no scrontab binary
        assert "scrontab is not installed" in installed.stderr


def test_upgrade_check_on_chosen_nodes_against_labelled_baseline(dsn: str) -> None:
    baseline = perfguard("run", "-n", "MpiHelloCheck", "--label", "pre-upgrade",
                         state=TEST_STATE)
    assert baseline.returncode == 0, baseline.stdout
    result = perfguard("upgrade-check", "--baseline", "pre-upgrade", "--nodes", "node[2-3]",
                       "-t", "sanity", state=TEST_STATE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "against baseline pre-upgrade" in result.stdout
    assert "baseline" in result.stdout and "fingerprint changes since run" in result.stdout
    html = Path(result.stdout.split("HTML report: ")[1].split()[0])
    assert "Environment changes since run" in html.read_text()
    with psycopg.connect(dsn) as conn:
        trigger, nodes = conn.execute(
            "SELECT r.trigger, tc.nodelist FROM run r JOIN testcase tc ON tc.run_id = r.id "
            "WHERE 'post-upgrade' = ANY(r.labels) ORDER BY r.id DESC LIMIT 1").fetchone()
    assert trigger == "upgrade" and set(nodes) <= {"node2", "node3"}
    wrong = perfguard("upgrade-check", "--baseline", "no-such-label", state=TEST_STATE)
    assert wrong.returncode == 2 and "no run matches 'no-such-label'" in wrong.stderr
    accepted = perfguard("upgrade-check", "--baseline", "pre-upgrade", "--nodes", "node[2-3]",
                         "-t", "sanity", "--accept", "OFED 24.10: the new level",
                         state=TEST_STATE)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    run_id = re.search(r": run (\d+) against baseline", accepted.stdout).group(1)
    assert f"accepted: node2, node3 judged against the level of run {run_id} from now on " \
           f"(OFED 24.10: the new level)" in accepted.stdout
    listed = perfguard("accept", "--list", state=TEST_STATE).stdout
    assert f"node2 from run {run_id}: by " in listed and ": OFED 24.10: the new level" in listed
    assert perfguard("upgrade-check", "--baseline", "pre-upgrade", "--accept", " ",
                     state=TEST_STATE).returncode == 2
    with psycopg.connect(dsn) as conn:  # the session's database judges other tests' runs
        conn.execute("DELETE FROM accepted_level WHERE from_run = %s", (int(run_id),))


@pytest.mark.parametrize("mistake, refused", [
    (["--schedule", "every night"], "expected 5 cron fields"),
    (["--schedule", "0 2 * * *", "--dsn", "postgresql://perfguard:secret@127.0.0.1/x"],
     "the DSN carries a password"),
])
def test_a_refused_resubmission_keeps_a_cancelled_nightly_cancelled(
        layout, mistake: list[str], refused: str) -> None:
    """After `--cancel-recurring` the running night must not submit its sequel. A
    resubmission that is refused (a typo in the schedule, a DSN with a password) deleted
    the cancel marker before it was refused, so the cancelled night came back; now the
    marker goes only once sbatch took a new job."""
    from perfguard.workflows.schedule import cancelled_marker

    marker = cancelled_marker(TEST_STATE)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("424242\n")  # the night in progress when it was cancelled
    try:
        result = perfguard("nightly", "--submit-recurring", *mistake, state=TEST_STATE)
        assert result.returncode != 0 and refused in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert marker.read_text() == "424242\n"
        assert queued_nightlies(layout) == ""
        status = perfguard("nightly", "--status", state=TEST_STATE)
        assert status.returncode == 0, status.stderr
        assert status.stdout.startswith("recurring job: none queued"), status.stdout
        assert re.search(r"^last night: ", status.stdout, re.M), status.stdout
    finally:
        marker.unlink(missing_ok=True)
