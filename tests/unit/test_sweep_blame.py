"""The fabric sweep's rounds and blame rules, pure: the circle method meets every pair
once; a slow node, link, HCA or leaf is named from the pairs' measurements."""

from __future__ import annotations

import dataclasses
import re
from itertools import combinations
from pathlib import Path
from statistics import median

import pytest

from perfguard.contract import switches
from perfguard.contract.rounds import circle_rounds, leaf_rounds
from perfguard.errors import UsageError
from perfguard.judge import sweep as sw
from perfguard.present import text as tx
from tests.facts import FOUR, LEAVES
from tests.facts import SWITCHES as DATA


@pytest.mark.parametrize("count", range(2, 10))
def test_circle_rounds_are_disjoint_and_meet_every_pair_once(count: int) -> None:
    rounds = circle_rounds(count)
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    for pairs in rounds:
        nodes = [n for pair in pairs for n in pair]
        assert len(nodes) == len(set(nodes)), pairs
    measured = [pair for pairs in rounds for pair in pairs]
    assert sorted(measured) == list(combinations(range(count), 2))

def bandwidths(hca: str, values: dict[tuple[str, str], float | None]) -> list[sw.Measurement]:
    return [sw.Measurement(hca, a, b, "bandwidth", v, "MiB/s") for (a, b), v in values.items()]

def full(hca: str, slow: set[str] = frozenset(), link: tuple | None = None,
         dead: tuple | None = None) -> dict:
    """A sweep of FOUR at 10000, pairs with a slow node at 4000, one slow link at 6000."""
    values = {}
    for a, b in [(n, n) for n in FOUR] + list(combinations(FOUR, 2)):
        value = 4000.0 if {a, b} & slow else 10000.0
        if link and {a, b} == set(link):
            value = 6000.0
        values[(a, b)] = None if dead and (a, b) == dead else value
    return values

def test_blame_names_the_node_the_link_and_the_hca() -> None:
    ms = bandwidths("mlx5_0", full("mlx5_0", slow={"n3"}, link=("n1", "n2")))
    findings = sw.blame(sw.Sweep(ms, sw.limits(ms)))
    assert [(f.kind, f.subject) for f in findings] == [("node", "n3"), ("link", "n1–n2")]
    assert findings[0].evidence.startswith("fails with 3 of 3 partners: bandwidth loopback "
                                           "4000 MiB/s (limit 9300: 93% of the best loopback")
    assert "both nodes pass with their other partners" in findings[1].evidence
    assert [(f.kind, f.subject) for f in findings] == [("node", "n3"), ("link", "n1–n2")]
    # n2 bad on mlx5_1 only: that HCA, not the node; n3 bad on both HCAs: the node
    two = ms + bandwidths("mlx5_1", full("mlx5_1", slow={"n2", "n3"}))
    assert [(f.kind, f.subject, f.hca) for f in sw.blame(sw.Sweep(two, sw.limits(two)))] == [
        ("hca", "n2 mlx5_1", "mlx5_1"), ("node", "n3", "mlx5_0,mlx5_1"),
        ("link", "n1–n2", "mlx5_0")]

def test_a_retest_that_passes_clears_the_pair_and_a_dead_one_is_a_link() -> None:
    ms = bandwidths("lo", full("lo", link=("n1", "n4"), dead=("n2", "n3")))
    first = sw.Sweep(ms, sw.limits(ms))
    assert {m.pair for m in first.failing()} == {("n1", "n4"), ("n2", "n3")}
    again = first.retested(bandwidths("lo", {("n1", "n4"): 9900.0, ("n2", "n3"): None}))
    [finding] = sw.blame(again)
    assert (finding.kind, finding.subject) == ("link", "n2–n3")
    assert "measurement failed" in finding.evidence and "measured 2×" in finding.evidence
    # the retest's own best pair may lower the bar (same conditions), never raise it
    kind = ("lo", "bandwidth", False)
    assert again.limit_of[kind].value == pytest.approx(0.93 * 9900.0)
    assert again.limit_of[kind].value <= first.limit_of[kind].value

def test_a_blamed_nodes_pair_sets_no_limit_for_the_links() -> None:
    """The 64-node throttled sweep: the throttled node's pairs were slow in bandwidth but
    one had the lowest latency (0.077 µs), and 4× that made a healthy link fail."""
    six = FOUR + ["n5", "n6"]
    latency = {(a, b): 0.3 for a, b in [(n, n) for n in six] + list(combinations(six, 2))}
    latency[("n1", "n6")] = 0.05  # n6 is the throttled node
    latency[("n2", "n3")] = 1.2   # within 1 µs of 0.3, not of 0.05
    bandwidth = {pair: 4000.0 if "n6" in pair else 10000.0 for pair in latency}
    ms = bandwidths("lo", bandwidth) + [
        sw.Measurement("lo", a, b, "latency", v, "us") for (a, b), v in latency.items()]
    criteria = sw.Criteria(latency_factor=4.0, latency_slack_us=1.0)  # the embedded site's
    sweep = sw.Sweep(ms, sw.limits(ms, None, criteria), criteria=criteria)
    assert ("n2", "n3") in {m.pair for m in sweep.failing()}  # by the throttled pair's limit
    [finding] = sw.blame(sweep)
    assert (finding.kind, finding.subject) == ("node", "n6")
    slower = [m if m.pair != ("n2", "n3") or m.metric != "latency" else
              dataclasses.replace(m, value=1.4) for m in ms]
    findings = sw.blame(sw.Sweep(slower, sw.limits(slower, None, criteria), criteria=criteria))
    assert [(f.kind, f.subject) for f in findings] == [("node", "n6"), ("link", "n2–n3")]
    assert ("limit 1.3: 4× the lowest pair (n1–n2 0.3 us) or 1 us above it, no blamed "
            "node's pair counted") in findings[1].evidence

