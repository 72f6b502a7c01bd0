"""A hostile-but-fair user's probes (issue 12): each one failed before the fix.

Against the real test cluster: its PostgreSQL, its slurmd nodes, the real CLI.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from perfguard import cluster
from perfguard.cluster.layout import GRAFANA_USER, ClusterLayout
from perfguard.cluster.procs import pid_alive, read_pid
from perfguard.store.spool import meta_path, rejected, spooled
from tests.conftest import (
    TEST_STATE,
    counts,
    perfguard,
    perfguard_command,
    surviving_a_slurmd_crash,
    verdict_rows,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
DB_DOWN = "postgresql://perfguard@127.0.0.1:1/none"


def as_nobody(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "nobody", "--", *argv], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL, cwd="/")


def copy_of(report: Path, target: Path, **meta) -> Path:
    """The report as another session (its own uuid), with run metadata beside it."""
    raw = json.loads(report.read_text())
    raw["session_info"]["uuid"] = str(uuid.uuid4())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(raw))
    if meta:
        meta_path(target).write_text(json.dumps(meta))
    return target


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("perfguard: ")]
    assert lines, result.stderr
    return "\n".join(lines)


# --- the database ------------------------------------------------------------------------
def test_postgres_refuses_anyone_without_a_password(layout: ClusterLayout) -> None:
    port = layout.postgres_port
    superuser = as_nobody("psql", f"postgresql://postgres@127.0.0.1:{port}/postgres",
                          "-w", "-c", "SELECT 1")
    assert superuser.returncode != 0 and "no password supplied" in superuser.stderr
    owner = as_nobody("psql", layout.dsn, "-w", "-c", "DELETE FROM run")
    assert owner.returncode != 0 and "no password supplied" in owner.stderr
    assert layout.pgpass.stat().st_mode & 0o777 == 0o600
    assert layout.secrets.stat().st_mode & 0o777 == 0o700
    assert "password" not in layout.dsn.split("?")[0] and "passfile=" in layout.dsn


def test_grafana_role_logs_in_with_its_password_and_only_reads(migrated_dsn: str,
                                                                layout: ClusterLayout) -> None:
    database = urlsplit(migrated_dsn).path.lstrip("/")
    env = perfguard("cluster", "env", state=TEST_STATE, check=True).stdout
    password = re.search(r"PERFGUARD_GRAFANA_PASSWORD=(\S+)", env).group(1)
    dsn = (f"host=127.0.0.1 port={layout.postgres_port} dbname={database} "
           f"user={GRAFANA_USER} password={password}")
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM run").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM threshold")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn.replace(password, "guessed"))


def test_slurm_and_databases_listen_on_loopback_only(layout: ClusterLayout) -> None:
    listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True,
                               check=True).stdout
    bound = {}
    for line in listening.splitlines():
        address, _, port = line.split()[3].rpartition(":")
        bound.setdefault(int(port), set()).add(address)
    ports = layout.all_ports()
    assert all(port in bound for port in ports.values()), (ports, bound)
    assert {name: bound[port] for name, port in ports.items()
            if bound[port] != {"127.0.0.1"}} == {}


def test_secrets_are_redacted_everywhere(tmp_path: Path, demo_report: Path) -> None:
    state = tmp_path / "state"
    for dsn in ("host=127.0.0.1 port=1 user=perfguard password=S3cret",
                "postgresql://perfguard:S3cret@127.0.0.1:1/none",
                "postgresql://perfguard@127.0.0.1:1/none?password=S3cret"):
        result = perfguard("ingest", "--dsn", dsn, str(demo_report), state=state)
        assert result.returncode == 1
        assert "S3cret" not in result.stdout + result.stderr and "***" in result.stderr
    reasons = list((state / "spool").glob("*.reason"))
    assert len(reasons) == 3
    for reason in reasons:
        assert "S3cret" not in reason.read_text()
        assert reason.stat().st_mode & 0o777 == 0o600
    assert (state / "spool").stat().st_mode & 0o777 == 0o700


# --- the spool -----------------------------------------------------------------------------
def test_same_named_reports_keep_their_own_metadata(tmp_path: Path, demo_report: Path,
                                                    migrated_dsn: str) -> None:
    state = tmp_path / "state"
    first = copy_of(demo_report, tmp_path / "a" / "report.json", trigger="nightly",
                    labels=["first"])
    second = copy_of(demo_report, tmp_path / "b" / "report.json", trigger="upgrade",
                     labels=["second"])
    down = perfguard("ingest", "--dsn", DB_DOWN, str(first), str(second), state=state)
    assert down.returncode == 1 and down.stderr.count("spooled as") == 2
    assert len(spooled(state)) == 2
    retry = perfguard("ingest", "--spool", "--dsn", migrated_dsn, state=state)
    assert retry.returncode == 0, retry.stderr
    with psycopg.connect(migrated_dsn) as conn:
        runs = conn.execute("SELECT session_uuid::text, trigger, labels, report_path FROM run"
                            ).fetchall()
    expected = {json.loads(p.read_text())["session_info"]["uuid"]: (trigger, labels)
                for p, trigger, labels in ((first, "nightly", ["first"]),
                                           (second, "upgrade", ["second"]))}
    assert {uuid_: (trigger, labels) for uuid_, trigger, labels, _ in runs} == expected
    for *_, path in runs:  # the spool copies were moved where report_path says
        assert Path(path).is_absolute() and json.loads(Path(path).read_text())
    assert spooled(state) == []


def test_permanently_bad_reports_are_parked_not_retried(tmp_path: Path, migrated_dsn: str,
                                                        demo_report: Path) -> None:
    state = tmp_path / "state"
    broken = tmp_path / "broken.json"
    broken.write_text(demo_report.read_text()[:1000])
    down = perfguard("ingest", "--dsn", DB_DOWN, str(broken), state=state)
    assert down.returncode == 1 and len(spooled(state)) == 1  # could not even be read yet
    first = perfguard("ingest", "--spool", "--dsn", migrated_dsn, state=state)
    assert first.returncode == 1 and "will not be retried" in first.stderr
    [parked] = rejected(state)
    assert "not valid JSON" in parked.with_name(parked.name + ".reason").read_text()
    again = perfguard("ingest", "--spool", "--dsn", migrated_dsn, state=state)
    assert again.returncode == 0 and "spool is empty" in again.stdout


def test_concurrent_ingests_of_one_report_store_it_once(migrated_dsn: str,
                                                        demo_report: Path,
                                                        tmp_path: Path) -> None:
    def ingest(index: int) -> subprocess.CompletedProcess:
        return perfguard("ingest", "--dsn", migrated_dsn, str(demo_report),
                         state=tmp_path / f"state{index}")

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(ingest, range(4)))
    assert [r.returncode for r in results] == [0, 0, 0, 0], [r.stderr for r in results]
    outputs = [r.stdout for r in results]
    assert sum("stored as run" in out for out in outputs) == 1
    assert sum("already stored" in out for out in outputs) == 3
    assert counts(migrated_dsn)["run"] == 1
    assert all(not spooled(tmp_path / f"state{i}") for i in range(4))


def test_report_path_is_absolute(migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    copy = copy_of(demo_report, tmp_path / "here.json")
    perfguard("ingest", "--dsn", migrated_dsn, "here.json", state=Path("state"),
              cwd=tmp_path, check=True)
    with psycopg.connect(migrated_dsn) as conn:
        [(path,)] = conn.execute("SELECT report_path FROM run").fetchall()
    assert path == str(copy.resolve())


# --- bad input: one clear line, and the batch goes on --------------------------------------
def test_a_batch_goes_on_past_bad_files(migrated_dsn: str, demo_report: Path,
                                        tmp_path: Path) -> None:
    state = tmp_path / "state"
    good = copy_of(demo_report, tmp_path / "good.json")
    a_dir = tmp_path / "adir.json"
    a_dir.mkdir()
    wrong_types = tmp_path / "types.json"
    wrong_types.write_text(json.dumps({"session_info": {"data_version": "4.0", "uuid": "x"},
                                       "runs": {"testcases": 1}}))
    huge_number = tmp_path / "digits.json"
    huge_number.write_text('{"session_info": {"uuid": ' + "9" * 5000 + '}, "runs": []}')
    bad_meta = copy_of(demo_report, tmp_path / "meta.json")
    meta_path(bad_meta).write_text("{not json")
    files = [tmp_path / "missing.json", a_dir, wrong_types, huge_number, bad_meta, good]
    result = perfguard("ingest", "--dsn", migrated_dsn, *map(str, files), state=state)
    assert result.returncode == 1
    errors = one_line_error(result)
    for path, message in ((files[0], "cannot read report"), (a_dir, "is a directory"),
                          (wrong_types, "runs: expected a list, found dict"),
                          (huge_number, "not a usable JSON document"),
                          (meta_path(bad_meta), "unreadable run metadata")):
        assert re.search(re.escape(str(path)) + ".*" + re.escape(message), errors), errors
    assert f"{good}: stored as run" in result.stdout
    assert counts(migrated_dsn)["run"] == 1
    assert len(rejected(state)) == 3  # the readable bad files, parked with their reasons


@pytest.mark.parametrize("args, message", [
    (["thresholds", "set", "--system", "s", "--check", "C", "--metric", "bw",
      "--reference", "10", "--upper", "abc"], "--upper 'abc': expected a number"),
    (["verdict", "²"], "no run matches '²'"),
    (["verdict", "9" * 40], "no run matches"),
])
def test_bad_arguments_are_one_line_exit_2(args: list[str], message: str,
                                           migrated_dsn: str) -> None:
    result = perfguard(*args, "--dsn", migrated_dsn)
    assert result.returncode == 2 and message in one_line_error(result)


def test_fingerprint_of_an_unnamed_hca_still_diffs(migrated_dsn: str, demo_report: Path,
                                                   tmp_path: Path) -> None:
    def with_hca(label: str, fw: str) -> Path:
        raw = json.loads(demo_report.read_text())
        raw["session_info"]["uuid"] = str(uuid.uuid4())
        for case in raw["runs"][0]["testcases"]:
            for facts in (case.get("perfguard_fingerprints") or {}).values():
                facts["hcas"] = [{"fw": fw}]
        path = tmp_path / f"{label}.json"
        path.write_text(json.dumps(raw))
        meta_path(path).write_text(json.dumps({"labels": [label]}))
        return path

    perfguard("ingest", "--dsn", migrated_dsn, str(with_hca("old", "28.39")),
              str(with_hca("new", "28.41")), state=tmp_path / "s", check=True)
    result = perfguard("fingerprint", "diff", "old", "new", "--dsn", migrated_dsn)
    assert result.returncode == 0, result.stderr
    assert "hca #0 fw: 28.39 → 28.41" in result.stdout


# --- thresholds --------------------------------------------------------------------------------
THRESHOLD = ["--system", "local", "--check", "OsuCheck", "--metric", "latency", "--unit", "us",
             "--direction", "lower"]


@pytest.mark.parametrize("bounds, message", [
    (["--reference", "10", "--lower", "20", "--upper", "5"], "lower ≤ reference ≤ upper"),
    (["--reference", "-3", "--upper", "10%"], "cannot be negative"),
    (["--reference", "10", "--lower", "5%"], "lower bound must be ≤ 0%"),
])
def test_impossible_thresholds_are_refused(migrated_dsn: str, bounds: list[str],
                                           message: str) -> None:
    result = perfguard("thresholds", "set", "--dsn", migrated_dsn, *THRESHOLD, *bounds)
    assert result.returncode == 2 and message in one_line_error(result)
    assert counts(migrated_dsn)["threshold"] == 0


def test_unknown_metric_is_refused(migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    perfguard("ingest", "--dsn", migrated_dsn, str(demo_report), state=tmp_path, check=True)
    result = perfguard("thresholds", "set", "--dsn", migrated_dsn, "--system", "local",
                       "--check", "UcxPerftestCheck", "--metric", "latnecy", "--direction",
                       "lower", "--reference", "3", "--upper", "10%")
    assert result.returncode == 2
    assert "no stored run and no check has metric 'latnecy'" in one_line_error(result)


def write_thresholds(path: Path, entries: str) -> Path:
    path.write_text("system: local\nthresholds:\n" + entries)
    return path


def test_import_is_all_or_nothing(migrated_dsn: str, tmp_path: Path) -> None:
    good = ("  - {check: OsuCheck, metric: latency, reference: 2.0, upper: 0.1, "
            "direction: lower, unit: us}\n")
    for bad in ("  - {check: [a, b], metric: bw, reference: 1, lower: -0.1, "
                "direction: higher}\n",
                "  - {check: C, metric: bw, reference: 9000, lower: 9000, upper: 100, "
                "bounds: absolute, direction: higher, unit: MB/s}\n",
                "  - {check: C, metric: bw, reference: 1, lower: -0.1, direction: higher, "
                "params: {test: {nested: 1}}}\n"):
        result = perfguard("thresholds", "import", "--dsn", migrated_dsn,
                           str(write_thresholds(tmp_path / "t.yaml", good + bad)))
        assert result.returncode == 2 and "thresholds[1]" in one_line_error(result)
        assert counts(migrated_dsn)["threshold"] == 0


def test_yaml_alias_bomb_is_refused_before_it_grows(migrated_dsn: str, tmp_path: Path) -> None:
    levels = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    levels += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]"
               for i in range(7)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(levels) + "\nsystem: local\nthresholds:\n"
                    "  - {check: C, metric: bw, reference: 1, lower: -0.1, direction: higher,"
                    " params: *h}\n")
    started = time.monotonic()
    result = perfguard("thresholds", "import", "--dsn", migrated_dsn, str(bomb))
    assert result.returncode == 2 and "aliases" in one_line_error(result)
    assert time.monotonic() - started < 30


# --- the cluster heals -------------------------------------------------------------------------
def test_cluster_up_restarts_exactly_the_dead_nodes(layout: ClusterLayout) -> None:
    """Two dead nodes: each restarted, the others untouched. The kernel reuses the number
    of a namespace that ended: clearing a dead node's namespace once killed the node just
    restarted in a namespace of that number. Here node3's number went to node1."""
    pids_before = {name: read_pid(layout.pid_file(name)) for name in
                   ("slurmctld", "postgresql", "slurmd-node1", "slurmd-node2", "slurmd-node3",
                    "slurmd-node4")}
    for node in ("node2", "node3"):
        os.kill(read_pid(layout.pid_file(f"slurmd-{node}")), signal.SIGKILL)
    wait_for(lambda: not any(pid_alive(pids_before[f"slurmd-{n}"]) for n in ("node2", "node3")),
             30, "the killed slurmd still ran")
    (layout.run_dir / "slurmd-node3.uts").write_text(
        os.readlink(f"/proc/{pids_before['slurmd-node1']}/ns/uts"))
    status = perfguard("cluster", "status", state=TEST_STATE)
    assert status.returncode == 3
    assert "slurmd of node2, node3 not running" in status.stdout
    healed = perfguard("cluster", "up", "--nodes", "4", "--port-base", str(layout.port_base),
                       state=TEST_STATE)
    assert healed.returncode == 0, healed.stderr
    wait_for(lambda: all(cluster.services.node_states(layout).get(n) in ("idle", "mixed")
                         for n in ("node2", "node3")), 120, "node2 and node3 not back")
    after = {name: read_pid(layout.pid_file(name)) for name in pids_before}
    assert {k for k, v in after.items() if v != pids_before[k]} == {"slurmd-node2",
                                                                     "slurmd-node3"}
    assert all(os.path.exists(f"/proc/{after[f'slurmd-{n}']}") for n in ("node2", "node3"))
    states = cluster.services.node_states(layout)
    assert states["node2"] in ("idle", "mixed") and states["node3"] in ("idle", "mixed")
    assert perfguard("cluster", "status", state=TEST_STATE).returncode == 0


