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


def test_a_job_whose_own_ranks_overfill_the_cpus_is_judged_by_what_others_took() -> None:
    """4 ranks on a host of 2 CPUs contend with themselves: the wait is theirs, 99 % on a
    quiet host as on a busy one. What other processes took of the CPUs tells: nothing
    known or 10 % concludes nothing, 80 % disturbs (the 4-, 8-, 16-node cases at 100 %
    wait had been stored as clean history)."""
    readings = {"node1": quiet()}
    assert cpu_wait.disturbance({"node1": 0.99}, ALLOWED, 4, readings, shared_host=True) == ""
    assert cpu_wait.disturbance({"node1": 0.99}, ALLOWED, 4, readings, True, 0.1) == ""
    why = cpu_wait.disturbance({"node1": 0.99}, ALLOWED, 4, readings, True, 0.8)
    assert why.startswith("CPUs contended: other processes used 80% of the host's 2 CPUs "
                          "during the job (/proc/stat less the job's own CPU time from "
                          "Slurm accounting; allowed 50%; the job's 4 ranks outnumber"), why


def test_what_others_took_is_the_hosts_cpu_time_less_the_jobs() -> None:
    """2 s on 2 CPUs: the host used 3.2 CPU-s, the job 1.2 of them: others 2.0 of 4."""
    start = cpu_wait.parse("perfguard-cpu\tnode1\t1000000\t5000\t2\tnode\t10000000\n")
    end = cpu_wait.parse("perfguard-cpu\tnode1\t3000000\t1605000\t2\tnode\t13200000\n")
    assert start["node1"].busy_us == 10_000_000
    assert cpu_wait.others_share(start, end, 1.2) == 0.5
    assert cpu_wait.others_share(start, end, None) is None  # no accounting: unknown
    old_form = cpu_wait.parse(START)  # six fields, before the host's CPU time was read
    assert cpu_wait.others_share(old_form, cpu_wait.parse(END), 1.2) is None


def test_sacct_total_cpu_in_seconds() -> None:
    from reframe_tests.common.launch import total_cpu_seconds

    assert total_cpu_seconds("00:29.867") == 29.867  # as sacct printed it for a 16-node job
    assert total_cpu_seconds("01:02:03") == 3723
    assert total_cpu_seconds("1-00:00:01") == 86401
    assert total_cpu_seconds("") is None


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


def script_reading(tmp_path, proc_cgroup: str, files: dict[str, str]) -> cpu_wait.Reading:
    """cpu_wait.sh against a tree standing in for /proc and /sys: /proc/self/cgroup is
    ``proc_cgroup``, the node's pressure 111 µs, and each file under /sys as given."""
    import subprocess

    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "pressure").mkdir()
    (proc / "self" / "cgroup").write_text(proc_cgroup)
    (proc / "pressure" / "cpu").write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=111\n")
    for where, text in files.items():
        (sys_ / where).parent.mkdir(parents=True, exist_ok=True)
        (sys_ / where).write_text(text)
    out = subprocess.run(["bash", str(cpu_wait.SCRIPT)], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PERFGUARD_PROCFS": str(proc),
                              "PERFGUARD_SYSFS": str(sys_)}, check=True).stdout
    [reading] = cpu_wait.parse(out).values()
    return reading


def run_script(tmp_path, cgroup: str) -> cpu_wait.Reading:
    """The script in ``cgroup`` (v2), with a Slurm job's cgroup and its pressure."""
    return script_reading(tmp_path, f"0::{cgroup}\n", {
        "fs/cgroup/system.slice/slurmstepd.scope/job_7/cpu.pressure":
            "some avg10=1.00 avg60=0.50 avg300=0.10 total=222\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"})


def test_a_step_of_a_slurm_job_reads_its_jobs_cgroup(tmp_path) -> None:
    """Slurm's task/cgroup (v2) puts a step in .../job_ID/step_N/...: the job's pressure."""
    reading = run_script(tmp_path, "/system.slice/slurmstepd.scope/job_7/step_1/user/task_0")
    assert (reading.wait_us, reading.scope) == (222, "job")


def test_outside_a_job_cgroup_the_nodes_pressure_is_read(tmp_path) -> None:
    reading = run_script(tmp_path, "/user.slice/user-0.slice/session-3.scope")
    assert (reading.wait_us, reading.scope) == (111, "node")


def test_the_job_cpu_is_its_benchmark_steps_not_its_helpers() -> None:
    """The readings bracket the benchmark: the fingerprint and CPU-wait helper steps and
    the batch script are not counted (sacct, as the embedded cluster printed it)."""
    from reframe_tests.common.launch import benchmark_cpu_seconds

    listing = ("4|rfm_OsuAllreduceScalingCheck_c8343fd5|00:29.867\n4.batch|batch|00:00.128\n"
               "4.0|perfguard-helper|00:00.683\n4.1|perfguard-helper|00:00.278\n"
               "4.2|osu_allreduce|00:28.588\n4.3|perfguard-helper|00:00.188\n")
    assert benchmark_cpu_seconds(listing) == 28.588
    assert benchmark_cpu_seconds("4|rfm_x|00:00:00\n4.batch|batch|00:00:00\n") is None


def test_the_time_a_cpu_quota_held_the_tasks_back_is_not_contention() -> None:
    """A throttled task is waiting to PSI though its CPU sat idle: 1.6 s of wait in 2 s,
    1.5 s of it the quota's, leaves 5 % (the node's own slowness, judged)."""
    start = cpu_wait.parse("perfguard-cpu\tnode1\t1000000\t5000\t2\tnode\t10000000\t700\n")
    end = cpu_wait.parse("perfguard-cpu\tnode1\t3000000\t1605000\t2\tnode\t11200000\t"
                         "1500700\n")
    assert start["node1"].throttled_us == 700
    assert cpu_wait.shares(start, end) == {"node1": 0.05}
    assert cpu_wait.disturbance(cpu_wait.shares(start, end), ALLOWED, 1, start, False) == ""
    unthrottled = cpu_wait.parse(END)  # six fields: no quota read, the whole wait counts
    assert cpu_wait.shares(cpu_wait.parse(START), unthrottled)["node1"] == 0.8


def test_the_script_reads_the_most_any_cgroup_above_it_was_throttled(tmp_path) -> None:
    """cgroup v1 (the embedded cluster's quota on a node's slurmd, as this host mounts
    it): the step's group and its parent; the most of them, in microseconds."""
    reading = script_reading(tmp_path, "4:memory:/x\n1:cpu:/slow-node1/step\n0::/\n", {
        "fs/cgroup/cpu/slow-node1/step/cpu.stat": "nr_periods 9\nthrottled_time 2000\n",
        "fs/cgroup/cpu/slow-node1/cpu.stat": "nr_throttled 5\nthrottled_time 7000000\n",
        "fs/cgroup/cpu/cpu.stat": "throttled_time 0\n"})
    assert reading.throttled_us == 7000


def test_cgroup_v2_throttled_usec_is_read(tmp_path) -> None:
    reading = script_reading(tmp_path, "0::/system.slice/slurmd.service\n", {
        "fs/cgroup/system.slice/slurmd.service/cpu.stat": "usage_usec 10\nthrottled_usec 4321\n",
        "fs/cgroup/system.slice/cpu.stat": "usage_usec 99\n"})
    assert reading.throttled_us == 4321
    quiet_node = script_reading(tmp_path / "q", "0::/user.slice\n", {})
    assert quiet_node.throttled_us == 0
