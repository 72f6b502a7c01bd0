"""The sweep that follows the switches: leaves from Slurm's topology and from
ibnetdiscover, rounds within every leaf then across the spine, a leaf blamed instead of
its nodes or links, and on an embedded cluster of four leaves, a slowed leaf found."""

from __future__ import annotations

import json
import re
from itertools import combinations
from pathlib import Path

import psycopg
import pytest

from perfguard import cluster
from perfguard.cluster import configs, faults
from perfguard.cluster.layout import ClusterLayout
from perfguard.contract import switches
from perfguard.errors import PerfguardError
from perfguard.store import db
from tests.conftest import TEST_PORT_BASE, TEST_ROOT, perfguard

LEAF_STATE = TEST_ROOT / "leaves"
LEAF_PORT_BASE = TEST_PORT_BASE - 2000


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


# --- on an embedded cluster of four leaf switches ----------------------------------------
@pytest.fixture(scope="module")
def leaf_cluster(request):
    """Twelve virtual nodes on four leaves in Slurm's tree topology (topology.conf); its
    state (job outputs, logs) is kept where a test failed."""
    running = cluster.up(LEAF_STATE, nodes=12, port_base=LEAF_PORT_BASE, leaves=4)
    with psycopg.connect(running.dsn) as conn:
        db.upgrade(conn)
    failed = request.session.testsfailed
    yield running
    cluster.down(LEAF_STATE)
    if request.session.testsfailed == failed:
        cluster.purge(LEAF_STATE)


def test_a_leaf_sweep_blames_nobody_then_the_slowed_leaf(leaf_cluster) -> None:
    """Slurm's own topology drives the rounds: three within every leaf at once, three
    across the spine. Clean, nobody is blamed; with leaf2's three nodes throttled to a
    fifth of a core, leaf2 is blamed (once, not as three nodes), after a retest."""
    clean = perfguard("sweep", "-S", "FabricSweepCheck.time_limit=20m", state=LEAF_STATE)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "12 nodes, 4 leaf switches (slurm)" in clean.stdout
    assert "blamed: nobody" in clean.stdout
    run_id = int(re.search(r"run (\d+), 12 nodes", clean.stdout)[1])
    with psycopg.connect(leaf_cluster.dsn) as conn:
        pairs = {(s, c) for s, c in conn.execute(
            "SELECT server, client FROM sweep_pair WHERE run_id = %s AND metric = "
            "'bandwidth' AND server <> client", (run_id,)).fetchall()}
        [report] = conn.execute("SELECT report_path FROM run WHERE id = %s", (run_id,)) \
            .fetchone()
    [case] = [c for c in json.loads(Path(report).read_text())["runs"][0]["testcases"]
              if c["name"].startswith("FabricSweepCheck")]
    assert "#SBATCH --time=0:20:0" in (Path(case["outputdir"]) / "rfm_job.sh").read_text()
    leaves = switches.leaf_of(leaf_cluster.leaf_nodes())
    assert len(pairs) == 4 * 3 + 6  # every pair within a leaf, one per leaf pair
    crossing = {tuple(sorted((leaves[s], leaves[c]))) for s, c in pairs if leaves[s] != leaves[c]}
    assert sorted(crossing) == list(combinations(sorted(set(leaves.values())), 2))
    slowed = leaf_cluster.leaf_nodes()["leaf2"]
    try:
        with faults.throttled(leaf_cluster, slowed, 0.2):
            slow = perfguard("sweep", "--drain", state=LEAF_STATE)
    except PerfguardError as error:
        pytest.skip(str(error))
    assert slow.returncode == 1, slow.stdout + slow.stderr
    blamed = [line for line in slow.stdout.splitlines() if line.startswith("blamed")]
    assert len(blamed) == 1, blamed
    assert blamed[0].startswith("blamed leaf leaf2 [lo]: every pair behind it fails "
                                "(node[4-6]), in loopback too: the nodes themselves")
    assert "measured 2×, failed every time" in blamed[0]
    assert "drained" not in slow.stdout  # a switch is not a node to drain
