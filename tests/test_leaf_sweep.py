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
from perfguard.contract.rounds import leaf_rounds
from perfguard.errors import PerfguardError, UsageError
from perfguard.store import db
from perfguard.sweep import analysis as sw
from tests.conftest import TEST_PORT_BASE, TEST_ROOT, perfguard

DATA = Path(__file__).parent / "data" / "switches"
LEAF_STATE = TEST_ROOT / "leaves"
LEAF_PORT_BASE = TEST_PORT_BASE - 2000


def test_slurm_topology_gives_the_leaves_and_skips_the_spine() -> None:
    leaves = switches.load(DATA / "topology.conf")
    assert list(leaves) == ["leaf1", "leaf2", "leaf3", "leaf4"]
    assert leaves["leaf3"] == ["gpu009", "gpu010", "gpu011", "gpu012"]
    assert switches.leaf_of(leaves)["gpu016"] == "leaf4"


def test_scontrol_show_topology_lists_the_spine_with_every_node() -> None:
    shown = ("SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=node[1-3]\n"
             "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=node[4-6]\n"
             "SwitchName=spine Level=1 LinkSpeed=1 Nodes=node[1-6] Switches=leaf[1-2]\n")
    assert switches.parse_slurm(shown, "scontrol show topology") == {
        "leaf1": ["node1", "node2", "node3"], "leaf2": ["node4", "node5", "node6"]}


def test_ibnetdiscover_gives_each_switch_its_hosts() -> None:
    leaves = switches.load(DATA / "ibnetdiscover.txt")
    assert leaves == {"MF0;leaf1:MQM9700/U1": ["gpu001", "gpu002"],
                      "S-b8599f0300fc6df4": ["gpu003", "gpu004"]}


@pytest.mark.parametrize("text, message", [
    ("SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[2-3]\n",
     "node n2 is on two leaf switches, a and b"),
    ("SwitchName=spine Switches=a,b\n", "no switch with nodes on it"),
    ("SwitchName=a Nodes=n[1-\n", "bad Nodes= hostlist"),
    ("NodeName=n1 CPUs=2\n", "neither Slurm's topology.conf"),
])
def test_bad_topologies_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "topology.conf"
    path.write_text(text)
    with pytest.raises(UsageError, match="topology.conf") as raised:
        switches.load(path)
    assert message in str(raised.value)


LEAVES = {f"leaf{leaf}": [f"n{leaf}{i}" for i in range(1, 5)] for leaf in range(1, 5)}


def test_leaf_rounds_pair_within_every_leaf_then_one_pair_per_leaf_pair() -> None:
    rounds = leaf_rounds(list(LEAVES.values()))
    for pairs in rounds:
        nodes = [n for pair in pairs for n in pair]
        assert len(nodes) == len(set(nodes)), pairs  # disjoint: a round runs at once
    within, across = rounds[:3], rounds[3:]
    of = switches.leaf_of(LEAVES)
    assert sorted(p for r in within for p in r) == sorted(
        p for nodes in LEAVES.values() for p in combinations(nodes, 2))
    crossing = [(of[a], of[b]) for r in across for a, b in r]
    assert sorted(tuple(sorted(p)) for p in crossing) == list(combinations(LEAVES, 2))
    # each leaf meets each other leaf through another of its nodes
    for leaf, nodes in LEAVES.items():
        sent = [n for r in across for p in r for n in p if of[n] == leaf]
        assert len(sent) == 3 and len(set(sent)) == 3 and set(sent) <= set(nodes)


