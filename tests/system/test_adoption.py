"""A site adopts perfguard: an ordinary user, the built wheel only, a site directory of
its own, against a Slurm and a PostgreSQL it did not start.

Root plays the site's administrators: it starts an embedded cluster (the site's slurmctld
and the DBAs' PostgreSQL) in a directory every user can reach, migrates the schema with
the owner role and creates a writer role with `perfguard db grant`. Everything after that
runs as an unprivileged user with its own venv (the wheel, and the project's dependencies
linked in), its own site directory (the cluster's topology file) and its own state.
"""

from __future__ import annotations

import ast
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.conftest import TEST_PORT_BASE, TEST_STATE, perfguard

USER = "perfguard-site"
CHECKOUT = Path(__file__).resolve().parents[2]
#: What the wheel is built from: the repository's folders the build maps into it.
SOURCES = ("pyproject.toml", "README.md", "perfguard", "reframe_tests", "site_config",
           "dashboards", "spack_envs")


def build_wheel(into: Path) -> Path:
    """The distribution, built from a copy of the sources (no build/ in the checkout)."""
    source = into / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (CHECKOUT / name).is_dir() else shutil.copy2
        copy(CHECKOUT / name, source / name, **(
            {"ignore": shutil.ignore_patterns("__pycache__", ".spack-env", "spack.lock")}
            if (CHECKOUT / name).is_dir() else {}))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(into / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    [wheel] = (into / "dist").glob("perfguard-*.whl")
    return wheel


#: Where each folder of the checkout lies in the wheel.
IN_WHEEL = {"perfguard": "perfguard", "reframe_tests": "reframe_tests",
            "site_config": "perfguard/shipped/site_config",
            "dashboards": "perfguard/shipped/dashboards",
            "spack_envs": "perfguard/shipped/spack_envs"}


def test_the_wheel_carries_every_file_the_checkout_ships(tmp_path: Path) -> None:
    """Every tracked file of the folders the wheel maps (the sweep's agent script was once
    missing: a sweep from an installed perfguard could not have run)."""
    tracked = subprocess.run(["git", "ls-files", *IN_WHEEL], cwd=CHECKOUT, capture_output=True,
                             text=True, check=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout: nothing tells which files are shipped")
    with zipfile.ZipFile(build_wheel(tmp_path)) as wheel:
        names = set(wheel.namelist())
    wanted = {IN_WHEEL[path.split("/", 1)[0]] + "/" + path.split("/", 1)[1] for path in tracked
              if not path.endswith(".gitignore")}
    assert sorted(wanted - names) == []


def linked_dependencies(into: Path) -> Path:
    """The project venv's packages, hard-linked where the user can read them (the checkout
    may sit in root's 0700 home); copied where links cannot be made."""
    target = into / "deps"
    packages = Path(sysconfig.get_paths()["purelib"])
    ignore = shutil.ignore_patterns("perfguard*", "__editable__*", "reframe_tests*",
                                    "playwright*", "__pycache__")
    try:
        shutil.copytree(packages, target, ignore=ignore, copy_function=os.link)
    except (OSError, shutil.Error):
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(packages, target, ignore=ignore)
    return target


def as_user(home: Path, *argv: str, env: dict[str, str] | None = None,
            timeout: int = 600) -> subprocess.CompletedProcess:
    """``argv`` as the site user, with a login-like environment and nothing of root's."""
    base = {"HOME": str(home), "USER": USER, "PATH": f"{home / 'venv' / 'bin'}:/usr/bin:/bin",
            "LANG": "C.UTF-8"}
    return subprocess.run(["runuser", "-u", USER, "--", "env", "-i",
                           *(f"{k}={v}" for k, v in {**base, **(env or {})}.items()), *argv],
                          capture_output=True, text=True, timeout=timeout, cwd=home)


@pytest.fixture(scope="module")
def site_user():
    if os.geteuid() != 0:
        pytest.skip("root plays the site's admins here (creates the user, starts Slurm)")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/bash",
                        USER], check=True)
    base = Path(tempfile.mkdtemp(prefix="perfguard-adopt-", dir="/var/tmp"))
    base.chmod(0o755)
    state = base / "cluster"
    port_base = TEST_PORT_BASE + 100
    up = perfguard("cluster", "up", "--nodes", "2", "--port-base", str(port_base),
                   state=state)
    try:
        assert up.returncode == 0, up.stderr
        yield base, state
    finally:
        perfguard("cluster", "down", "--purge", state=state)
        shutil.rmtree(base, ignore_errors=True)


