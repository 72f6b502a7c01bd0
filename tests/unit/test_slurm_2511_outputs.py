"""What Slurm 25.11 printed on the embedded cluster (tests/data/slurm-25.11, its README
says how each file was made), read by the parsers the checks and the cluster use."""

from __future__ import annotations

from pathlib import Path

from perfguard.cluster.layout import TOPOLOGY_HEADER, ClusterLayout
from perfguard.cluster.services import multiple_slurmd
from reframe_tests.common.binding import SrunBinding, binding_errors, srun_masks
from reframe_tests.common.launch import (
    NODE_FAILURE,
    first_rank_that_died,
    job_problem,
    sacct_steps,
    whole_node_steps,
)
from tests.facts import DATA

SLURM_2511 = DATA / "slurm-25.11"


def read(name: str) -> str:
    return (SLURM_2511 / name).read_text()


def test_multiple_slurmd_is_read_as_either_version_prints_it() -> None:
    """25.11 prints "MULTIPLE_SLURMD = yes" where 22.05 printed "Yes"; a build without it
    prints no such line."""
    config = read("scontrol_show_config.txt")
    assert "MULTIPLE_SLURMD         = yes" in config
    assert multiple_slurmd(config)
    assert multiple_slurmd("MULTIPLE_SLURMD         = Yes\n")  # Debian's 22.05
    assert not multiple_slurmd("\n".join(line for line in config.splitlines()
                                         if not line.startswith("MULTIPLE_SLURMD")))


def test_perfguards_topology_file_is_not_the_one_slurm_reads(tmp_path: Path) -> None:
    """Slurm 24.11+ reads etc/topology.yaml beside slurm.conf as its own topology: 25.11's
    slurmctld died on perfguard's ("Failed to initialize topology plugin"). A file of that
    name perfguard wrote earlier goes at the next start; anyone else's stays."""
    layout = ClusterLayout(tmp_path)
    layout.etc.mkdir(parents=True)
    layout.legacy_topology_file.write_text(TOPOLOGY_HEADER + "\nsystem: local\n")
    layout.save()
    assert layout.topology_file.name != "topology.yaml"
    assert layout.topology_file.read_text().startswith(TOPOLOGY_HEADER)
    assert not layout.legacy_topology_file.exists()
    layout.legacy_topology_file.write_text("- topology: site\n")  # the admin's own
    layout.save()
    assert layout.legacy_topology_file.read_text() == "- topology: site\n"


def test_srun_verbose_binding_of_2511() -> None:
    """Two steps of one exclusive job: map_cpu:1,0 with 2 ranks a node ("MAP " padded),
    then cores with one rank a node (MASK)."""
    lines = read("srun_cpu_bind_verbose.err").splitlines()
    mapped = "\n".join(lines[:4])
    assert srun_masks(mapped) == {0: SrunBinding("node1", 0, 0x2), 1: SrunBinding("node1", 1, 0x1),
                                  2: SrunBinding("node2", 0, 0x2), 3: SrunBinding("node2", 1, 0x1)}
    assert binding_errors(mapped, 4, [1, 0]) == []
    assert binding_errors(mapped, 4, [0, 1]) == [
        "task 0 (local rank 0) on node1: mask 0x2, expected 0x1",
        "task 1 (local rank 1) on node1: mask 0x1, expected 0x2",
        "task 2 (local rank 0) on node2: mask 0x2, expected 0x1",
        "task 3 (local rank 1) on node2: mask 0x1, expected 0x2"]
    assert srun_masks("\n".join(lines[4:])) == {1: SrunBinding("node2", 0, 0x1),
                                                0: SrunBinding("node1", 0, 0x1)}


def test_job_ends_of_2511_are_named() -> None:
    """sacct's rows for a failed batch script, a time limit and a crashed rank (25.11: the
    crashed step is CANCELLED 0:15 by --kill-on-bad-exit, the job FAILED 143)."""
    failed = sacct_steps(read("sacct_failed.txt"))
    assert failed[0] == ("7", "failed", "FAILED", "17:0")
    assert job_problem("7", "FAILED", 17, failed) == "job 7 FAILED with exit code 17"
    timeout = sacct_steps(read("sacct_timeout.txt"))
    assert job_problem("8", "TIMEOUT", 0, timeout).startswith("job 8 TIMEOUT with exit code 0")
    crash = sacct_steps(read("sacct_crash.txt"))
    assert job_problem("6", "FAILED", 143, crash) == (
        "job 6 FAILED with exit code 143; step 6.0 (bash) CANCELLED 0:15")
    assert sacct_steps(read("sacct_bind.txt"))[-1] == ("5.1", "true", "COMPLETED", "0:0")
    assert job_problem("5", "COMPLETED", 0, sacct_steps(read("sacct_bind.txt"))) is None


def test_the_rank_that_died_is_named_from_2511_srun() -> None:
    assert first_rank_that_died(str(SLURM_2511 / "srun_task_died.err")) == \
        "rank 0 on node1: Segmentation fault"
    # a node whose slurmd and tasks were killed: srun saw the task die before the node
    killed = str(SLURM_2511 / "srun_node_killed.err")
    assert first_rank_that_died(killed) == "rank 1 on node2: Killed"
    assert NODE_FAILURE.findall(read("srun_node_killed.err")) == []


def test_a_pinned_job_lets_its_steps_own_their_nodes() -> None:
    """25.11's srun refused a map naming a core outside the one the job's inherited
    SLURM_CPUS_PER_TASK gave the step; a pinned job unsets it, an unpinned one keeps it."""
    refused = read("srun_map_cpu_refused.err")
    assert "CPU binding outside of job step allocation, allocated CPUs are: 0x1." in refused
    assert whole_node_steps("map_cpu:1") == ["unset SLURM_CPUS_PER_TASK SLURM_TRES_PER_TASK"]
    assert whole_node_steps("mask_cpu:0x2") == whole_node_steps("map_cpu:0,1")
    assert whole_node_steps("cores") == []
