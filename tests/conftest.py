"""Shared fixtures: one real embedded cluster (Slurm + PostgreSQL) for the whole session.

The tests use their own state directory and ports, so they never touch a
cluster a user started with `perfguard cluster up`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest
from _pytest.runner import runtestprotocol

from perfguard import cluster
from perfguard.cluster.layout import ClusterLayout
from perfguard.run.reframe import RunOutcome, RunRequest, run_reframe
from perfguard.site.context import Context
from perfguard.store import db
from perfguard.workflows.pipeline import write_references
from tests.facts import DATA  # noqa: F401  (many tests import it from here)

# Not under /tmp: every virtual node mounts a private /tmp over it.
CHECKOUT_TEST_ROOT = Path(__file__).resolve().parents[1] / ".state-test"
#: pytest-xdist's worker (gw0, gw1, …; unset in a run with -n 0): each worker runs its own
#: clusters, so each has its own state root and ports, as two checkouts side by side do.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
#: Ports one worker's clusters take, from TEST_PORT_BASE: the leaf sweep's at -2000 up to
#: test_cluster's refused cluster at +2000 (+41 for its nodes), so a worker's range never
#: meets the next one's. At 5000 the fourth worker's reached 34841, among the kernel's
#: ephemeral ports (from 32768), and a client connection took one of them in CI; at 4100
#: four workers end at 32141 (`perfguard cluster up` refuses ephemeral ports).
WORKER_PORT_SPAN = 4100
TEST_ROOT = CHECKOUT_TEST_ROOT / XDIST_WORKER if XDIST_WORKER else CHECKOUT_TEST_ROOT
_GIVEN_STATE = os.environ.get("PERFGUARD_TEST_STATE")
TEST_STATE = (Path(f"{_GIVEN_STATE}-{XDIST_WORKER}" if XDIST_WORKER else _GIVEN_STATE)
              if _GIVEN_STATE else TEST_ROOT / "session")
#: The context the tests run checks in: the test cluster (its layout is read on first use).
TEST_CONTEXT = Context(TEST_STATE.resolve())
#: Two checkouts run their suites side by side with different PERFGUARD_TEST_PORT_BASE;
#: the workers of one run (gwN) take the ports WORKER_PORT_SPAN × N above it.
TEST_PORT_BASE = (int(os.environ.get("PERFGUARD_TEST_PORT_BASE", "17800"))
                  + WORKER_PORT_SPAN * int(XDIST_WORKER.removeprefix("gw") or 0))
#: The CPU wait every test's jobs read (reframe_tests/common/cpu_wait.sh) is a quiet
#: node's: the suite's own load on a shared 2-core box must not make replayed figures
#: `disturbed`. tests/system/test_cpu_wait.py reads the real /proc under a real load.
os.environ.setdefault("PERFGUARD_PROCFS", str(Path(__file__).parent / "data" / "quiet-node"))
#: A Slurm built from source to run the suite's cluster on (docs/adopting.md: "Which
#: Slurm"); unset: the distribution's, as CI runs it.
TEST_SLURM_PREFIX = os.environ.get("PERFGUARD_SLURM_PREFIX") or None


#: The order xdist's workers take the files in (pyproject's addopts: --dist loadfile, a
#: file to a worker), the rest after them as collected: first the three with tests that
#: run alone (below; each file's first, so that they run while the other workers start
#: and none waits out another worker's long test in the middle of the run), while the
#: fourth worker runs a file of short tests, then the slowest files (worker seconds each,
#: 2026-11-29: adoption 551, the tuned real-nights sets about 420, first_week 375,
#: benchmarks about 370, workflows 280, the held-out sets about 260, history_verdicts
#: 226, …), so that none begins last and runs on while the other workers idle.
FIRST_FILES = ("test_leaf_sweep.py", "test_sweep.py", "test_upgrade_nodes.py",
               "test_dashboards.py", "test_adoption.py", "test_real_nights_tuned.py",
               "test_first_week.py", "test_benchmarks.py", "test_workflows.py",
               "test_real_nights_held_out.py", "test_history_verdicts.py",
               "test_coverage.py", "test_ack_and_history.py", "test_reservations.py",
               "test_job_end.py", "test_hardening.py", "test_honest_runs.py",
               "test_dryrun_omb.py", "test_gpu_replayed.py", "test_values_once.py",
               "test_checks_replayed.py")
#: A test marked ``alone`` measures the host's speed against itself (a sweep must blame
#: nobody on the clean cluster, and the throttled node only): it runs while no other
#: worker runs a test. Beside another worker's checks a clean pair fell below its limit
#: (node5 blamed, 2026-11-26). Every other test holds the host shared.
HOST_LOCK = CHECKOUT_TEST_ROOT / "host.lock"
#: Taken before the host lock, by a reader only a moment: a test waiting to run alone
#: holds it, so the other workers start no new test meanwhile and it is not starved.
HOST_INTENT = CHECKOUT_TEST_ROOT / "host-intent.lock"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """pyproject's addopts name xdist's options; with the plugin off (-p no:xdist) they
    are accepted and mean nothing: the run is serial, as with -n 0."""
    if not pluginmanager.has_plugin("xdist"):
        group = parser.getgroup("xdist")
        # _addoption, as xdist adds -n (addoption refuses short lowercase options)
        group._addoption("-n", "--numprocesses", dest="numprocesses", default=None)
        group.addoption("--dist", dest="dist", default="no")
        group.addoption("--no-loadscope-reorder", dest="loadscopereorder",
                        action="store_false")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On xdist workers, FIRST_FILES first, the rest as collected, a file's tests that
    run alone before its others; every worker sorts alike, so they agree on the
    collection. A serial run keeps pyproject's order (the
    unit suite first: it fails in seconds)."""
    if XDIST_WORKER:
        rank = {name: index for index, name in enumerate(FIRST_FILES)}
        collected: dict[Path, int] = {}
        for item in items:
            collected.setdefault(item.path, len(collected))
        items.sort(key=lambda item: (rank.get(item.path.name, len(FIRST_FILES)),
                                     collected[item.path],
                                     item.get_closest_marker("alone") is None))


