"""Fingerprint facts, pure: the script's lines parsed, nodes grouped as Slurm writes them,
degraded links named, the recorded H100 node's GPU state."""

from __future__ import annotations

import os
import subprocess

from perfguard.judge.fingerprint import (
    Change,
    compact_nodes,
    diff,
    flatten,
    links_below_maximum,
)
from reframe_tests.common.fingerprints import SCRIPT, parse
from tests.facts import DATA, H100


def test_script_on_this_host_never_fails_and_reports_basics() -> None:
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0
    [facts] = parse(result.stdout, "abc").values()
    assert facts["kernel"] == subprocess.run(["uname", "-r"], capture_output=True,
                                             text=True).stdout.strip()
    assert facts["spack_lock_hash"] == "abc" and facts["hcas"] == [] and facts["gpus"] == []
    assert facts["boot_id"] == open("/proc/sys/kernel/random/boot_id").read().strip()

def test_parse_hca_and_gpu_facts() -> None:
    text = ("perfguard-fp\tgpu3\thca.mlx5_0.fw\t28.39.1002\n"
            "perfguard-fp\tgpu3\thca.mlx5_0.port1.state\t4: ACTIVE\n"
            "perfguard-fp\tgpu3\tgpu.0.model\tNVIDIA H100 80GB HBM3\n"
            "perfguard-fp\tgpu3\tgpu_driver\t550.54.15\n"
            "srun: warning: something unrelated\n")
    facts = parse(text)["gpu3"]
    assert facts["hcas"] == [{"name": "mlx5_0", "fw": "28.39.1002", "port1.state": "4: ACTIVE"}]
    assert facts["gpus"] == [{"index": 0, "model": "NVIDIA H100 80GB HBM3"}]
    assert flatten(facts)["hca mlx5_0 fw"] == "28.39.1002"

def test_diff_groups_nodes_like_slurm() -> None:
    before = {f"node{i}": {"hca mlx5_0 fw": "28.39"} for i in range(1, 5)}
    after = {**before, "node3": {"hca mlx5_0 fw": "28.41"}, "node4": {"hca mlx5_0 fw": "28.41"}}
    assert diff(before, after) == [Change("hca mlx5_0 fw", "28.39", "28.41", ("node3", "node4"))]
    assert diff(before, after)[0].render() == "hca mlx5_0 fw: 28.39 → 28.41 on node[3-4]"
    assert compact_nodes(["node1", "node2", "node3", "node7", "login"]) == "login,node[1-3,7]"
    assert compact_nodes(["nid001", "nid002", "nid010"]) == "nid[001-002,010]"

def test_links_below_their_maximum_are_named_and_idle_gpu_speed_is_not() -> None:
    healthy = {"gpu 0 pcie_speed": "32.0 GT/s PCIe", "gpu 0 pcie_width": "16",
               "gpu 0 pcie_max_speed": "32.0 GT/s PCIe", "gpu 0 pcie_max_width": "16",
               "hca mlx5_0 pcie_speed": "16.0 GT/s PCIe", "hca mlx5_0 pcie_width": "16",
               "hca mlx5_0 pcie_max_speed": "16.0 GT/s PCIe", "hca mlx5_0 pcie_max_width": "16"}
    nodes = {"node1": healthy,
             "node2": {**healthy, "gpu 0 pcie_width": "8"},
             "node3": {**healthy, "gpu 0 pcie_width": "8",
                       "hca mlx5_0 pcie_speed": "8.0 GT/s PCIe"},
             "node4": {**healthy, "gpu 0 pcie_speed": "2.5 GT/s PCIe"}}  # an idle GPU
    assert [link.render() for link in links_below_maximum(nodes)] == [
        "gpu 0 on node[2-3]: PCIe link 32.0 GT/s x8, maximum 32.0 GT/s x16",
        "hca mlx5_0 on node3: PCIe link 8.0 GT/s x16, maximum 16.0 GT/s x16"]

def test_the_recorded_h100_node_fingerprints_its_gpu_state() -> None:
    """The fingerprint script on the H100 node's recorded nvidia-smi and sysfs."""
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True,
                            env={**os.environ, "PATH": f"{H100 / 'bin'}:{os.environ['PATH']}",
                                 "PERFGUARD_SYSFS": str(H100 / "sys")})
    [facts] = parse(result.stdout).values()
    assert facts["gpus"] == [{
        "index": 0, "model": "NVIDIA H100 80GB HBM3", "bus_id": "00000000:00:06.0",
        "vbios": "96.00.CF.00.01", "persistence": "Enabled", "ecc": "Enabled",
        "ecc_uncorrected": "0", "mig": "Disabled", "pcie_speed": "32.0 GT/s PCIe",
        "pcie_width": "16", "pcie_max_speed": "32.0 GT/s PCIe", "pcie_max_width": "16"}]
    assert (facts["gpu_driver"], facts["cuda_driver"]) == ("580.159.04", "13.0")
    assert (facts["nvidia_peermem"], facts["gdrdrv"]) == ("not loaded", "not loaded")


def test_the_fingerprint_as_it_ran_on_the_h200_reads_its_gpu_state() -> None:
    """fingerprint.sh's output, live on the lent H200 (tests/data/h200/README.md)."""
    [facts] = parse((DATA / "h200" / "fingerprint_sh.txt").read_text()).values()
    [gpu] = facts["gpus"]
    assert (gpu["model"], gpu["vbios"], gpu["pcie_speed"], gpu["pcie_width"]) == (
        "NVIDIA H200", "96.00.A5.00.1A", "32.0 GT/s PCIe", "16")
    assert (facts["gpu_driver"], facts["cuda_driver"]) == ("580.159.04", "13.0")


def test_a_new_boot_id_is_no_change_of_the_environment() -> None:
    """A reboot gives every node a new boot id: stored (it names the host a node is on),
    never diffed, or each reboot would confirm that night's findings."""
    row = {"kernel": "6.1.0", "extra": {"boot_id": "b1", "cuda": "12.4"}}
    rebooted = {"kernel": "6.1.0", "extra": {"boot_id": "b2", "cuda": "12.4"}}
    assert flatten(row) == {"kernel": "6.1.0", "cuda": "12.4"}
    assert diff({"node1": flatten(row)}, {"node1": flatten(rebooted)}) == []
