"""Each job script against the tool's own rule: the environment each rank gets from Slurm
(tests/tool_rules.py: CUDA_VISIBLE_DEVICES after --gpu-bind, SLURM_LOCALID/PROCID,
NCCL_IB_HCA), then the device and HCA the tool picks from it as its source does, for the
example IB+GPU systems: ndr4x4 (4 GPUs, 4 HCAs), seedfdr (1 GPU, 2 HCAs) and an 8-GPU,
8-HCA node built from the topology model. Each rank on the topology's GPU, no two ranks
of a node on one GPU, NCCL allowed the HCA that shares the GPU's PCIe switch."""

from __future__ import annotations

import pytest
import yaml

from tests import tool_rules
from tests.conftest import TEST_STATE, dry_run_scripts
from tests.facts import DATA

ROOT = DATA.parents[1]


def topology_node(system: str, site=None) -> dict:
    path = (site or ROOT / "site_config") / "systems" / f"{system}.yaml"
    return yaml.safe_load(path.read_text())["partitions"][0]["node"]


def eight_gpu_site() -> object:
    """ndr4x4 doubled: 8 GPUs and 8 HCAs, four of each per socket, GPU k beside HCA k
    (PIX), with PCI bus ids, one site directory of the test state."""
    site = TEST_STATE / "shared" / "eight-gpu-site"
    (site / "systems").mkdir(parents=True, exist_ok=True)
    system = yaml.safe_load((ROOT / "site_config" / "systems" / "ndr4x4.yaml").read_text())
    part = system["partitions"][0]
    names = [f"mlx5_{k}" for k in range(8)]
    part["node"]["hcas"] = [{"name": n, "port": 1, "link_layer": "InfiniBand",
                             "rate_gbps": 400, "numa": k // 4} for k, n in enumerate(names)]
    part["node"]["gpus"] = [
        {"index": k, "model": "NVIDIA H100 80GB HBM3", "numa": k // 4,
         "bus_id": f"00000000:{0x18 + 0x10 * k:02X}:00.0",
         "affinity": {n: "PIX" if j == k else "NODE" if j // 4 == k // 4 else "SYS"
                      for j, n in enumerate(names)}} for k in range(8)]
    system.update(system="hgx8", hostnames=["hgx8n[0-9]+"], partitions=[part])
    (site / "systems" / "hgx8.yaml").write_text(yaml.safe_dump(system, sort_keys=False))
    return site


def nccl_script(system: str) -> tool_rules.JobScript:
    scripts = dry_run_scripts(system, "NcclTestsCheck%test=all_reduce_perf%collnet=off")
    return tool_rules.read_script(scripts["NcclTestsCheck %test=all_reduce_perf %collnet=off"])


def assert_each_rank_on_its_gpu_and_hca(script: tool_rules.JobScript, node: dict) -> None:
    gpus, ports = node["gpus"], [f"{h['name']}:{h['port']}" for h in node["hcas"]]
    gres = node.get("gres_gpus", True)
    assert script.tasks_per_node == len(gpus)
    for node_id in range(script.nodes):
        used = []
        for local in range(script.tasks_per_node):
            env = tool_rules.task_environment(script, node_id, local, gres)
            gpu = tool_rules.nccl_tests_gpu(env, local, len(gpus))
            assert gpu == gpus[local]["index"], f"node {node_id} local rank {local}"
            used.append(gpu)
            beside = [f"{name}:1" for name, level in gpus[local].get("affinity", {}).items()
                      if level == "PIX"]
            assert set(beside) <= set(tool_rules.nccl_ib_hcas(env, ports)), (local, beside)
        assert len(set(used)) == len(used), f"node {node_id}: two ranks share a GPU: {used}"


def test_nccl_tests_ranks_take_the_topologys_gpus_on_ndr4x4() -> None:
    """4 ranks a node under --gpu-bind=map_gpu:0,1,2,3: each task sees one GPU; without
    NCCL_TESTS_DEVICE=0 local rank 1 would ask nccl-tests for device 1 of 1."""
    assert_each_rank_on_its_gpu_and_hca(nccl_script("ndr4x4"), topology_node("ndr4x4"))


def test_nccl_tests_on_seedfdr_one_gpu_two_hcas() -> None:
    script = nccl_script("seedfdr")
    assert_each_rank_on_its_gpu_and_hca(script, topology_node("seedfdr"))


def test_nccl_tests_ranks_take_the_topologys_gpus_on_an_eight_gpu_node(monkeypatch) -> None:
    site = eight_gpu_site()
    monkeypatch.setenv("PERFGUARD_SITE", str(site))
    assert_each_rank_on_its_gpu_and_hca(nccl_script("hgx8"), topology_node("hgx8", site))


def test_the_rule_refuses_a_local_rank_past_the_visible_gpus() -> None:
    """The model itself, against the recording: each rank seeing one GPU and no
    NCCL_TESTS_DEVICE is nccl-tests' 'Invalid number of GPUs' for local rank 1."""
    with pytest.raises(tool_rules.ToolRefuses, match="2 requested but only 1 were found"):
        tool_rules.nccl_tests_gpu({"CUDA_VISIBLE_DEVICES": "1"}, 1, 4)
    assert tool_rules.nccl_tests_gpu({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, 2, 4) == 2


def test_omb_device_buffers_take_the_topologys_gpu_on_ndr4x4() -> None:
    """OMB takes SLURM_PROCID (the global rank) modulo the visible GPUs under srun: rank 1
    of a two-node D-D pair is on node 2; with its one bound GPU it is still the chosen
    one."""
    name = ("OsuPt2PtCheck%hca=mlx5_2%benchmark=osu_bw%transfer=D-D%placement=inter"
            )
    scripts = dry_run_scripts("ndr4x4", name)
    lines = next(iter(scripts.values()))
    script = tool_rules.read_script(lines)
    node = topology_node("ndr4x4")
    for node_id in range(script.nodes):
        env = tool_rules.task_environment(script, node_id, 0, True)
        assert tool_rules.omb_gpu(env, len(node["gpus"])) == 2  # mlx5_2's PIX GPU