@contextmanager
def host_held(alone: bool) -> Iterator[None]:
    """The host lock, exclusive for a test that runs alone, else shared; on an xdist
    worker only (a serial run has no other worker)."""
    if not XDIST_WORKER:
        yield
        return
    CHECKOUT_TEST_ROOT.mkdir(exist_ok=True)
    with open(HOST_INTENT, "a") as intent, open(HOST_LOCK, "a") as host:
        fcntl.flock(intent, fcntl.LOCK_EX)
        fcntl.flock(host, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.flock(intent, fcntl.LOCK_UN)
        yield  # the host lock goes with the file


T = TypeVar("T")

#: The nodes whose slurmd crashed by itself during a test (``crashed_by_itself``), kept
#: on the test by its teardown (``cluster_outlives_the_test``).
SLURMD_CRASHED = pytest.StashKey[list[str]]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Each test with the fixtures it sets up and tears down (a session's cluster, a
    module's nights) under the host lock: exclusive if marked ``alone``. A test that
    failed while a slurmd of the session's cluster crashed by itself is run once more on
    the healed cluster, and that is warned of with what the first run said: node2's
    slurmd of Debian's 22.05.8 aborted mid-sweep (NODE_FAIL) in a full suite run of
    2026-11-30 and failed `test_a_clean_sweep_blames_nobody`, which passed run again. A
    failure with no such crash, or a second crash, stands."""
    with host_held(item.get_closest_marker("alone") is not None):
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        crashed = item.stash.get(SLURMD_CRASHED, [])
        failed = [report for report in reports if report.failed]
        if crashed and failed:
            del item.stash[SLURMD_CRASHED]
            warnings.warn(f"{item.nodeid} failed while slurmd of {', '.join(crashed)} "
                          f"crashed by itself (glibc's abort); run once more on the healed "
                          f"cluster. The first run's {failed[0].when} said: "
                          f"{failed[0].longreprtext[-600:]}", stacklevel=1)
            reports = runtestprotocol(item, nextitem=nextitem, log=False)
        for report in reports:
            item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def perfguard_command(*args: str, state: Path | None = None) -> list[str]:
    """The real `perfguard` command line, for subprocess.run or Popen."""
    command = [sys.executable, "-m", "perfguard.cli"]
    if state is not None:
        command += ["--state-dir", str(state)]
    return command + list(args)


def perfguard(*args: str, state: Path | None = None, env: dict | None = None,
              check: bool = False, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real `perfguard` command line."""
    result = subprocess.run(perfguard_command(*args, state=state), capture_output=True,
                            text=True, env={**os.environ, **(env or {})}, timeout=600, cwd=cwd)
    if check and result.returncode != 0:
        raise AssertionError(f"perfguard {' '.join(args)} failed:\n{result.stdout}\n"
                             f"{result.stderr}")
    return result


@pytest.fixture(scope="session")
def layout() -> ClusterLayout:
    running = cluster.up(TEST_STATE, nodes=4, port_base=TEST_PORT_BASE,
                         slurm_prefix=TEST_SLURM_PREFIX)
    yield running
    cluster.down(TEST_STATE)


@pytest.fixture(autouse=True)
def cluster_outlives_the_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that leaves a daemon of the session's cluster dead fails in its teardown,
    with that daemon's last log lines and its own output's, and the cluster is healed for
    the next tests: one node whose slurmd died (CI, 2026-11-28) had failed five later
    tests in three files, each for a node it never touched. Where every daemon that died
    was a slurmd whose own output, written during the test, ends in glibc's abort (node4's
    slurmd of Debian's Slurm 22.05.8 said `malloc(): unaligned tcache chunk detected`
    while launching a step, in a full suite run and in CI of 2026-11-30, after the test's
    assertions had passed), that is not the test's doing: healed and warned of, and kept
    on the test (``SLURMD_CRASHED``), which is run once more if it failed."""
    layout = request.getfixturevalue("layout") if "layout" in request.fixturenames else None
    sizes = log_sizes(layout) if layout else {}
    yield
    if layout is None:
        return
    dead = dead_services(layout)
    if not dead:
        return
    nodes = cluster.services.dead_nodes(layout)
    logs = [layout.log_file(f"{name}{output}") for name in
            ([f"slurmd-{node}" for node in nodes] or dead) for output in ("", ".out")]
    tails = "\n".join(f"{log}:\n  " + "\n  ".join(
        log.read_text(errors="replace").splitlines()[-8:]) for log in logs if log.exists())
    crashed = crashed_by_itself(layout, sizes)
    heal(layout)
    said = (f"{', '.join(dead)} ({', '.join(nodes) or 'the daemon'}) of the session's "
            f"cluster died; restarted for the next tests. Last lines:\n{tails}")
    if crashed:
        request.node.stash[SLURMD_CRASHED] = crashed
        warnings.warn(f"a daemon crashed by itself: {said}", stacklevel=1)
        return
    pytest.fail(f"the test left {said}", pytrace=False)


def dead_services(layout: ClusterLayout) -> list[str]:
    """The session cluster's daemons (by service) not running."""
    return [service.name for service in cluster.services.SERVICES
            if not service.running(layout)]


def log_sizes(layout: ClusterLayout) -> dict[Path, int]:
    """Each daemon log's size now (``written_since`` reads what came after)."""
    return {log: log.stat().st_size for log in layout.logs.glob("*.log")}


def aborted_by_glibc(layout: ClusterLayout, sizes: dict[Path, int]) -> list[str]:
    """The nodes whose slurmd is dead, where every one of them wrote glibc's abort
    since ``sizes`` (none otherwise): Debian's slurmd crashing by itself."""
    nodes = cluster.services.dead_nodes(layout)
    return nodes if nodes and all(
        GLIBC_ABORT.search(written_since(layout.log_file(f"slurmd-{node}.out"), sizes))
        for node in nodes) else []


def crashed_by_itself(layout: ClusterLayout, sizes: dict[Path, int]) -> list[str]:
    """The nodes of ``aborted_by_glibc``, where slurmd is the only daemon dead (none
    otherwise): what neither a test nor the demo run did."""
    return aborted_by_glibc(layout, sizes) if dead_services(layout) == ["slurmd"] else []


def heal(layout: ClusterLayout) -> None:
    """Start what died of the session's cluster again."""
    cluster.up(TEST_STATE, nodes=layout.nodes, port_base=layout.port_base,
               slurm_prefix=TEST_SLURM_PREFIX)


def written_since(log: Path, sizes: dict[Path, int]) -> str:
    """What ``log`` gained since ``sizes`` was taken (all of it, were it new)."""
    if not log.exists():
        return ""
    with log.open("rb") as text:
        text.seek(sizes.get(log, 0))
        return text.read().decode(errors="replace")


#: glibc's own words when it aborts a process whose heap it found corrupt
#: (malloc/malloc.c: malloc_printerr), which no test causes by stopping a daemon.
GLIBC_ABORT = re.compile(r"^\s*(?:(?:malloc|free|realloc|malloc_consolidate|munmap_chunk|"
                         r"_int_free|_int_malloc)\(\): |double free or corruption|"
                         r"corrupted (?:size|double-linked))", re.M)


def create_database(layout: ClusterLayout, template: str | None = None) -> tuple[str, str]:
    """A new database owned by perfguard's role: (name, DSN); empty, or a copy of
    ``template`` (a database no one is connected to)."""
    name = f"pgtest_{uuid.uuid4().hex[:12]}"
    copy = f" TEMPLATE {template}" if template else ""
    with psycopg.connect(layout.dsn_for("postgres"), autocommit=True) as conn:
        # an autovacuum worker may be in the template a moment
        _retried(conn, f"CREATE DATABASE {name}{copy} OWNER perfguard",
                 psycopg.errors.ObjectInUse)
    return name, layout.dsn_for(name)


def _retried(conn: psycopg.Connection, statement: str, error: type[Exception]) -> None:
    """``statement``, tried again every half second for 20 s while it fails with
    ``error`` (what an autovacuum worker in the database causes, for a moment)."""
    for attempt in range(40):
        try:
            conn.execute(statement)
            return
        except error:
            if attempt == 39:
                raise
            time.sleep(0.5)


def drop_databases(layout: ClusterLayout, names: list[str]) -> None:
    """Dropped even while an autovacuum worker is in one: FORCE may not signal it (it is
    no backend of ours, "must be a member of the role whose process is being
    terminated"), so wait for it to finish, a few seconds at most."""
    with psycopg.connect(layout.dsn_for("postgres"), autocommit=True) as conn:
        for name in names:
            _retried(conn, f"DROP DATABASE {name} WITH (FORCE)",
                     psycopg.errors.InsufficientPrivilege)


@pytest.fixture()
def new_database(layout: ClusterLayout):
    """Factory of new databases on the test cluster's PostgreSQL (empty, or a copy of a
    template), dropped afterwards."""
    created = []

    def create(template: str | None = None) -> str:
        name, dsn = create_database(layout, template)
        created.append(name)
        return dsn

    yield create
    drop_databases(layout, created)


@pytest.fixture()
def fresh_dsn(new_database) -> str:
    return new_database()


@pytest.fixture(scope="session")
def migrated_template(layout: ClusterLayout) -> str:
    """A database every migration ran on, once a session: each test's migrated database
    is a copy of it (CREATE DATABASE … TEMPLATE), its own as before, without running
    every migration again. Nobody may connect to it (a copy needs it unused)."""
    name, dsn = create_database(layout)
    with db.connect(dsn) as conn:
        db.upgrade(conn)
    with psycopg.connect(layout.dsn_for("postgres"), autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
    yield name
    with psycopg.connect(layout.dsn_for("postgres"), autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")
    drop_databases(layout, [name])


@pytest.fixture()
def migrated_dsn(new_database, migrated_template: str) -> str:
    """A database of this test's own at the newest schema."""
    return new_database(migrated_template)


def run_checks(request: RunRequest) -> RunOutcome:
    """reframe as `perfguard run --no-ingest` runs it: the references in force written
    into the run directory first."""
    return run_reframe(TEST_CONTEXT, request,
                       lambda directory: write_references(TEST_CONTEXT, request.system,
                                                          directory))


def surviving_a_slurmd_crash(layout: ClusterLayout, what: str, run: Callable[[], T]) -> T:
    """``run()`` (a module's or the session's jobs, run once for many tests), run once more
    on the healed cluster where a slurmd died of glibc's abort during it
    (``crashed_by_itself``), and that warned of: the tests' own teardown sees only what
    happens during each test, and a crash during a fixture's run (node1's, launching
    perftest's third step, in CI of 2026-12-01) failed every test reading that run and
    erred the first for a dead node. ``run`` starts afresh each time."""
    sizes = log_sizes(layout)
    outcome = run()
    crashed = crashed_by_itself(layout, sizes)
    if crashed:
        warnings.warn(f"slurmd of {', '.join(crashed)} crashed by itself (glibc's abort) "
                      f"during {what}; healed and run again", stacklevel=2)
        heal(layout)
        outcome = run()
    return outcome


@contextmanager
def run_into_a_new_database(layout: ClusterLayout, what: str,
                            run: Callable[[str], T]) -> Iterator[tuple[T, str]]:
    """``run(dsn)`` into a database of its own at the newest schema (`perfguard db
    upgrade`), surviving a slurmd crash (``surviving_a_slurmd_crash``: the second try into
    a fresh database, so it sees no first try's run): (its outcome, the DSN); every
    database it made dropped afterwards."""
    databases = []

    def into_a_new_database() -> tuple[T, str]:
        name, dsn = create_database(layout)
        databases.append(name)
        perfguard("db", "upgrade", "--dsn", dsn, check=True)
        return run(dsn), dsn

    try:
        yield surviving_a_slurmd_crash(layout, what, into_a_new_database)
    finally:
        drop_databases(layout, databases)


@pytest.fixture(scope="session")
def demo_report(layout: ClusterLayout) -> Path:
    """A real report: the sanity and UCX checks run through Slurm on the test cluster
    (once more where a slurmd crashed by itself: node1's, while launching a UCX pair's
    server step, 2026-11-30, erred every test that reads this report)."""
    demo = RunRequest(tags=("demo",), setvars=("UcxPerftestCheck.iterations=2000",))
    outcome = surviving_a_slurmd_crash(layout, "the demo run", lambda: run_checks(demo))
    assert outcome.returncode == 0, f"demo checks failed, see {outcome.report}"
    return outcome.report


def job_file(report: Path, check: str, name: str) -> str:
    """A file (rfm_job.out, rfm_job.sh, …) of the one test case of ``check`` in a report,
    from the output directory ReFrame kept."""
    [case] = [c for c in json.loads(report.read_text())["runs"][0]["testcases"]
              if c["name"].startswith(check)]
    return (Path(case["outputdir"]) / name).read_text()


def counts(dsn: str) -> dict[str, int]:
    tables = ("run", "testcase", "sample", "metric", "fingerprint", "threshold")
    with psycopg.connect(dsn) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def dry_run_scripts(system: str, *names: str, setvars: tuple[str, ...] = (),
                    fixtures: bool = False) -> dict[str, list]:
    """Generate job scripts with `reframe --dry-run` for a system this machine is not;
    display name → the script's lines (fixtures such as SpackStack only if asked)."""
    return {name: (stage / "rfm_job.sh").read_text().splitlines() for name, stage in
            dry_run_stages(system, *names, setvars=setvars, fixtures=fixtures).items()}


def dry_run_stages(system: str, *names: str, setvars: tuple[str, ...] = (),
                   fixtures: bool = False) -> dict[str, Path]:
    """`reframe --dry-run` for a system this machine is not: display name → the stage
    directory holding the job script and whatever else the check wrote for the job."""
    from perfguard.store.report import load as load_report

    outcome = run_reframe(TEST_CONTEXT, RunRequest(system=system, names=names,
                                     setvars=setvars, dry_run=True))
    assert outcome.returncode == 0, f"dry run failed, see {outcome.report}"
    raw = json.loads(outcome.report.read_text())
    load_report(outcome.report)  # the dry-run report is a valid report too
    return {case["display_name"]: Path(case["stagedir"])
            for case in raw["runs"][0]["testcases"] if fixtures or not case.get("fixture")}


def verdict_rows(stdout: str) -> list[dict]:
    """The metric rows of `perfguard verdict`'s table: {variant, check, where, nodes, metric,
    cells, verdict}, each under its variant heading (cells are 2+ spaces apart); the skip
    notes under the table ([1] …) are no rows."""
    rows, variant, where, nodes = [], None, None, ""
    table = stdout.split("\nverdict:")[0]
    table = table[table.rindex("\n  metric") + 1:]  # after ReFrame's own output, if any
    table = re.split(r"\n\n\[\d+\] ", table)[0]
    for line in table.splitlines():
        if not line.strip() or line.startswith("run "):
            continue
        if not line.startswith("  "):
            variant, _, where = line.partition("  (")
            where, _, nodes = where.rstrip(")").partition(" on ")
        elif line.startswith("   ") and rows:  # a long verdict goes on in its column
            rows[-1]["verdict"] += " " + line.strip()
            rows[-1]["cells"][-1] = rows[-1]["verdict"]
        elif variant is not None:
            cells = re.split(r"\s{2,}", line.strip())
            rows.append({"variant": variant, "check": variant.split()[0], "where": where,
                         "nodes": nodes, "metric": cells[0], "cells": cells,
                         "verdict": cells[-1]})
    return rows
