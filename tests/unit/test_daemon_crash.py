"""The suite's teardown tells a daemon that crashed by itself from one a test left dead."""

from perfguard.cluster import services
from perfguard.cluster.layout import ClusterLayout
from tests.conftest import GLIBC_ABORT, aborted_by_glibc, log_sizes, written_since

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
