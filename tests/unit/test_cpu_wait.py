"""The CPU wait of a job from two PSI readings, and when it disturbs the figures."""

from __future__ import annotations

from perfguard.store.report import DISTURBED_RESULT, DISTURBED_VARIABLE, _checked_testcase
from reframe_tests.common import cpu_wait

START = ("perfguard-cpu\tnode1\t1000000\t5000\t2\tnode\n"
         "perfguard-cpu\tnode2\t1000000\t\t2\tnode\n"  # no PSI on node2's kernel
         "noise\n")
END = ("perfguard-cpu\tnode1\t3000000\t1605000\t2\tnode\n"
       "perfguard-cpu\tnode2\t3000000\t\t2\tnode\n")


ALLOWED = {"node": 0.5, "job": 0.2}


def quiet(cpus: int = 2, scope: str = "node") -> cpu_wait.Reading:
    return cpu_wait.Reading(0, 0, cpus, scope)


def test_the_share_of_the_job_some_task_waited() -> None:
    start, end = cpu_wait.parse(START), cpu_wait.parse(END)
    assert start["node1"] == cpu_wait.Reading(1000000, 5000, 2, "node")
    # 1.6 s of waiting in 2 s; node2 without PSI concludes nothing
    assert cpu_wait.shares(start, end) == {"node1": 0.8}


def test_contended_cpus_are_named_with_the_share() -> None:
    why = cpu_wait.disturbance({"node1": 0.8, "node2": 0.1}, ALLOWED, 1,
                               {"node1": quiet(), "node2": quiet()}, shared_host=False)
    assert why.startswith("CPUs contended: some task waited for a CPU during the job, 80% "
                          "on node1 (Linux PSI, /proc/pressure/cpu; allowed 50%)")
    assert "node2" not in why and "on the node shared" in why


def test_the_jobs_own_cgroup_is_named_where_it_was_read() -> None:
    """A stray process on one of the ranks' two cores: 33 % in the job's cgroup (measured
    on a 16-core node), under the node's bar of 50 % but over the job's of 20 %."""
    why = cpu_wait.disturbance({"n7": 0.33}, ALLOWED, 2, {"n7": quiet(16, "job")},
                               shared_host=False)
    assert why.startswith("CPUs contended: a task of the job waited for a CPU during the "
                          "job, 33% on n7 (Linux PSI, the job's cgroup; allowed 20%)")


def test_a_job_whose_own_ranks_overfill_the_cpus_concludes_nothing() -> None:
    """4 ranks on a host of 2 CPUs contend with themselves: the wait is theirs."""
    assert cpu_wait.disturbance({"node1": 0.99}, ALLOWED, 4, {"node1": quiet()},
                                shared_host=True) == ""


def test_a_quiet_job_is_not_disturbed() -> None:
    assert cpu_wait.disturbance({"node1": 0.2}, ALLOWED, 1, {"node1": quiet()},
                                shared_host=False) == ""


def case(**extra) -> dict:
    return {"name": "OsuPt2PtCheck %hca=lo", "system": "local:compute", "result": "pass",
            "perfvalues": {"local:compute:latency": [1.8, 0, None, None, "us", "pass"]},
            **extra}


def test_a_disturbed_measurement_is_stored_as_such_with_its_reason() -> None:
    tc = _checked_testcase(case(**{DISTURBED_VARIABLE: "CPUs contended: node1 80%"}), "t", {})
    assert (tc.result, tc.fail_reason) == (DISTURBED_RESULT, "CPUs contended: node1 80%")


def test_a_failed_test_case_stays_failed_whatever_its_cpus() -> None:
    tc = _checked_testcase(case(result="fail", fail_phase="sanity", fail_reason="no table",
                                **{DISTURBED_VARIABLE: "CPUs contended: node1 80%"}), "t", {})
    assert (tc.result, tc.fail_reason) == ("fail", "no table")


def test_a_test_case_without_figures_is_not_disturbed() -> None:
    """MPI hello proves a binding and measures nothing: its pass stands."""
    tc = _checked_testcase(case(perfvalues={}, **{DISTURBED_VARIABLE: "CPUs contended"}), "t", {})
    assert tc.result == "pass"


def run_script(tmp_path, cgroup: str) -> cpu_wait.Reading:
    """cpu_wait.sh against a tree standing in for /proc and /sys."""
    import subprocess

    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "pressure").mkdir()
    (proc / "self" / "cgroup").write_text(f"0::{cgroup}\n")
    (proc / "pressure" / "cpu").write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=111\n")
    job = sys_ / "fs" / "cgroup" / "system.slice" / "slurmstepd.scope" / "job_7"
    job.mkdir(parents=True)
    (job / "cpu.pressure").write_text("some avg10=1.00 avg60=0.50 avg300=0.10 total=222\n"
                                      "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    out = subprocess.run(["bash", str(cpu_wait.SCRIPT)], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PERFGUARD_PROCFS": str(proc),
                              "PERFGUARD_SYSFS": str(sys_)}, check=True).stdout
    [reading] = cpu_wait.parse(out).values()
    return reading


def test_a_step_of_a_slurm_job_reads_its_jobs_cgroup(tmp_path) -> None:
    """Slurm's task/cgroup (v2) puts a step in .../job_ID/step_N/...: the job's pressure."""
    reading = run_script(tmp_path, "/system.slice/slurmstepd.scope/job_7/step_1/user/task_0")
    assert (reading.wait_us, reading.scope) == (222, "job")


def test_outside_a_job_cgroup_the_nodes_pressure_is_read(tmp_path) -> None:
    reading = run_script(tmp_path, "/user.slice/user-0.slice/session-3.scope")
    assert (reading.wait_us, reading.scope) == (111, "node")