def test_a_fixtures_run_during_which_a_slurmd_crashed_is_run_once_more(
        layout: ClusterLayout) -> None:
    """A run many tests read (the replayed checks', the demo's) during which node4's slurmd
    died writing glibc's abort, as Debian's 22.05.8 did in CI, is run again on the healed
    cluster, said; a run with no crash is run once."""
    runs = []

    def crashing_once() -> int:
        runs.append(len(runs) + 1)
        if len(runs) == 1:
            pid = read_pid(layout.pid_file("slurmd-node4"))
            with layout.log_file("slurmd-node4.out").open("a") as out:
                out.write("malloc(): unaligned tcache chunk detected\n")
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not pid_alive(pid), 30, "the killed slurmd still ran")
        return runs[-1]

    with pytest.warns(UserWarning, match=r"slurmd of node4 crashed by itself .* during the "
                                         r"nightly; healed and run again"):
        assert surviving_a_slurmd_crash(layout, "the nightly", crashing_once) == 2
    assert cluster.services.dead_nodes(layout) == []
    wait_for(lambda: cluster.services.node_states(layout).get("node4") in ("idle", "mixed"),
             120, "node4 not back")
    assert surviving_a_slurmd_crash(layout, "the nightly", crashing_once) == 3


def wait_for(event: Callable[[], bool], timeout: float, failure: str) -> None:
    """Until ``event()`` holds (polled): an event, never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not event():
        assert time.monotonic() < deadline, f"{failure} within {timeout:.0f} s"
        time.sleep(0.2)


def node_programs(layout: ClusterLayout, node: str) -> set[str]:
    """The programs running in a virtual node's namespace (``/proc/PID/comm``)."""
    names = set()
    for pid in cluster.services.node_pids(layout, node):
        try:
            names.add(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            pass
    return names


# --- a node lost mid-run -----------------------------------------------------------------------
def job_nodes(layout: ClusterLayout, name_part: str) -> list[str]:
    """The nodes of our running job, once it runs (empty until then)."""
    env = layout.client_env()
    queue = subprocess.run(["squeue", "-h", "-o", "%T|%j|%N"], capture_output=True,
                           text=True, env=env).stdout
    for line in queue.splitlines():
        state, name, nodes = line.split("|")
        if state == "RUNNING" and name_part in name:
            return subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True,
                                  text=True, env=env, check=True).stdout.split()
    return []