def leaf_sweep(slow_nodes: set[str] = frozenset(), slow_uplink: str = "",
               slow_loopback: bool = True) -> list[sw.Measurement]:
    """Bandwidth of a leaf sweep of LEAVES at 10000 MiB/s; pairs with a slow node at 3000
    (its loopback too, unless not), pairs across a slow uplink at 4000."""
    of = switches.leaf_of(LEAVES)
    pairs = [(n, n) for nodes in LEAVES.values() for n in nodes] + \
        [p for r in leaf_rounds(list(LEAVES.values())) for p in r]
    out = []
    for a, b in pairs:
        value = 10000.0
        if {a, b} & slow_nodes and (a != b or slow_loopback):
            value = 3000.0
        elif slow_uplink in (of[a], of[b]) and of[a] != of[b]:
            value = 4000.0
        out.append(sw.Measurement("mlx5_0", a, b, "bandwidth", value, "MiB/s"))
        out.append(sw.Measurement("mlx5_0", a, b, "latency", 1.0, "us"))  # passes everywhere
    return out


def judged(ms: list[sw.Measurement]) -> list[sw.Finding]:
    return sw.blame(sw.Sweep(ms, sw.limits(ms)), switches.leaf_of(LEAVES))


def test_a_leaf_whose_nodes_all_fail_is_the_leaf() -> None:
    [finding] = judged(leaf_sweep(slow_nodes=set(LEAVES["leaf2"])))
    assert (finding.kind, finding.subject, finding.node) == ("leaf", "leaf2", None)
    assert finding.evidence.startswith("every pair behind it fails (n[21-24]), in loopback "
                                       "too: the nodes themselves")
    assert "worst bandwidth n21–n24 3000 MiB/s (limit 9300" in finding.evidence
    [switch] = judged(leaf_sweep(slow_nodes=set(LEAVES["leaf2"]), slow_loopback=False))
    assert "while they pass in loopback: the switch" in switch.evidence


def test_a_leaf_whose_uplinks_fail_is_the_leaf_not_three_links() -> None:
    [finding] = judged(leaf_sweep(slow_uplink="leaf3"))
    assert (finding.kind, finding.subject) == ("leaf", "leaf3")
    assert finding.evidence.startswith("its links across the spine fail with 3 of 3 leaves "
                                       "while its own pairs pass: ")
    assert finding.evidence.count("4000 MiB/s") == 3


def test_one_slow_node_or_one_slow_cross_link_is_not_a_leaf() -> None:
    assert [(f.kind, f.subject) for f in judged(leaf_sweep(slow_nodes={"n32"}))] == [
        ("node", "n32")]
    ms = [sw.Measurement(m.hca, m.server, m.client, m.metric, 4000.0, m.unit)
          if {m.server, m.client} == {"n11", "n41"} else m for m in leaf_sweep()]
    assert [(f.kind, f.subject) for f in judged(ms)] == [("link", "n11–n41")]


def test_a_blamed_nodes_odd_pair_sets_no_limit_for_a_leaf() -> None:
    """A throttled node (n44) whose pair with n41 had the lowest latency: by 4× that (or
    1 µs above it) every pair behind leaf1 failed latency, and leaf1 would have been
    blamed; by the limit of the other pairs, only n44 is."""
    nodes = [n for members in LEAVES.values() for n in members]
    ms = []
    for a, b in [(n, n) for n in nodes] + list(combinations(nodes, 2)):
        slow = "n44" in (a, b)
        latency = 0.05 if {a, b} == {"n41", "n44"} else 0.3
        if a != b and a in LEAVES["leaf1"] and b in LEAVES["leaf1"]:
            latency = 1.2  # within 1 µs of 0.3, not of 0.05
        ms.append(sw.Measurement("mlx5_0", a, b, "bandwidth", 3000.0 if slow else 10000.0,
                                 "MiB/s"))
        ms.append(sw.Measurement("mlx5_0", a, b, "latency", latency, "us"))
    criteria = sw.Criteria(latency_factor=4.0, latency_slack_us=1.0)
    sweep = sw.Sweep(ms, sw.limits(ms, None, criteria), criteria=criteria)
    assert {m.pair for m in sweep.failing() if m.metric == "latency"} >= set(
        combinations(LEAVES["leaf1"], 2))
    findings = sw.blame(sweep, switches.leaf_of(LEAVES))
    assert [(f.kind, f.subject) for f in findings] == [("node", "n44")]


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
