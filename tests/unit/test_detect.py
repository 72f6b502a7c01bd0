"""Topology detection parsers on real command outputs, and the command on this host."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from perfguard.contract.topology import load_system, parse_cpu_list
from perfguard.errors import PerfguardError
from perfguard.site.detect import (
    Detected,
    as_topology_yaml,
    parse_ibv_devinfo,
    parse_lscpu,
    parse_nvidia_query,
    parse_nvidia_topo,
)
from tests.conftest import DATA, perfguard

TOPO = DATA / "topology"
H200 = DATA / "h200"
ROOT = Path(__file__).resolve().parents[2]


def test_lscpu_of_this_host() -> None:
    numa = parse_lscpu((TOPO / "lscpu_p_this_host.txt").read_text())
    assert numa == {0: [0, 1]}


def test_lscpu_keeps_one_thread_per_core() -> None:
    text = "# CPU,Core,Socket,Node\n0,0,0,0\n1,1,0,0\n2,0,0,0\n3,1,0,0\n4,2,1,1\n5,2,1,1\n"
    assert parse_lscpu(text) == {0: [0, 1], 1: [4]}


def test_ibv_devinfo_ports() -> None:
    ports = parse_ibv_devinfo((TOPO / "ibv_devinfo_connectx7_roce_ib.txt").read_text())
    assert [(p["name"], p["port"], p["state"], p["link_layer"], p["fw_ver"]) for p in ports] == [
        ("mlx5_12", 1, "PORT_DOWN", "Ethernet", "22.38.1900"),
        ("mlx5_2", 1, "PORT_ACTIVE", "Ethernet", "28.42.1000")]


def test_ibv_devinfo_verbose_rate() -> None:
    text = ("hca_id:\tmlx5_0\n\tfw_ver:\t\t\t\t20.31.1014\n\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_width:\t\t4X (2)\n"
            "\t\t\tactive_speed:\t\t25.0 Gbps (32)\n\t\t\tlink_layer:\t\tInfiniBand\n")
    [port] = parse_ibv_devinfo(text)
    assert port["rate_gbps"] == 100.0 and port["link_layer"] == "InfiniBand"


def test_nvidia_topo_gpu_nic_affinity() -> None:
    gpus = parse_nvidia_topo((TOPO / "nvidia_smi_topo_8gpu_9nic.txt").read_text())
    assert [g["index"] for g in gpus] == [0, 1, 2, 3, 4, 5, 6]
    assert gpus[0]["affinity"]["NIC2"] == "PIX" and gpus[4]["affinity"]["NIC1"] == "PIX"
    assert gpus[0]["numa"] == 0 and gpus[6]["numa"] == 1
    assert gpus[4]["cpus"][:2] == [48, 49]


def test_nvidia_topo_of_the_recorded_h100_node() -> None:
    """Driver 580 through a pipe: an underlined, tab-separated header with a GPU NUMA ID
    column; the data row is a data row, not the header."""
    [gpu] = parse_nvidia_topo((TOPO / "nvidia_smi_topo_m_h100_driver580.txt").read_text())
    assert gpu == {"index": 0, "affinity": {}, "numa": 0, "cpus": list(range(16))}


def test_nvidia_topo_of_eight_gpus_as_driver_580_prints_it() -> None:
    """The 8-GPU matrix in driver 580's format reads as the older format does, the NIC
    legend naming the HCAs."""
    old = parse_nvidia_topo((TOPO / "nvidia_smi_topo_8gpu_9nic.txt").read_text())
    new = parse_nvidia_topo((TOPO / "nvidia_smi_topo_8gpu_9nic_driver580.txt").read_text())
    assert [(g["index"], g["numa"], g["cpus"]) for g in new] == \
        [(g["index"], g["numa"], g["cpus"]) for g in old]
    assert [{name.replace("mlx5_", "NIC"): level for name, level in g["affinity"].items()}
            for g in new] == [g["affinity"] for g in old]
    assert new[0]["affinity"]["mlx5_2"] == "PIX" and new[4]["affinity"]["mlx5_1"] == "PIX"


def test_gpu_rows_without_a_header_are_an_error_naming_the_input() -> None:
    rows = "GPU0\t X \tNV8\t0-47\t0\nGPU1\tNV8\t X \t48-95\t1\n"
    with pytest.raises(PerfguardError, match=r"nvidia-smi topo -m: GPU rows but no header"):
        parse_nvidia_topo(rows)
    assert parse_nvidia_topo("No devices were found\n") == []


def test_the_gpu_model_comes_from_nvidia_smi_query() -> None:
    models = parse_nvidia_query((TOPO / "nvidia_smi_query_gpu_h100.csv").read_text())
    assert models == {0: {"model": "NVIDIA H100 80GB HBM3", "bus_id": "00000000:00:06.0"}}
    found = Detected(numa={0: list(range(16))})
    found.gpus = [{**gpu, **models[gpu["index"]]} for gpu in parse_nvidia_topo(
        (TOPO / "nvidia_smi_topo_m_h100_driver580.txt").read_text())]
    node = yaml.safe_load(as_topology_yaml(found, "h100", "gpu", "openmpi"))[
        "partitions"][0]["node"]
    assert node["gpus"] == [{"index": 0, "model": "NVIDIA H100 80GB HBM3",
                             "bus_id": "00000000:00:06.0", "numa": 0, "affinity": {}}]


def test_nvidia_topo_nic_legend_names_hcas() -> None:
    text = ("\tGPU0\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tPIX\tSYS\t0-13\t0\n"
            "NIC0\tPIX\t X \tSYS\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")
    [gpu] = parse_nvidia_topo(text)
    assert gpu["affinity"] == {"mlx5_0": "PIX", "mlx5_1": "SYS"}


def test_detect_on_this_host_says_what_is_missing() -> None:
    result = perfguard("topology", "detect", "--system", "here")
    assert result.returncode == 0
    assert "no RDMA device" in result.stderr and "nvidia-smi not available" in result.stderr
    document = yaml.safe_load(result.stdout)
    node = document["partitions"][0]["node"]
    lscpu = parse_lscpu(subprocess.run(["lscpu", "-p"], capture_output=True, text=True).stdout)
    assert {d["id"]: list(parse_cpu_list(d["cpus"], "")) for d in node["numa"]} == lscpu
    assert node["hcas"] == [] and node["gpus"] == []


def test_detect_runs_from_a_plain_checkout_with_pyyaml_alone(tmp_path: Path) -> None:
    """docs/topology.md: `python3 -m perfguard.cli topology detect` on a node where perfguard
    is not installed: no site packages but PyYAML (copied alone), the checkout on the path."""
    shutil.copytree(Path(yaml.__file__).parent, tmp_path / "yaml")
    result = subprocess.run(
        [sys.executable, "-S", "-m", "perfguard.cli", "topology", "detect", "--system", "bare"],
        capture_output=True, text=True, cwd=ROOT,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": f"{ROOT}:{tmp_path}"})
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["system"] == "bare"


def test_detect_as_it_ran_on_the_h200_is_a_topology_perfguard_loads() -> None:
    """`perfguard topology detect`, live on the lent H200 (tests/data/h200): its GPU with
    model and bus id, no HCA, and the file loads; the parsers give the same GPU from that
    node's recorded nvidia-smi."""
    system = load_system(H200 / "topology_detect.yaml")
    [gpu] = system.partitions[0].node.gpus
    assert (gpu.model, gpu.bus_id, gpu.numa) == ("NVIDIA H200", "00000000:00:06.0", 0)
    assert system.partitions[0].node.hcas == ()
    [parsed] = parse_nvidia_topo((H200 / "nvidia_smi_topo_m_1gpu.txt").read_text())
    models = parse_nvidia_query((H200 / "nvidia_smi_query_gpu.csv").read_text())
    assert {**parsed, **models[0]} == {"index": 0, "affinity": {}, "numa": 0,
                                       "cpus": list(range(16)), "model": "NVIDIA H200",
                                       "bus_id": "00000000:00:06.0"}


