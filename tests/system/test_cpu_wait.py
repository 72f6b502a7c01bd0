"""A measurement taken while other processes shared the benchmark's CPUs is `disturbed`:
its figures are kept, not judged, and the verdict names the node and its CPU wait.

Real: the job reads the real /proc/pressure/cpu (Linux PSI) at its start and end while
real busy processes run on the host the embedded nodes share; the benchmark's output is
a replayed recording (tests/data/replay), so only the CPU wait differs between the runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, TEST_STATE, create_database, drop_databases, perfguard

LATENCY = "^OsuPt2PtCheck%hca=lo%benchmark=osu_latency%transfer=H-H%placement=inter"
#: Busy processes, niced so that the rest of the suite barely slows: each still waits
#: for a CPU whenever the benchmark's ranks hold them, which is what PSI counts.
HOGS = 6


def run_latency(dsn: str, procfs: str | None) -> subprocess.CompletedProcess:
    env = {"PERFGUARD_REPLAY": str(DATA / "replay")}
    if procfs is None:  # the real /proc of the nodes
        env["PERFGUARD_PROCFS"] = "/proc"
    return perfguard("run", "--dsn", dsn, "-n", LATENCY, state=TEST_STATE, env=env)


@pytest.fixture()
def dsn(layout):
    name, dsn = create_database(layout)
    perfguard("db", "upgrade", "--dsn", dsn, check=True)
    yield dsn
    drop_databases(layout, [name])


@pytest.fixture()
def busy_host():
    if not Path("/proc/pressure/cpu").exists():
        pytest.skip("this kernel has no pressure stall information (/proc/pressure/cpu): "
                    "boot it with psi=1")
    hogs = [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])
            for _ in range(HOGS)]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


def test_a_job_on_contended_cpus_is_disturbed_not_judged(dsn: str, busy_host) -> None:
    result = run_latency(dsn, procfs=None)
    assert result.returncode == 0, result.stdout + result.stderr
    verdict = perfguard("verdict", "--dsn", dsn)
    assert "disturbed" in verdict.stdout, verdict.stdout
    said = " ".join(verdict.stdout.split())  # a long verdict goes on in its column
    assert "CPUs contended: some task waited for a CPU during the job, " in said
    assert "not judged" in said
    assert "measured while other processes shared their CPUs" in result.stdout


def test_the_same_job_on_quiet_cpus_is_judged(dsn: str) -> None:
    result = run_latency(dsn, procfs=str(DATA / "quiet-node"))
    assert result.returncode == 0, result.stdout + result.stderr
    verdict = perfguard("verdict", "--dsn", dsn)
    assert "disturbed" not in verdict.stdout, verdict.stdout


ALLREDUCE_4 = "^OsuCollectiveCheck%hca=lo%benchmark=osu_allreduce$"


def test_a_job_whose_ranks_outnumber_the_cores_is_disturbed_by_what_others_took(
        dsn: str, busy_host) -> None:
    """4 ranks on the 4 virtual nodes of a 2-core host: their own wait is 100 % whatever
    the host does, so PSI concludes nothing; the host's CPU time less the job's own
    (sacct's TotalCPU) shows the busy processes took most of the CPUs: disturbed, named,
    not judged. (These cases were stored as clean history at 100 % wait before.)"""
    env = {"PERFGUARD_REPLAY": str(DATA / "replay"), "PERFGUARD_PROCFS": "/proc"}
    result = perfguard("run", "--dsn", dsn, "-n", ALLREDUCE_4, state=TEST_STATE, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    verdict = perfguard("verdict", "--dsn", dsn)
    assert "disturbed" in verdict.stdout, verdict.stdout
    said = " ".join(verdict.stdout.split())
    assert "CPUs contended: other processes used" in said, verdict.stdout
    assert "the job's 4 ranks outnumber the CPUs" in said, verdict.stdout