def cancel_jobs(layout: ClusterLayout, name_part: str) -> None:
    env = layout.client_env()
    queue = subprocess.run(["squeue", "-h", "-o", "%i|%j"], capture_output=True, text=True,
                           env=env).stdout
    ids = [i for i, name in (line.split("|") for line in queue.splitlines()) if name_part in name]
    if ids:
        subprocess.run(["scancel", *ids], env=env, check=False)


def test_a_node_lost_mid_run_is_named_in_the_verdict(layout: ClusterLayout,
                                                     migrated_dsn: str) -> None:
    run = subprocess.Popen(
        perfguard_command("run", "--dsn", migrated_dsn, "-n", "^UcxPerftestCheck.*test=tag_lat",
                          "-S", "UcxPerftestCheck.iterations=100000000", state=TEST_STATE),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (nodes := job_nodes(layout, "UcxPerftestCheck")):
            assert time.monotonic() < deadline and run.poll() is None, "job never ran"
            time.sleep(1)
        victim = nodes[-1]  # not the batch host: its srun lives to report the loss
        wait_for(lambda: "ucx_perftest" in node_programs(layout, victim), 120,
                 f"ucx_perftest never ran on {victim}")
        for pid in cluster.services.node_pids(layout, victim):
            os.kill(pid, signal.SIGKILL)
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:  # perfguard and the reframe it started, never an orphan
            os.killpg(run.pid, signal.SIGKILL)
        cancel_jobs(layout, "UcxPerftestCheck")
        cluster.up(TEST_STATE, nodes=layout.nodes, port_base=layout.port_base)
    assert run.returncode == 1, err
    verdict = out.split("perfguard verdict for run")[-1]
    [line] = [row["verdict"] for row in verdict_rows(verdict)
              if row["check"] == "UcxPerftestCheck"]
    # 22.05: NODE_FAIL; 25.11: srun reports the rank killed first and the job ends FAILED
    # before slurmctld marks the node down* (tests/data/slurm-25.11/srun_node_killed.err)
    assert line.startswith("test-failed") and re.search(
        rf"node {victim} failed \((NODE_FAIL|not responding; rank \d+ on "
        rf"{victim}: Killed)", line), out
    assert "Final" not in line


def run_interrupted(layout: ClusterLayout, dsn: str,
                    interrupt: Callable[[subprocess.Popen], None],
                    limit_s: int = 300) -> tuple[int, str]:
    """`perfguard run` of MpiHello, then a UCX tag_bw long enough to be interrupted: once
    MpiHello is done and the UCX job holds its nodes, ``interrupt(process)``; the exit code
    and everything the run printed."""
    runs = TEST_STATE / "shared" / "runs"
    earlier = set(runs.iterdir()) if runs.is_dir() else set()
    run = subprocess.Popen(
        perfguard_command("run", "--dsn", dsn, "-n", "MpiHelloCheck",
                          "-n", "^UcxPerftestCheck.*test=tag_bw",
                          "-S", "UcxPerftestCheck.iterations=100000000", state=TEST_STATE),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    watchdog = threading.Timer(limit_s, os.killpg, (run.pid, signal.SIGKILL))  # never hang
    watchdog.start()
    try:
        for line in run.stdout:
            seen.append(line)
            if re.search(r"OK\W*\] \(\d+/\d+\) MpiHelloCheck", ANSI.sub("", line)):
                break
        while not job_nodes(layout, "UcxPerftestCheck"):
            assert run.poll() is None, "".join(seen)
            time.sleep(1)
        # ReFrame prints OK before its cleanup stage, which keeps the job's output and then
        # removes the stage directory: the test case is finished once both are done (with
        # the output alone, a SIGTERM within the copy aborted it: 1 run in 3 of the suite)
        wait_for(lambda: any(d not in earlier and any(d.glob("output/*/*/*/MpiHelloCheck*/"
                                                            "rfm_job.out"))
                             and not any(d.glob("stage/*/*/*/MpiHelloCheck*"))
                             for d in runs.iterdir()), 120, "MpiHelloCheck not cleaned up")
        interrupt(run)
        seen.append(run.communicate(timeout=180)[0])
    finally:
        watchdog.cancel()
        run.kill()
        cancel_jobs(layout, "UcxPerftestCheck")
    return run.returncode, "".join(seen)


def test_a_terminated_run_stores_what_it_measured(layout: ClusterLayout,
                                                  migrated_dsn: str) -> None:
    returncode, out = run_interrupted(layout, migrated_dsn,
                                      lambda run: run.send_signal(signal.SIGTERM), 240)
    assert returncode == 4, out  # INTERRUPTED: never a failure, never a page
    with psycopg.connect(migrated_dsn) as conn:
        stored = dict(conn.execute(
            "SELECT tc.check_name, tc.result FROM testcase tc WHERE tc.check_name IN "
            "('MpiHelloCheck', 'UcxPerftestCheck')").fetchall())
    assert stored.get("MpiHelloCheck") == "pass", out
    assert stored.get("UcxPerftestCheck") == "abort", out


@pytest.mark.parametrize("command", [("verdict",), ("report", "-o", "/dev/null")])
def test_a_reader_on_a_database_without_the_schema_says_upgrade(fresh_dsn: str,
                                                                command: tuple) -> None:
    """An empty database (a new DSN, a restore that failed): no internal error."""
    result = perfguard(*command, "--dsn", fresh_dsn)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the database has no perfguard schema, or an older one" in result.stderr
    assert "run `perfguard db upgrade --dsn OWNER_DSN`" in result.stderr
    assert "internal error" not in result.stderr