ADOPTING = CHECKOUT / "docs" / "adopting.md"


#: The doc's kinds of ``sh`` block beside the user's: ``sh dba`` (the site's admins, as
#: root) and ``sh stop`` (the user's, run once the first night is stored).
BLOCK_KINDS = ("dba", "stop")


def doc_commands(path: Path) -> list[tuple[str, str]]:
    """(who, command) of every line of the doc's ``sh`` blocks, in order: ``user``, or
    ``dba`` for a ``sh dba`` block, ``stop`` for a ``sh stop`` block."""
    commands, who = [], None
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            info = line[3:].split()
            who = None if who or not info or info[0] != "sh" else \
                (info[1] if info[1:2] and info[1] in BLOCK_KINDS else "user")
        elif who and line.strip() and not line.lstrip().startswith("#"):
            commands.append((who, line))
    return commands


def test_the_adoption_doc_is_what_the_test_runs() -> None:
    """Every block of docs/adopting.md is one the adoption test knows how to run."""
    commands = doc_commands(ADOPTING)
    assert {who for who, _ in commands} == {"user", "dba", "stop"}
    assert any("--detect" in c for _, c in commands)
    assert any("--submit-recurring" in c and "--at now" in c for _, c in commands)
    dba = [c for who, c in commands if who == "dba"]
    assert any("CREATE ROLE" in c for c in dba) and any("CREATE DATABASE" in c for c in dba)
    assert any("pg_hba.conf" in c for c in dba)
    stop = [c for who, c in commands if who == "stop"]
    assert any("--cancel-recurring" in c for c in stop)
    assert any("--remove-scrontab" in c for c in stop)