def latencies(values: dict[tuple[str, str], float]) -> list[sw.Measurement]:
    return [sw.Measurement("lo", a, b, "latency", v, "us") for (a, b), v in values.items()]

def test_a_sweep_off_its_history_as_a_whole_is_judged_without_it() -> None:
    """Recorded on the embedded cluster under load: every latency 5–8× its history, and
    two nodes of four were blamed by their pairs' own history. A pair's history judges it
    only while its kind's other pairs meet theirs; one pair off alone is still caught, and
    a retest whose reference is off too sets the suspect's history aside."""
    every = [(n, n) for n in FOUR] + list(combinations(FOUR, 2))
    history = {(("lo", (min(a, b), max(a, b)), "latency")): sw.Limit(
        0.17, "lower", "above this pair's history: median 0.157") for a, b in every}
    loaded = {pair: 1.0 + 0.1 * i for i, pair in enumerate(every)}  # 1.0–1.9 us
    sweep = sw.Sweep(latencies(loaded), sw.limits(latencies(loaded)), pair_limits=history)
    assert sw.blame(sweep) == [] and not sweep.failing()
    shares = [0.17 / v for v in loaded.values()]
    assert sweep.set_aside == {("lo", "latency", True): (4, median(shares[:4]), ""),
                               ("lo", "latency", False): (6, median(shares[4:]), "")}
    text = tx.sweep(1, "local", sweep, [], [])
    assert "latency on lo: 6 pair(s) judged without their own history: the typical one " \
           "reached 10% of its history's limit" in text
    drifted = {pair: 0.16 for pair in every} | {("n1", "n2"): 0.2}
    alone = sw.Sweep(latencies(drifted), sw.limits(latencies(drifted)), pair_limits=history)
    assert [(f.kind, f.subject) for f in sw.blame(alone)] == [("link", "n1–n2")]
    assert alone.set_aside == {}
    # the suspect retested beside its kind's best pair: both off their history now
    again = alone.retested(latencies({("n1", "n2"): 0.9, ("n3", "n4"): 0.8}))
    assert sw.blame(again) == [] and ("lo", "latency", False) in again.set_aside
    # the reference within its history at the retest: the suspect alone is off, twice
    again = alone.retested(latencies({("n1", "n2"): 0.2, ("n3", "n4"): 0.16}))
    [finding] = sw.blame(again)
    assert "above this pair's history" in finding.evidence and "measured 2×" in finding.evidence
    # a node off its history with every partner: its suspects retested side by side do
    # not excuse each other, the reference pair within its own history keeps theirs
    slow = {pair: 0.2 if "n1" in pair else 0.16 for pair in every}
    first = sw.Sweep(latencies(slow), sw.limits(latencies(slow)), pair_limits=history)
    assert sorted(m.pair for m in first.failing()) == [("n1", "n1"), ("n1", "n2"),
                                                       ("n1", "n3"), ("n1", "n4")]
    again = first.retested(latencies({("n1", "n2"): 0.2, ("n1", "n3"): 0.2,
                                      ("n1", "n4"): 0.2, ("n2", "n3"): 0.16}))
    [finding] = sw.blame(again)
    assert (finding.kind, finding.subject) == ("node", "n1") and "measured 2×" in \
        finding.evidence

def test_line_rate_raises_the_floor() -> None:
    ms = bandwidths("mlx5_0", {("n1", "n2"): 30000.0, ("n3", "n4"): 29000.0})
    rate = 400e9 / 8 / 2**20  # NDR in MiB/s
    limit = sw.limits(ms, {"mlx5_0": rate})[("mlx5_0", "bandwidth", False)]
    assert limit.value == pytest.approx(rate * 0.8) and "line rate" in limit.why
    assert len(sw.failing(ms, sw.limits(ms, {"mlx5_0": rate}))) == 2

@pytest.mark.parametrize("text, message", [
    ("default: {bandwidth_fraction: high}\n",
     "default.bandwidth_fraction: 'high' is not of type 'number'"),
    ("systems: {x: {retests: 1.5}}\n", "systems.x.retests: 1.5 is not of type 'integer'"),
    ("default: {ratio: 1}\n", "default.ratio: unknown key (known: bandwidth_fraction,"),
])
def test_bad_sweep_criteria_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        sw.load_criteria(path, "x")
    assert sw.load_criteria(tmp_path / "absent.yaml", "x") == sw.Criteria()


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
