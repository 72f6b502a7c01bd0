"""The suite's teardown tells a daemon that crashed by itself from one a test left dead,
and a test failed by such a crash is run once more."""

import pytest

from perfguard.cluster import services
from perfguard.cluster.layout import ClusterLayout
from tests.conftest import GLIBC_ABORT, aborted_by_glibc, log_sizes, written_since

#: pytester runs a test file under the suite's own protocol (the crashed slurmd's rerun)
pytest_plugins = ("pytester",)

#: The tail the teardown printed in CI (2026-11-30): node4's slurmd output file.
CRASHED = """/check/work/main/.state-test/gw3/session/log/slurmd-node4.out.log:
  slurmd: launch task StepId=9.3 request from UID:0 GID:0 HOST:127.0.0.1 PORT:37938
  slurmd: task/affinity: lllp_distribution: JobId=9 manual binding: verbose,map_cpu,one_thread
  malloc(): unaligned tcache chunk detected
  slurmd: launch task StepId=9.4 request from UID:0 GID:0 HOST:127.0.0.1 PORT:37942"""

#: A slurmd a test killed (SIGKILL says nothing) with an error line of its own before.
KILLED = """/state/log/slurmd-node2.out.log:
  slurmd: error: free(): no such file, retrying
  slurmd: launch task StepId=12.0 request from UID:0 GID:0 HOST:127.0.0.1 PORT:40000"""


def test_glibc_abort_is_a_crash_of_the_daemon_itself() -> None:
    assert GLIBC_ABORT.search(CRASHED)
    assert GLIBC_ABORT.search("  double free or corruption (out)")
    assert GLIBC_ABORT.search("  free(): double free detected in tcache 2")


def test_a_daemon_killed_or_logging_an_error_is_no_crash() -> None:
    assert not GLIBC_ABORT.search(KILLED)


def test_an_abort_before_the_test_is_not_the_tests_daemons(tmp_path) -> None:
    """A healed slurmd's output file keeps its earlier abort (spawn appends): only what
    it wrote during the test can say that it crashed by itself."""
    log = tmp_path / "slurmd-node4.out.log"
    log.write_text(CRASHED.split("\n", 1)[1] + "\n")
    sizes = {log: log.stat().st_size}
    with log.open("a") as text:
        text.write("slurmd: slurmd version 22.05.8 started\n")
    assert GLIBC_ABORT.search(log.read_text())
    assert not GLIBC_ABORT.search(written_since(log, sizes))
    assert GLIBC_ABORT.search(written_since(log, {}))


def test_a_run_is_tried_again_only_where_every_dead_slurmd_aborted_during_it(tmp_path) -> None:
    """The demo run is run once more where a slurmd crashed by itself while it ran: every
    dead node's output gained glibc's abort since the sizes were taken. A node that died
    saying nothing, or an abort from before, is no such crash."""
    layout = ClusterLayout(tmp_path, nodes=2)
    layout.logs.mkdir()
    dead = services.dead_nodes(layout)  # no pid files: every slurmd is dead
    for node in dead:
        layout.log_file(f"slurmd-{node}.out").write_text("slurmd: started\n")
    sizes = log_sizes(layout)
    assert aborted_by_glibc(layout, sizes) == []
    for node in dead:
        with layout.log_file(f"slurmd-{node}.out").open("a") as out:
            out.write("malloc(): unaligned tcache chunk detected\n")
    assert aborted_by_glibc(layout, sizes) == dead and len(dead) == 3
    assert aborted_by_glibc(layout, log_sizes(layout)) == []  # an abort from before
    layout.log_file(f"slurmd-{dead[0]}.out").write_text("slurmd: started\n")
    assert aborted_by_glibc(layout, {}) == []  # one died saying nothing


#: A test on a cluster: it fails on the runs listed in FAIL, and a slurmd crashed by
#: itself during the runs in CRASH (as the teardown keeps it); each run is counted.
ON_THE_CLUSTER = """
import pytest
from pathlib import Path
from tests.conftest import SLURMD_CRASHED

FAIL, CRASH = {fail}, {crash}


@pytest.fixture
def run(request):
    count = Path("runs")
    count.write_text(str(int(count.read_text()) + 1 if count.exists() else 1))
    yield int(count.read_text())
    if int(count.read_text()) in CRASH:
        request.node.stash[SLURMD_CRASHED] = ["node2"]


def test_a_sweep(run):
    assert run not in FAIL, "sweep exited 1: node2 NODE_FAIL"
"""


def run_on_the_cluster(pytester: pytest.Pytester, fail: set[int],
                       crash: set[int]) -> tuple[pytest.RunResult, int]:
    """The test above under the suite's own protocol: its outcome and how often it ran."""
    pytester.makeconftest("from tests.conftest import pytest_runtest_protocol  # noqa")
    pytester.makepyfile(ON_THE_CLUSTER.format(fail=fail or "set()", crash=crash or "set()"))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-W", "default")
    return result, int((pytester.path / "runs").read_text())


def test_a_test_failed_by_a_slurmd_crash_is_run_once_more(pytester) -> None:
    result, runs = run_on_the_cluster(pytester, fail={1}, crash={1})
    result.assert_outcomes(passed=1, warnings=1)
    assert runs == 2
    result.stdout.fnmatch_lines(["*test_a_sweep failed while slurmd of node2 crashed by "
                                 "itself*run once more*The first run's call said:*",
                                 "*node2 NODE_FAIL*"])


def test_a_failure_without_a_crash_stands(pytester) -> None:
    result, runs = run_on_the_cluster(pytester, fail={1}, crash=set())
    result.assert_outcomes(failed=1)
    assert runs == 1


def test_a_second_crash_fails_the_test(pytester) -> None:
    result, runs = run_on_the_cluster(pytester, fail={1, 2}, crash={1, 2})
    result.assert_outcomes(failed=1, warnings=1)
    assert runs == 2


def test_a_crash_that_failed_nothing_runs_nothing_again(pytester) -> None:
    result, runs = run_on_the_cluster(pytester, fail=set(), crash={1})
    result.assert_outcomes(passed=1)
    assert runs == 1