def test_an_ordinary_user_follows_the_adoption_doc_to_a_nightly_that_runs_by_itself(
        site_user) -> None:
    """docs/adopting.md, command by command: the user's blocks as the user (the exports of
    earlier blocks in force), the admins' as root: the DBA's SQL creates a fresh owner role
    and database on the site's PostgreSQL (not the embedded cluster's own), and everything
    after uses them; the stop block once the first night is stored."""
    base, cluster_state = site_user
    started = base / "started"  # files of the user's newer than this are this test's
    started.touch()
    record = json.loads((cluster_state / "cluster.json").read_text())
    port = record["dsn"].split("@127.0.0.1:")[1].split("/")[0]
    postgres = (cluster_state / "postgres").resolve()  # the server's socket and data
    assert superuser_sql(postgres, port, "SELECT count(*) FROM pg_database WHERE datname = "
                         "'perfdb' OR datname IN (SELECT rolname FROM pg_roles WHERE "
                         "rolname = 'perfdb_owner')") == "0"  # fresh, not the cluster's
    dba_home = base / "dba"  # root's passfile for the owner, not root's own ~/.pgpass
    dba_home.mkdir(mode=0o700)
    wheel = build_wheel(base)
    deps = linked_dependencies(base)
    home = base / "home"
    home.mkdir()
    shutil.chown(home, USER, USER)
    site_names = [  # the doc's site-specific names → the test cluster's
        ("mycluster", "sitea"), ("--partition batch", "--partition compute"),
        ("/path/to/perfguard-0.1.0-py3-none-any.whl", str(wheel)),
        ("dbhost:5432", f"127.0.0.1:{port}"), ("hpcuser", USER),
        ("PERFGUARD_GRANT_PASSWORD=...", "PERFGUARD_GRANT_PASSWORD=site-secret"),
        ("OWNER_PASSWORD", "owner-secret"), (":PASSWORD", ":site-secret"),
        ("/etc/postgresql/15/main/pg_hba.conf", str(postgres / "data" / "pg_hba.conf")),
        ("192.0.2.0/24", "127.0.0.1/32"),
        ("--schedule '30 2 * * *'", "--schedule '* * * * *'")]
    user_env = {"SLURM_CONF": record["slurm_conf"],  # the site's /etc/slurm
                "PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1"}  # no network: deps linked below
    dba_env = {**os.environ, "HOME": str(dba_home), "PGHOST": str(postgres), "PGPORT": port,
               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    exports: dict[str, list[str]] = {"user": [], "dba": [], "stop": []}
    first_command = time.monotonic()
    stops = []
    for who, command in doc_commands(ADOPTING):
        for doc, ours in site_names:
            command = command.replace(doc, ours)
        if who == "stop":  # once the first night is stored (below)
            stops.append(command)
            continue
        done = run_as(who, command, exports, home, user_env, dba_env)
        if command.startswith("export "):
            exports[who].append(command)
        if "pip install" in command:  # the project's dependencies, linked (no network)
            [purelib] = (home / "perfguard-venv" / "lib").glob("python3*/site-packages")
            as_user(home, "sh", "-c", f"echo {deps} > {purelib / 'site-deps.pth'}")
        if command.startswith("perfguard site show"):
            assert re.search(r"systems/sitea\.yaml\s+site\s", done.stdout), done.stdout
            assert f"dashboards: {purelib / 'perfguard' / 'shipped' / 'dashboards'}" in \
                done.stdout
    # the DBA's pg_hba.conf line is read by the server, without an error
    rules = superuser_sql(postgres, port, "SELECT count(*) FILTER (WHERE error IS NOT NULL) "
                          "|| ' ' || count(*) FILTER (WHERE 'perfdb' = ANY(database)) FROM "
                          "pg_hba_file_rules")
    assert rules == "0 1", rules
    owner_dsn = f"postgresql://perfdb_owner:owner-secret@127.0.0.1:{port}/perfdb"
    try:  # events, not the clock: the nights' rows, generous limits for a loaded host
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            wait_for(lambda: scheduled_runs(conn) >= 1, 900, "the nightly was not stored")
            print(f"adoption: first command to a stored nightly "
                  f"{time.monotonic() - first_command:.0f} s")
            stored = conn.execute("SELECT count(*) FROM run r JOIN system s ON "
                                  "s.id = r.system_id WHERE s.name = 'sitea'").fetchone()[0]
        assert stored >= 2  # the first run and the night
        # the night submitted the next one itself (test_workflows.py watches nights recur)
        wait_for(lambda: next_night(record["slurm_conf"]), 300,
                 "the night submitted no next night")
        for command in stops:  # the doc's way to stop the schedule
            done = run_as("stop", command, exports, home, user_env, dba_env)
            if command.endswith("--status"):
                assert "next night:" not in done.stdout, done.stdout
    finally:
        as_user(home, "perfguard", "nightly", "--cancel-recurring", "--now",
                env={**user_env, "PATH": f"{home / 'perfguard-venv' / 'bin'}:/usr/bin:/bin"})
        wait_for_no_nightly(record["slurm_conf"])  # a night in progress stops, reported
    # jobs ran under the user's name: drivers in service, checks in compute
    jobs = subprocess.run(["sacct", "-n", "-P", "-X", "-a", "-o", "User,JobName,Partition",
                           "-S", "now-1hour"], capture_output=True, text=True,
                          env={**os.environ, "SLURM_CONF": record["slurm_conf"]}).stdout
    rows = [line.split("|") for line in jobs.split()]
    assert rows and {user for user, _, _ in rows} == {USER}, jobs
    assert {p for _, name, p in rows if name == "perfguard-nightly"} == {"service"}, jobs
    assert {p for _, name, p in rows if name.startswith("rfm_")} == {"compute"}, jobs
    user_dsn = f"postgresql://{USER}:site-secret@127.0.0.1:{port}/perfdb"
    ddl = subprocess.run(["psql", user_dsn, "-c", "DROP TABLE sample_block"],
                         capture_output=True, text=True)
    assert ddl.returncode != 0 and "must be owner" in ddl.stderr, ddl.stderr
    with psycopg.connect(f"postgresql://grafana:site-secret@127.0.0.1:{port}/perfdb") as g:
        assert g.execute("SELECT count(*) FROM run_outcome").fetchone()[0] >= 2
    # nothing of the user's outside its own home (state and site live there)
    stray = subprocess.run(["find", "/var/tmp", "/tmp", "/dev/shm", str(CHECKOUT),
                            "-xdev", "-user", USER, "-newer", str(started), "-not", "-path",
                            f"{home}*"],
                           capture_output=True, text=True)
    assert stray.stdout.split() == [], stray.stdout


def run_as(who: str, command: str, exports: dict[str, list[str]], home: Path,
           user_env: dict[str, str], dba_env: dict[str, str]) -> subprocess.CompletedProcess:
    """One doc command: the DBA's as root, the user's as the user, each with the exports
    of its earlier blocks in force; it must exit 0 (scrontab's where Slurm has none may
    say so) and print no deprecation warning."""
    if who == "dba":
        done = subprocess.run(["bash", "-c", "\n".join([*exports["dba"], command])],
                              capture_output=True, text=True, env=dba_env, timeout=300)
    else:
        done = as_user(home, "bash", "-c", "\n".join([*exports["user"], command]),
                       env=user_env)
    if "scrontab" in command and done.returncode != 0:
        assert "scrontab is not installed" in done.stderr, done.stderr
    else:
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-2000:])
    assert "deprecat" not in (done.stdout + done.stderr).lower(), command
    return done


