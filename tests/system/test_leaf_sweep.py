"""The sweep that follows the switches: leaves from Slurm's topology and from
ibnetdiscover, rounds within every leaf then across the spine, a leaf blamed instead of
its nodes or links, and on an embedded cluster of two leaves, a slowed leaf found
(benchmarks/leaf_sweep.py at its smoke size)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perfguard import cluster
from perfguard.cluster import configs
from perfguard.cluster.layout import ClusterLayout
from perfguard.contract import switches
from perfguard.errors import PerfguardError
from tests.conftest import TEST_PORT_BASE, TEST_ROOT

LEAF_PORT_BASE = TEST_PORT_BASE - 2000
BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "leaf_sweep.py"


def test_dry_run_of_a_leaf_sweep_names_its_nodes_and_rounds() -> None:
    """ndr4x4, two leaves of two: the four loopbacks, the two leaves' pairs at once, then
    the one pair across the spine; the allocation is exactly the leaves' nodes."""
    from tests.conftest import dry_run_stages

    groups = "FabricSweepCheck.switch_groups=gpu01:0,gpu02:0,gpu03:1,gpu04:1"
    [stage] = dry_run_stages("ndr4x4", "FabricSweepCheck%hca=mlx5_0%memory=host",
                             setvars=(groups,)).values()
    assert "#SBATCH --nodelist=gpu01,gpu02,gpu03,gpu04" in \
        (stage / "rfm_job.sh").read_text().splitlines()
    assert (stage / "sweep.schedule").read_text().splitlines() == [
        "0 0:gpu01:gpu01 0:gpu02:gpu02 0:gpu03:gpu03 0:gpu04:gpu04",
        "1 0:gpu01:gpu02 0:gpu03:gpu04", "2 0:gpu01:gpu03"]


def test_the_embedded_leaves_deal_the_nodes_out_in_order(tmp_path: Path) -> None:
    layout = ClusterLayout(tmp_path, nodes=10, leaves=4)
    assert [len(nodes) for nodes in layout.leaf_nodes().values()] == [3, 3, 2, 2]
    assert configs.topology_conf(layout).splitlines()[1:] == [
        "SwitchName=leaf1 Nodes=node1,node2,node3", "SwitchName=leaf2 Nodes=node4,node5,node6",
        "SwitchName=leaf3 Nodes=node7,node8", "SwitchName=leaf4 Nodes=node9,node10",
        "SwitchName=spine Switches=leaf1,leaf2,leaf3,leaf4"]
    assert switches.parse_slurm(configs.topology_conf(layout), "x") == layout.leaf_nodes()
    with pytest.raises(PerfguardError, match="--leaves 11: a leaf switch needs a node"):
        cluster.up(tmp_path, nodes=10, port_base=LEAF_PORT_BASE, leaves=11)


# --- on an embedded cluster of leaf switches: benchmarks/leaf_sweep.py --smoke -----------
@pytest.mark.alone
def test_a_leaf_sweep_blames_nobody_then_the_slowed_leaf() -> None:
    """Six virtual nodes on two leaves in Slurm's tree topology (the benchmark's smoke
    size; its own size is twelve on four). Slurm's topology drives the rounds: within every
    leaf at once, then across the spine. Clean, nobody is blamed and the job gets the time
    limit asked with -S; with leaf2's three nodes throttled to a fifth of a core, leaf2 is
    blamed (once, not as three nodes), after a retest, and no node is drained."""
    done = subprocess.run([sys.executable, str(BENCHMARK), "--smoke"], capture_output=True,
                          text=True, timeout=1800,
                          env={**os.environ, "PERFGUARD_TEST_PORT_BASE": str(TEST_PORT_BASE),
                               "PERFGUARD_BENCH_STATE": str(TEST_ROOT / "leaves")})
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    # every pair within a leaf (2 leaves of 3: 6), one pair per leaf pair (1)
    assert re.search(r"^\| clean \| 0 \| \d+ \| \d+ \| 0:20:0 \| 6 \| 1 \(every leaf pair\) \|$",
                     out, re.M), out
    assert "clean: " in out and "6 nodes, 2 leaf switches (slurm)" in out, out
    assert "clean: blamed: nobody" in out, out
    # the run stored its leaves as Slurm's tree has them: its verdict takes each leaf's
    # night apart from the fabric's (a run stored without them was judged with no leaf)
    assert "clean: leaf switches stored with the run for its verdict: 2, Slurm's tree" \
        in out, out
    if "leaf2 throttled: not run" in out:
        pytest.skip(out.split("leaf2 throttled: not run", 1)[1].splitlines()[0])
    assert re.search(r"^\| leaf2 throttled \| 1 \|", out, re.M), out
    blamed = [line for line in out.splitlines() if line.startswith("  leaf2 throttled: blamed")]
    assert len(blamed) == 1, out
    assert blamed[0].startswith("  leaf2 throttled: blamed leaf leaf2 [lo]: every pair behind "
                                "it fails (node[4-6]), in loopback too: the nodes themselves")
    assert "measured 3×, failed every time" in blamed[0]
    assert not [line for line in out.splitlines()  # a switch is not a node to drain
                if line.startswith("  leaf2 throttled:") and "drained" in line], out
