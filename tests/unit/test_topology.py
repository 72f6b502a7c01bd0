"""Topology files: the shipped examples load, pinning decisions, and clear errors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from perfguard.contract.topology import load_system, load_systems, parse_cpu_list
from perfguard.errors import PerfguardError
from perfguard.paths import site_folder

SYSTEMS = site_folder("systems")[0].parent


def test_examples_load_and_derive_pinning() -> None:
    seed = load_system(SYSTEMS / "seedfdr.yaml").partition("gpu")
    pix, phb = seed.node.hca("mlx4_0"), seed.node.hca("mlx4_1")
    assert seed.node.closest_gpu(pix).index == 0 and seed.node.closest_gpu(phb).index == 0
    assert round(pix.data_rate_gbps, 1) == 54.5  # FDR: 56 Gb/s signalling, 64b/66b
    ndr = load_system(SYSTEMS / "ndr4x4.yaml").partition("gpu")
    for name, gpu, first_core in [("mlx5_0", 0, 0), ("mlx5_1", 1, 0), ("mlx5_2", 2, 48),
                                  ("mlx5_3", 3, 48)]:
        hca = ndr.node.hca(name)
        assert ndr.node.closest_gpu(hca).index == gpu
        assert ndr.node.cores_near(hca, 2) == [first_core, first_core + 1]
    assert "hca_mlx5_3" in ndr.features and "gpu" in ndr.features and "ib" in ndr.features
    assert {s.name for s in load_systems(site_folder("systems"))} >= {"seedfdr", "ndr4x4"}


def test_cpu_lists() -> None:
    assert parse_cpu_list("0-2,8,10-11", "x") == (0, 1, 2, 8, 10, 11)
    with pytest.raises(PerfguardError, match="bad CPU list"):
        parse_cpu_list("0-x", "here")


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("numa: 0}", "numa: 7}", 1), "on NUMA 7, which the node does not have"),
    (lambda t: t.replace("mlx4_0: PIX", "mlx4_9: PIX"), r"unknown HCAs \['mlx4_9'\]"),
    (lambda t: t.replace("mlx4_0: PIX", "mlx4_0: NEAR"),
     r"partitions\[0\].node.gpus\[0\].affinity.mlx4_0: 'NEAR' is not one of"),
    (lambda t: t.replace("    mpi: openmpi-openib\n", ""), r"partitions\[0\]: missing 'mpi'"),
    (lambda t: t.replace("max_jobs:", "max_job:"),
     r"partitions\[0\].max_job: unknown key \(did you mean 'max_jobs'\?\)"),
    (lambda t: t.replace("cpus: 0-13", "cpus: 0-1x"), r"numa\[0\].cpus: bad CPU list '0-1x'"),
    (lambda t: t.replace("kind: spack", "kind: conda"), "binary_provider.kind"),
    (lambda t: t + "  - [oops\n", "not valid YAML for a topology file"),
])
def test_bad_topology_names_file_and_place(tmp_path: Path, edit, message: str) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(edit((SYSTEMS / "seedfdr.yaml").read_text()))
    with pytest.raises(PerfguardError, match=message) as info:
        load_system(broken)
    assert str(broken) in str(info.value)


def test_line_rates_by_encoding() -> None:
    """QDR is 8b/10b; FDR10 (64b/66b at 10.3125 Gbaud) carries its nominal 40 Gb/s; FDR
    (64b/66b at 14.0625 Gbaud) 54.5; EDR and later report the data rate."""
    from perfguard.contract.topology import Hca

    def rate(gbps: float, speed: str = "") -> float:
        return round(Hca("mlx", 1, "InfiniBand", gbps, 0, speed=speed).data_rate_gbps, 2)

    assert rate(40, "QDR") == rate(40) == 32.0
    assert rate(40, "FDR10") == 40.0
    assert rate(56, "FDR") == rate(56) == 54.55
    assert rate(100, "EDR") == 100.0 and rate(400, "NDR") == 400.0


def test_gpudirect_is_expected_where_every_gpu_shares_a_switch_with_an_hca() -> None:
    """ndr4x4: each H100 is PIX to its own NDR port; seedfdr's one V100 is PIX to mlx4_0
    (the other port is PHB: GDR still has its switch-local HCA); no GPUs, no GDR."""
    ndr = load_system(SYSTEMS / "ndr4x4.yaml").partition("gpu").node
    seed = load_system(SYSTEMS / "seedfdr.yaml").partition("gpu").node
    assert ndr.every_gpu_shares_a_switch_with_an_hca()
    assert seed.every_gpu_shares_a_switch_with_an_hca()
    behind_the_host_bridge = replace(seed.gpus[0], affinity={"mlx4_0": "PHB", "mlx4_1": "PHB"})
    assert not replace(seed, gpus=(behind_the_host_bridge,)).every_gpu_shares_a_switch_with_an_hca()
    assert not replace(seed, gpus=()).every_gpu_shares_a_switch_with_an_hca()


def test_a_system_says_what_its_night_costs(tmp_path: Path) -> None:
    """`check_variables` of a systems file become ReFrame's ``-S`` for every run on the
    system, before the command's own (which win), a list comma-joined; the embedded
    cluster's file and `site init` on virtual nodes carry the same table."""
    from perfguard.cluster.layout import SHARED_HOST_CHECK_VARIABLES, ClusterLayout
    from perfguard.contract.topology import find_system
    from perfguard.run.reframe import RunRequest, reframe_command

    text = (SYSTEMS / "seedfdr.yaml").read_text().replace(
        "system: seedfdr\n", "system: seedfdr\ncheck_variables:\n"
        "  UcxPerftestCheck.iterations: 200\n  UcxPerftestCheck.message_sizes: [8, 65536]\n"
        "  GpcnetCheck.load_test_on_shared_cores: true\n", 1)
    (tmp_path / "seedfdr.yaml").write_text(text)
    system = find_system([tmp_path / "seedfdr.yaml"], "seedfdr:gpu")
    assert system.setvars == ("UcxPerftestCheck.iterations=200",
                              "UcxPerftestCheck.message_sizes=8,65536",
                              "GpcnetCheck.load_test_on_shared_cores=true")
    request = RunRequest(system="seedfdr", setvars=(*system.setvars,
                                                   "UcxPerftestCheck.iterations=5"))
    command = reframe_command(request, tmp_path / "r.json", tmp_path)
    given = [command[i + 1] for i, word in enumerate(command) if word == "-S"]
    assert given[0] == "UcxPerftestCheck.iterations=200"
    assert given[-1] == "UcxPerftestCheck.iterations=5"  # ReFrame: the last one wins
    assert find_system([tmp_path / "seedfdr.yaml"], "other") is None
    embedded = ClusterLayout(tmp_path / "state").topology()
    assert embedded["check_variables"] == SHARED_HOST_CHECK_VARIABLES
    assert SHARED_HOST_CHECK_VARIABLES["UcxPerftestCheck.iterations"] == "200"


def test_a_check_variable_not_named_check_dot_variable_is_an_error(tmp_path: Path) -> None:
    text = (SYSTEMS / "seedfdr.yaml").read_text().replace(
        "system: seedfdr\n", "system: seedfdr\ncheck_variables:\n  iterations 200: 1\n", 1)
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(PerfguardError, match="check_variables: .iterations 200. does not match"):
        load_system(tmp_path / "bad.yaml")