def superuser_sql(postgres: Path, port: str, query: str) -> str:
    """One value, as the PostgreSQL superuser over the server's socket (the DBA's way)."""
    return subprocess.run(["runuser", "-u", "postgres", "--", "psql", "-h", str(postgres),
                           "-p", port, "-d", "postgres", "-tAc", query], capture_output=True,
                          text=True, check=True).stdout.strip()


def wait_for(event: Callable[[], bool], timeout: float, failure: str) -> None:
    """Until ``event()`` holds (polled), or fail with ``failure`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not event():
        assert time.monotonic() < deadline, f"{failure} within {timeout:.0f} s"
        time.sleep(2)


def wait_for_no_nightly(slurm_conf: str, timeout: float = 300) -> None:
    """Until the user's nightly driver job left Slurm's queue (a night stopped by
    `--cancel-recurring --now` stores and reports what finished first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queued = subprocess.run(["squeue", "-h", "-u", USER, "--name", "perfguard-nightly"],
                                capture_output=True, text=True,
                                env={**os.environ, "SLURM_CONF": slurm_conf}).stdout
        if not queued.strip():
            return
        time.sleep(2)
    raise AssertionError(f"the nightly driver job was still queued after {timeout}s")


def next_night(slurm_conf: str) -> bool:
    """A second nightly driver job of the user's in Slurm (pending, running or done): the
    recurring job, as the night that ran resubmitted it."""
    jobs = subprocess.run(["sacct", "-n", "-X", "-P", "-u", USER, "--name",
                           "perfguard-nightly", "-S", "now-1hour", "-o", "JobID"],
                          capture_output=True, text=True,
                          env={**os.environ, "SLURM_CONF": slurm_conf}).stdout
    return len(jobs.split()) >= 2


def scheduled_runs(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT count(*) FROM run r JOIN system s ON s.id = r.system_id "
                        "WHERE s.name = 'sitea' AND r.trigger = 'nightly'").fetchone()[0]


def test_a_run_prints_no_deprecation_warning() -> None:
    """ReFrame warns about deprecated API when it loads the check library, whatever runs:
    a dry run of one check loads all of them and must print no warning."""

    result = perfguard("run", "--dry-run", "-n", "MpiHelloCheck", state=TEST_STATE)
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "MpiHelloCheck" in output
    assert [line for line in output.splitlines() if "deprecat" in line.lower()] == []


def test_site_init_describes_each_partition_from_one_of_its_nodes(layout, tmp_path: Path
                                                                  ) -> None:
    """`site init --detect` runs the detection through srun on a compute node of each
    partition named and writes one system whose jobs go to that partition, with the MPI
    and binary provider the node has and the notes of what it lacks; `site show` then
    reads it from the site. Without Slurm it says what to run instead."""
    from perfguard.contract.topology import load_system

    site = tmp_path / "site"
    env = {"SLURM_CONF": str(layout.slurm_conf)}  # the site's Slurm, not an embedded one
    user_state = tmp_path / "state"  # no cluster of its own (not the checkout's .state)
    made = perfguard("site", "init", str(site), "--system", "mine", "--detect",
                     "--partition", "compute", env=env, state=user_state)
    assert made.returncode == 0, made.stderr
    assert f"partitions compute: wrote {site / 'systems' / 'mine.yaml'}" in made.stdout
    written = (site / "systems" / "mine.yaml").read_text()
    assert "# note (compute): no RDMA device" in written
    assert "# note (compute): neither spack nor osu_latency on PATH" in written
    # what Slurm gives a job (RealMemory 2048), the node's own MemTotal as a comment
    assert re.search(r"^# node node\d: MemTotal \d+ MiB, \d+ core\(s\) \(CPUs [\d,-]+\); "
                     r"Slurm gives a job RealMemory 2048 MiB and \d+ CPU\(s\)$", written,
                     re.M), written
    system = load_system(site / "systems" / "mine.yaml")
    [part] = system.partitions
    assert part.node.memory_mib == 2048
    assert part.name == "compute" and part.access == ("--partition=compute",)
    # Debian's Open MPI: no coll/ucc, no CUDA, no net plugin (topology detect says so)
    assert part.mpi_flavour == "openmpi-tcp" and part.provider == {"kind": "system",
                                                                   "offers": []}
    # the embedded nodes are slurmd of one host (one NodeAddr): what a night costs there
    from perfguard.cluster.layout import SHARED_HOST_CHECK_VARIABLES
    assert part.nodes_share_host and ("OMPI_MCA_mpi_yield_when_idle", "1") in part.env_vars
    assert dict(system.check_variables) == SHARED_HOST_CHECK_VARIABLES
    assert "# note: the nodes of compute are slurmd of one host (one NodeAddr)" in written
    assert part.nodes == 4 and part.node.cores == os.cpu_count()
    checked = perfguard("--site", str(site), "site", "check", "--system", "mine",
                        state=TEST_STATE)
    assert checked.returncode == 0, checked.stdout
    wrong = perfguard("site", "init", str(tmp_path / "w"), "--detect", "--partition", "gpu",
                      env=env, state=user_state)
    assert wrong.returncode == 1 and "--partition gpu: Slurm has no such partition" in \
        wrong.stderr
    shown = perfguard("--site", str(site), "site", "show")
    assert re.search(r"systems/mine\.yaml\s+site\s", shown.stdout), shown.stdout
    assert f"site checks: {site / 'checks'} not found" in shown.stdout, shown.stdout
    (site / "checks").mkdir()
    (site / "checks" / "stream.py").write_text("")
    shown = perfguard("--site", str(site), "site", "show")
    assert f"site checks: {site / 'checks'} found, searched by every run: stream.py" in \
        shown.stdout, shown.stdout
    bare = perfguard("site", "init", str(tmp_path / "other"), env={"PATH": "/nonexistent"},
                     state=user_state)
    assert bare.returncode == 0 and "no Slurm here" in bare.stdout, bare.stderr
    again = perfguard("site", "init", str(site))
    assert again.returncode == 1 and "exists and is not empty" in again.stderr


def test_the_checks_import_the_contract_alone() -> None:
    """The check library loads on a login node without the database driver and without
    the embedded cluster: what it imports of perfguard is perfguard.contract, and loading
    every check pulls in no psycopg, no store, judge, run or cluster module."""
    library = CHECKOUT / "reframe_tests"
    imported = {node.module for path in library.rglob("*.py")
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("perf")}
    assert imported == {"perfguard.contract"}, imported
    modules = sorted(".".join(p.relative_to(CHECKOUT).with_suffix("").parts)
                     for p in library.rglob("*.py") if p.name != "__init__.py")
    probe = ("import importlib, sys\n"
             f"for name in {modules!r}: importlib.import_module(name)\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'psycopg'\n"
             "      or m.startswith(('perfguard.store', 'perfguard.judge', 'perfguard.run',\n"
             "                       'perfguard.cluster', 'perfguard.workflows'))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=CHECKOUT, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip() == "[]", loaded.stdout
