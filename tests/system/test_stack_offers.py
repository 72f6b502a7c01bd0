"""Stacks and checks agree: a variant that needs what its partition's binaries lack
(Open MPI's coll/ucc, UCC's SHARP TL, an NCCL net plugin) is skipped before submission,
saying what is missing and how to add it, never test-failed on a healthy fabric.

The stack ndr4x4 had before (``openmpi fabrics=ucx``: Spack's recipe configures it
``--without-ucc``; no net plugin) is a site's ndr4x4 whose prefix offers only a CUDA-aware
MPI: `perfguard checks` says which variants run and why the rest skip, and the software
baseline's job asks nothing of a coll/ucc that is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from perfguard.paths import DEFAULTS_DIR
from tests.conftest import perfguard

WITHOUT_UCC = {"offers": ["cuda-mpi"]}


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """`perfguard checks --system ndr4x4` of a site whose stack lacks UCC and a plugin."""
    site = tmp_path_factory.mktemp("site")
    topology = yaml.safe_load((DEFAULTS_DIR / "systems" / "ndr4x4.yaml").read_text())
    topology["partitions"][0]["binary_provider"].update(WITHOUT_UCC)
    (site / "systems").mkdir()
    (site / "systems" / "ndr4x4.yaml").write_text(yaml.safe_dump(topology))
    state = tmp_path_factory.mktemp("state")
    result = perfguard("--site", str(site), "checks", "--system", "ndr4x4", "-n",
                       "OsuSharpCheck|NcclTestsCheck|OsuAllreduceScalingCheck", state=state)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout, state


def verdicts(stdout: str) -> dict[str, str]:
    """Variant → 'runs' or 'skipped: why', from `perfguard checks`' lines."""
    found = {}
    for line in stdout.splitlines():
        match = re.match(r"^(\S+(?: %\S+)*)\s+gpu/gnu-openmpi\s+(.*)$", line)
        if match:
            found[match[1]] = match[2]
    return found


def test_sharp_and_collnet_skip_naming_what_the_stack_lacks(listed) -> None:
    said = verdicts(listed[0])
    sharp_on = said["OsuSharpCheck %benchmark=osu_allreduce %hca=mlx5_0 %sharp=on"]
    assert sharp_on == (
        "skipped: SHARP asked for, but the binaries of ndr4x4:gpu (prefix "
        "/opt/perfguard/gcc-openmpi-ucx-cuda) lack mpi-ucc, ucc-sharp: Open MPI's coll/ucc "
        "component (collectives through UCC): build Open MPI with UCC (Spack: openmpi "
        "fabrics=ucx,ucc; or load HPC-X's hpcx-ompi module), check with `ompi_info | grep "
        "coll:ucc`; UCC's SHARP TL (in-network collectives): build UCC against the SHARP "
        "library of MLNX_OFED/HPC-X (`ucc_info -s` lists tl/sharp; docs/spack.md); then "
        "list it in binary_provider's offers (topology file)"), sharp_on
    collnet = said["NcclTestsCheck %collnet=on %test=all_reduce_perf"]
    assert collnet.startswith("skipped: CollNet asked for, but the binaries of ndr4x4:gpu "
                              "(prefix /opt/perfguard/gcc-openmpi-ucx-cuda) lack "
                              "nccl-collnet: an NCCL net plugin with CollNet"), collnet
    # what needs nothing the stack lacks still runs: the software baselines, CollNet off
    for runs in ("OsuSharpCheck %benchmark=osu_allreduce %hca=mlx5_0 %sharp=off",
                 "NcclTestsCheck %collnet=off %test=all_reduce_perf",
                 "OsuAllreduceScalingCheck %hca=mlx5_0 %nodes=4 %sharp=off"):
        assert said[runs] == "runs", (runs, said.get(runs))
    assert said["OsuAllreduceScalingCheck %hca=mlx5_0 %nodes=4 %sharp=on"].startswith(
        "skipped: SHARP asked for, but the binaries of ndr4x4:gpu")


def test_the_software_baseline_asks_nothing_of_a_missing_coll_ucc(listed) -> None:
    """Without coll/ucc the baseline is the MPI's own collectives: no UCC knob in any job
    script; both curves of the scaling pair reduce floats (what SHARP reduces)."""
    _, state = listed
    scripts = [path.read_text() for path in state.glob("shared/runs/*/stage/**/rfm_job.sh")]
    allreduce = [text for text in scripts if "collective/osu_allreduce" in text]
    assert len(allreduce) >= 8, len(allreduce)  # 4 HCAs x (SHARP off, scaling off at 2, 4)
    assert not [text for text in scripts if "coll_ucc" in text or "UCC_" in text]
    assert all("osu_allreduce -f -T mpi_float" in text for text in allreduce)