def test_memory_and_cpus_are_what_slurm_gives_a_job_with_the_nodes_own_as_a_comment() -> None:
    """In a Slurm job, memory_mib is the node's RealMemory (the embedded nodes declare 2048
    MiB on a 24 GiB host: Himeno XL, 14,407 MiB a node, would be killed), the CPUs Slurm
    keeps (CPUSpecList) leave node.numa, and the node's own totals are a comment."""
    from perfguard.site.detect import parse_scontrol_node, slurm_gives

    node = parse_scontrol_node((TOPO / "scontrol_show_node_embedded.txt").read_text())
    assert (node["NodeName"], node["RealMemory"], node["CPUEfctv"]) == ("node1", "2048", "2")
    found = Detected(numa={0: [0], 1: [1]}, memory_mib=24105, node_memory_mib=24105)
    slurm_gives(found, node)
    written = as_topology_yaml(found, "mine", "compute")
    assert yaml.safe_load(written)["partitions"][0]["node"]["memory_mib"] == 2048
    assert "# node node1: MemTotal 24105 MiB, 2 core(s) (CPUs 0-1); Slurm gives a job " \
           "RealMemory 2048 MiB and 2 CPU(s)\n" in written
    kept = Detected(numa={0: [0, 1, 2, 3]}, memory_mib=515000, node_memory_mib=515000)
    slurm_gives(kept, {"NodeName": "cn7", "RealMemory": "500000", "CPUTot": "4",
                       "CPUEfctv": "3", "CPUSpecList": "3"})
    assert kept.numa == {0: [0, 1, 2]} and kept.memory_mib == 500000
    outside = Detected(numa={0: [0, 1]}, memory_mib=24105, node_memory_mib=24105)
    slurm_gives(outside, {})
    assert outside.memory_mib == 24105 and "not in a Slurm job" in outside.facts[0]


def test_nodes_of_one_address_are_slurmd_of_one_host() -> None:
    """`site init` learns from Slurm's NodeAddr that a partition's nodes share one host
    (the embedded cluster's virtual nodes: one 127.0.0.1), never from one node alone."""
    from perfguard.site.slurm import SlurmNodes

    found = SlurmNodes({"compute": {"node1", "node2"}, "service": {"service1"},
                        "batch": {"a1", "a2"}}, {},
                       {"node1": "127.0.0.1", "node2": "127.0.0.1", "service1": "127.0.0.1",
                        "a1": "10.0.0.1", "a2": "10.0.0.2"})
    assert found.shares_host("compute")
    assert not found.shares_host("service") and not found.shares_host("batch")


def test_detect_writes_what_the_nodes_stack_offers(tmp_path: Path) -> None:
    """Debian's Open MPI has no coll/ucc and no CUDA, so a SHARP variant is known not to
    run here; an NCCL net plugin on the library path is found as NCCL's dlopen finds it."""
    result = perfguard("topology", "detect", "--system", "here")
    provider = yaml.safe_load(result.stdout)["partitions"][0]["binary_provider"]
    assert provider == {"kind": "system", "offers": []}, provider
    (tmp_path / "libnccl-net.so").touch()
    result = perfguard("topology", "detect", "--system", "here",
                       env={"LD_LIBRARY_PATH": str(tmp_path)})
    provider = yaml.safe_load(result.stdout)["partitions"][0]["binary_provider"]
    assert provider == {"kind": "system", "offers": ["nccl-collnet"]}, provider
