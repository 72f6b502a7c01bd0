"""The embedded cluster's lifecycle on its own state dir and ports: up, status, sacct, down."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from perfguard import cluster
from perfguard.cluster.layout import ClusterLayout
from perfguard.cluster.procs import ephemeral_ports, pid_alive
from perfguard.errors import PerfguardError
from perfguard.paths import CHECKOUT as REPO_ROOT
from tests.conftest import TEST_PORT_BASE, TEST_ROOT, perfguard

PORT_BASE = TEST_PORT_BASE + 1000


def processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


def test_up_status_sacct_down_leaves_nothing() -> None:
    state = TEST_ROOT / "lifecycle"
    shutil.rmtree(state, ignore_errors=True)
    try:
        result = perfguard("cluster", "up", "--nodes", "2", "--port-base", str(PORT_BASE),
                           state=state)
        assert result.returncode == 0, result.stderr
        layout = ClusterLayout.load(state)
        status = perfguard("cluster", "status", state=state)
        assert status.returncode == 0, status.stdout
        assert "node1=idle" in status.stdout and "node2=idle" in status.stdout
        assert layout.dsn in status.stdout
        pids_before = {c.name: c.pids for c in cluster.status(state)}

        # Idempotent: a second `up` starts nothing new.
        assert perfguard("cluster", "up", "--nodes", "2", "--port-base", str(PORT_BASE),
                         state=state).returncode == 0
        assert {c.name: c.pids for c in cluster.status(state)} == pids_before

        job = subprocess.run(["sbatch", "--parsable", "--wait", "-N2", "-o", "/dev/null",
                              "--wrap", "srun hostname"], env=layout.client_env(),
                             capture_output=True, text=True, timeout=120, cwd=layout.shared)
        assert job.returncode == 0, job.stderr
        jobid = job.stdout.strip()
        # slurmdbd is written asynchronously: the job's final record (both nodes) may
        # arrive a moment after sbatch --wait returns, so poll for it, bounded.
        expected, seen = f"{jobid}|COMPLETED|node[1-2]", ""
        deadline = time.monotonic() + 30
        while seen != expected and time.monotonic() < deadline:
            seen = subprocess.run(
                ["sacct", "-X", "-n", "-P", "-j", jobid, "-o", "JobID,State,NodeList"],
                env=layout.client_env(), capture_output=True, text=True).stdout.strip()
            time.sleep(0 if seen == expected else 1)
        assert seen == expected
    finally:
        stopped = perfguard("cluster", "down", state=state)
    assert stopped.returncode == 0
    assert "slurmctld" in stopped.stdout
    assert processes_mentioning(str(state)) == []
    started = [pid for pids in pids_before.values() for pid in pids]
    assert len(started) >= 7  # munge, mariadb, slurmdbd, slurmctld, 2 slurmd, postgres
    assert [pid for pid in started if pid_alive(pid)] == []
    assert perfguard("cluster", "status", state=state).returncode == 3


def test_an_up_that_fails_leaves_nothing_it_started_running() -> None:
    """A Slurm whose slurmdbd cannot start (here a prefix whose slurmdbd exits at once,
    the rest Debian's): `up` fails naming slurmdbd, and the munged and MariaDB it had
    started are stopped, not left running for the admin to find (a test session whose
    slurmdbd did not start left its MariaDB running after the session). MariaDB keeps
    its temporary files under the state directory, not the host's /tmp."""
    state, prefix = TEST_ROOT / "failed-up", TEST_ROOT / "slurm-no-dbd"
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(prefix, ignore_errors=True)
    for folder in ("bin", "sbin"):
        (prefix / folder).mkdir(parents=True)
        for program in Path("/usr", folder).iterdir():
            if program.name.startswith(("s", "slurm")) and program.name != "slurmdbd":
                (prefix / folder / program.name).symlink_to(program)
    dbd = prefix / "sbin" / "slurmdbd"
    dbd.write_text("#!/bin/sh\necho 'fatal: this slurmdbd cannot start' >&2\nexit 1\n")
    dbd.chmod(0o755)
    try:
        result = perfguard("cluster", "up", "--nodes", "2", "--port-base", str(PORT_BASE),
                           "--slurm-prefix", str(prefix), state=state)
        assert result.returncode != 0 and "waiting for slurmdbd to answer: the daemon" \
            in result.stderr and "exited" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert processes_mentioning(str(state)) == []
        assert (state / "mariadb" / "tmp").is_dir()
    finally:
        perfguard("cluster", "down", "--purge", state=state)
        shutil.rmtree(prefix, ignore_errors=True)


def test_postgres_accepts_connection_at_printed_dsn(layout: ClusterLayout) -> None:
    import psycopg

    exports = perfguard("cluster", "env", state=layout.state, check=True).stdout
    [dsn] = [word.split("=", 1)[1] for word in shlex.split(exports, comments=True)
             if word.startswith("PERFGUARD_DSN=")]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT current_database()").fetchone()[0] == "perfguard"


def test_state_under_tmp_is_refused() -> None:
    with pytest.raises(PerfguardError, match="under /tmp, which each virtual node replaces"):
        cluster.up(Path("/tmp/perfguard-state"), nodes=2, port_base=PORT_BASE)


def test_port_in_use_is_named() -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", PORT_BASE + 1000 + 17))
    blocker.listen()
    try:
        with pytest.raises(PerfguardError, match=rf"port {PORT_BASE + 1017} \(for slurmctld\)"):
            cluster.up(TEST_ROOT / "ports", nodes=2, port_base=PORT_BASE + 1000)
    finally:
        blocker.close()


def test_ports_among_the_kernels_ephemeral_ones_are_refused_before_anything_starts() -> None:
    """CI's fourth worker once put a cluster at 32800: a client connection held 34332
    when PostgreSQL was to listen there. Linux's own range (read here, as up reads it)."""
    ephemeral = ephemeral_ports()
    assert ephemeral is not None, "Linux keeps its ephemeral ports in /proc"
    state = TEST_ROOT / "ephemeral"
    with pytest.raises(PerfguardError) as refused:
        cluster.up(state, nodes=2, port_base=ephemeral.start - 20)
    said = str(refused.value)
    assert f"ports {ephemeral.start - 14}-{ephemeral.start + 21} (port base" in said
    assert f"ephemeral ports {ephemeral.start}-{ephemeral.stop - 1}" in said
    assert f"port base of at most {ephemeral.start - 42} for 2 nodes" in said  # +41: node2
    assert not (state / "cluster.json").exists(), "nothing is saved, so nothing started"


def test_not_root_is_explained() -> None:
    # The distribution's python (the venv's may not be readable by nobody); the cluster
    # code path needs no third-party package. The package is copied where nobody can
    # read it: the checkout may sit in root's 0700 home.
    readable = Path(tempfile.mkdtemp(prefix="perfguard-nobody-", dir="/var/tmp"))
    try:
        readable.chmod(0o755)
        shutil.copytree(REPO_ROOT / "perfguard", readable / "perfguard")
        result = subprocess.run(
            ["runuser", "-u", "nobody", "--", "env", f"PYTHONPATH={readable}",
             "/usr/bin/python3", "-m", "perfguard.cli", "--state-dir",
             str(readable / "state"), "cluster", "up"],
            capture_output=True, text=True, timeout=60, cwd=readable)
    finally:
        shutil.rmtree(readable, ignore_errors=True)
    assert result.returncode == 1
    assert "needs root" in result.stderr and "Traceback" not in result.stderr


def test_sixty_four_nodes_come_up_and_run_a_step_on_each() -> None:
    """A centre-sized sweep needs many nodes: 64 virtual nodes on this 2-core host, each
    slurmd on its own port after every daemon's (node 12 once took PostgreSQL's)."""
    layout = ClusterLayout(TEST_ROOT / "sixty-four", nodes=64, port_base=PORT_BASE)
    ports = list(layout.all_ports().values())
    assert len(set(ports)) == len(ports) == 69  # 4 daemons, 64 nodes and the service node
    state = TEST_ROOT / "sixty-four"
    shutil.rmtree(state, ignore_errors=True)
    try:
        up = perfguard("cluster", "up", "--nodes", "64", "--port-base", str(PORT_BASE),
                       state=state)
        assert up.returncode == 0, up.stdout + up.stderr
        env = {**os.environ, "SLURM_CONF": str(state / "etc" / "slurm.conf")}
        step = subprocess.run(["srun", "-N64", "-n64", "--cpu-bind=none", "hostname"],
                              capture_output=True, text=True, env=env, timeout=300)
        assert step.returncode == 0, step.stderr
        assert sorted(set(step.stdout.split())) == sorted(f"node{i}" for i in range(1, 65))
    finally:
        perfguard("cluster", "down", "--purge", state=state)


def test_status_says_how_jobs_are_tracked_and_slurm_runs_so(layout: ClusterLayout) -> None:
    """`cluster status` names the process tracking and task plugins and why (issue 69):
    Slurm runs what it says; with cgroups, each job step's tasks are in Slurm's job cgroup
    inside their node's own cgroup (another cluster's node1 is elsewhere), confined to the
    cores Slurm gave the job."""
    from perfguard.cluster.services import node_tracking

    tracking = node_tracking(layout)
    status = perfguard("cluster", "status", state=layout.state, check=True).stdout
    [slurmd] = [line for line in status.splitlines() if line.startswith("slurmd ")]
    assert slurmd.endswith(f"; {tracking.said()}"), slurmd
    config = subprocess.run(["scontrol", "show", "config"], env=layout.client_env(),
                            capture_output=True, text=True, check=True).stdout
    assert re.search(rf"^ProctrackType\s*=\s*{tracking.proctrack}$", config, re.M), config
    assert re.search(rf"^TaskPlugin\s*=\s*{tracking.task_plugin}$", config, re.M), config
    if not tracking.cgroup:
        assert tracking.reason, tracking
        return
    step = subprocess.run(["srun", "-N1", "-n1", "-w", "node2", "sh", "-c",
                           "cat /proc/self/cgroup; grep Cpus_allowed_list /proc/self/status; "
                           "echo $SLURM_JOB_ID"],
                          env=layout.client_env(), capture_output=True, text=True,
                          timeout=120, cwd=layout.shared)
    assert step.returncode == 0, step.stderr
    *cgroup_lines, allowed, jobid = step.stdout.split("\n")[:-1]
    freezer = [line.split(":", 2)[2] for line in cgroup_lines if ":freezer:" in line]
    assert freezer == [f"/slurm_node2/uid_0/job_{jobid}/step_0"], step.stdout
    host_view = [Path(base) / f"perfguard-{layout.port_base}" / "node2" / "slurm_node2"
                 for controller, base in tracking.mounts if controller == "freezer"]
    assert host_view and host_view[0].is_dir(), host_view
    cpus = {cpu for part in allowed.split()[-1].split(",")
            for cpu in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)}
    # ConstrainCores: the one core Slurm gave the job, not every core of the host
    assert len(cpus) == 1 or os.cpu_count() == 1, allowed
