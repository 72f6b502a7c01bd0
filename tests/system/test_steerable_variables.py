"""A user's `-S` on the variables the checks' hooks compute (executable_opts,
num_tasks_per_node, valid_systems) is honoured or refused with a skip saying why, never
silently replaced (reframe_tests/common/base.py: steerable). Dry runs on the shipped
example systems: no cluster."""

from __future__ import annotations

import re

from tests.conftest import TEST_STATE, dry_run_scripts, perfguard

PT2PT = "OsuPt2PtCheck%hca=mlx5_0%benchmark=osu_bw%transfer=H-H%placement={}"
NCCL = "NcclTestsCheck%test=all_reduce_perf%collnet=off"
UCX = "UcxPerftestCheck%hca=mlx5_0%test=tag_bw%memory=host"
COLLECTIVE = "OsuCollectiveCheck%hca=mlx5_0%benchmark=osu_allreduce"


def listed(*args: str) -> dict[str, str]:
    """`perfguard checks --system ndr4x4 ARGS`: variant → 'runs' or 'skipped: why'."""
    result = perfguard("checks", "--system", "ndr4x4", *args, state=TEST_STATE / "steer")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return {m[1]: m[2] for m in re.finditer(r"^(\S+(?: %\S+)*)\s+gpu/gnu-openmpi\s+(.*)$",
                                            result.stdout, re.M)}


def test_a_users_executable_opts_follow_the_checks_own() -> None:
    """OMB and nccl-tests: the user's options after the check's; ucx_perftest: on both
    sides of the pair, none after the composed steps (before: the hooks replaced them,
    or ReFrame appended them to `run_pair` lines that ignore them)."""
    scripts = dry_run_scripts("ndr4x4", PT2PT.format("inter"), NCCL, UCX, setvars=(
        "OsuPt2PtCheck.executable_opts=-W,32", "NcclTestsCheck.executable_opts=-n,50",
        "UcxPerftestCheck.executable_opts=-w,100"))
    lines = {name.split()[0]: "\n".join(script) for name, script in scripts.items()}
    assert re.search(r"/osu_bw -m 1:4194304 -W 32$", lines["OsuPt2PtCheck"], re.M)
    assert re.search(r"/all_reduce_perf -b 8 -e 1073741824 -f 2 -g 1 -n 50$",
                     lines["NcclTestsCheck"], re.M)
    pairs = [line for line in lines["UcxPerftestCheck"].splitlines() if "run_pair \"" in line]
    assert pairs and all(line.count("-w 100") == 2 * line.count("run_pair ") for line in pairs)
    assert not any(line.rstrip().endswith("-w 100") for line in pairs), pairs


def test_num_tasks_per_node_is_taken_where_the_check_can_and_refused_where_its_shape_fixes_it(
        ) -> None:
    """Collectives take it (nodes x that many ranks); point-to-point inter-node, MPI hello,
    nccl-tests and ucx_perftest are skipped saying which variable and why; a value equal
    to the check's own (intra-node: two) runs."""
    found = listed("-n", "|".join([PT2PT.format("inter"), PT2PT.format("intra"), NCCL, UCX,
                                   COLLECTIVE, "MpiHelloCheck"]),
                   "-S", "num_tasks_per_node=2")
    said = "skipped: num_tasks_per_node cannot be set (-S num_tasks_per_node=2): "
    assert found["MpiHelloCheck"] == said + "MPI hello proves its ranks land on distinct " \
                                            "nodes: one on each"
    assert found["OsuPt2PtCheck %benchmark=osu_bw %hca=mlx5_0 %placement=inter %transfer=H-H"] \
        == said + "placement=inter fixes the ranks per node (inter: one on each of two " \
                  "nodes, intra: two on one)"
    assert found["OsuPt2PtCheck %benchmark=osu_bw %hca=mlx5_0 %placement=intra "
                 "%transfer=H-H"] == "runs"
    assert found["NcclTestsCheck %collnet=off %test=all_reduce_perf"] == \
        said + "one rank per GPU, 4 on a node of ndr4x4:gpu (nccl-tests' -g 1)"
    assert found["UcxPerftestCheck %hca=mlx5_0 %memory=host %test=tag_bw"].startswith(
        said + "a node runs one side of a server/client pair")
    assert found["OsuCollectiveCheck %benchmark=osu_allreduce %hca=mlx5_0"] == "runs"
    scripts = dry_run_scripts("ndr4x4", COLLECTIVE, "GpcnetCheck%program=network_test",
                              setvars=("num_tasks_per_node=2",))
    for name, script in scripts.items():
        assert "#SBATCH --ntasks=8" in script and "#SBATCH --ntasks-per-node=2" in script, name


def test_a_users_valid_systems_are_narrowed_to_where_the_variant_runs_not_replaced() -> None:
    """An HCA variant kept its own `+hca_…` systems whatever the user said (it ran on
    ndr4x4 when the user named seedfdr); now the user's systems, narrowed by the HCA and
    the UCX feature."""
    elsewhere = listed("-n", f"{PT2PT.format('inter')}|{UCX}|MpiHelloCheck",
                       "-S", "OsuPt2PtCheck.valid_systems=seedfdr",
                       "-S", "UcxPerftestCheck.valid_systems=-ucx")
    assert elsewhere == {"MpiHelloCheck": "runs"}, elsewhere
    here = listed("-n", f"{PT2PT.format('inter')}|{UCX}",
                  "-S", "valid_systems=ndr4x4:gpu")
    assert set(here.values()) == {"runs"} and len(here) == 2, here
