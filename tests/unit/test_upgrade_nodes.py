"""The upgrade check's per-node judgement (perfguard.judge.upgrade): each node against its
own level before the upgrade and against its peers, one row per node, and a rolling
upgrade's summary."""

from __future__ import annotations

from datetime import datetime

from perfguard.judge import upgrade as up
from perfguard.judge.fingerprint import NO_EARLIER_STATE, Change
from perfguard.judge.sweep import Criteria

CLUSTERKIT = Criteria()  # 93 % of bandwidth, 2.1× latency
BW = "loopback bandwidth mlx5_0"


def bw(node: str, value: float) -> up.Figure:
    return up.Figure(node, BW, value, "MiB/s", "higher")


def test_a_node_below_its_own_level_fails_with_the_figure_and_its_level() -> None:
    """node4 at 80 % of its own level fails, though its peers are no better than it was:
    the node is held against itself, not against the fleet."""
    history = {("node3", BW): [12000.0], ("node4", BW): [12500.0]}
    [node3, node4] = up.node_verdicts(["node3", "node4"], [bw("node3", 11900), bw("node4", 10000)],
                                      history, CLUSTERKIT)
    assert node3.passed and not node4.passed
    assert node4.figure == ("loopback bandwidth mlx5_0 1e+04 MiB/s, its own level before the "
                            "upgrade 1.25e+04 MiB/s (median of 1 earlier value(s), 93% of "
                            "it; limit 1.162e+04)")
    assert node3.own == {BW: (11900, 12000, "MiB/s")}


def test_noise_of_three_earlier_values_or_more_widens_the_own_limit() -> None:
    noisy = [10000.0, 12000.0, 14000.0, 11000.0, 13000.0]
    level, limit, _ = up.own_limit(noisy, "higher", "MiB/s", CLUSTERKIT)
    assert level == 12000 and limit < 12000 * 0.93
    assert up.judge_own(bw("n1", 10500), noisy, CLUSTERKIT) is None
    assert up.judge_own(bw("n1", 10500), [12000.0], CLUSTERKIT) is not None


def test_latency_has_its_factor_and_the_sites_slack() -> None:
    lat = up.Figure("n1", "loopback latency lo", 0.9, "us", "lower")
    assert up.judge_own(lat, [0.3], CLUSTERKIT) is not None  # 3× its 0.3 us
    slack = Criteria(latency_factor=4.0, latency_slack_us=1.0)
    assert up.judge_own(lat, [0.3], slack) is None  # within 1 us of it


def test_against_its_peers_where_two_others_ran_the_same_figure() -> None:
    figures = [bw("n1", 12000), bw("n2", 11800), bw("n3", 5000)]
    [miss] = up.judge_peers(figures, CLUSTERKIT)
    assert miss.figure.node == "n3" and miss.against == "its peers" and miss.level == 11900
    assert up.judge_peers(figures[1:], CLUSTERKIT) == []  # one other: no peers' level


def test_a_node_without_an_earlier_value_is_judged_by_its_peers_and_says_so() -> None:
    [n1, n2, n3] = up.node_verdicts(["n1", "n2", "n3"],
                                    [bw("n1", 12000), bw("n2", 11800), bw("n3", 5000)], {},
                                    CLUSTERKIT)
    assert n1.passed and not n3.passed
    assert "no earlier value of its own (judged against its peers)" in n1.notes
    assert n3.misses[0].against == "its peers"


def test_peers_outside_the_list_count_for_the_level_but_get_no_row() -> None:
    rows = up.node_verdicts(["n3"], [bw("n3", 5000)], {}, CLUSTERKIT,
                            peer_figures=[bw("n1", 12000), bw("n2", 11800)])
    assert [v.node for v in rows] == ["n3"] and not rows[0].passed


def test_failures_notes_and_changes_land_in_each_nodes_row() -> None:
    changes = [Change("hca mlx5_0 fw", "28.39.1002", "28.41.1000", ("node3", "node4")),
               Change(NO_EARLIER_STATE, None, None, ("node5",))]
    verdicts = up.node_verdicts(
        ["node3", "node4", "node5"], [], {}, CLUSTERKIT,
        failures={"node4": ["the fabric sweep blames node node4: loopback 2000 MiB/s"]},
        notes={"node3": ["GPU checks not run: no GPU (Slurm's GRES (null))"]},
        changes=changes)
    node3, node4, node5 = verdicts
    assert node3.changed == ["hca mlx5_0 fw 28.39.1002 → 28.41.1000"] and node3.passed
    assert node4.word == "FAIL" and node4.figure.startswith("the fabric sweep blames")
    assert node5.changed == ["no earlier fingerprint"]
    table = up.rows(verdicts)
    lines = table.splitlines()
    assert lines[0].split() == ["node", "changed", "verdict", "figure", "(against)"]
    assert lines[2].startswith("node4  hca mlx5_0 fw 28.39.1002 → 28.41.1000  FAIL     the "
                               "fabric sweep blames node node4")
    assert "  node3: GPU checks not run: no GPU (Slurm's GRES (null))" in lines


def test_the_summary_gives_every_node_of_the_upgrade_a_state() -> None:
    at = datetime(2026, 11, 28, 23, 0)
    stored = {"n1": {"passed": True, "run_id": 7, "checked_at": at, "changed": "fw a → b",
                     "figure": "", "drained": False},
              "n2": {"passed": False, "run_id": 9, "checked_at": at, "changed": "",
                     "figure": "loopback bandwidth lo 2000 MiB/s", "drained": True}}
    assert up.summary(["n1", "n2", "n3", "n10"], stored) == [
        ("n1", up.PASSED, "run 7 at 2026-11-28 23:00; changed: fw a → b"),
        ("n2", up.FAILED, "run 9 at 2026-11-28 23:00; loopback bandwidth lo 2000 MiB/s; "
                          "drained"),
        ("n3", up.NOT_MEASURED, ""), ("n10", up.NOT_MEASURED, "")]


def test_a_loopback_below_its_level_is_measured_again_beside_references() -> None:
    """The host was slower at the retest (the reference node1 at half its level): node3,
    slowed by the host alone, holds its scaled level; node4 at a fifth does not. A miss
    counts only on the best of its measurements."""
    history = {("node1", BW): [12000.0], ("node3", BW): [12000.0], ("node4", BW): [12000.0]}
    first = [bw("node3", 6500), bw("node4", 2400)]
    suspects = up.own_misses(first, history, CLUSTERKIT)
    assert [f.node for f in suspects] == ["node3", "node4"]
    again = [bw("node1", 6000), bw("node3", 6200), bw("node4", 2500)]
    after = up.remeasured(first, again, suspects, history)
    assert [(f.value, f.conditions, f.attempts) for f in after] == [
        (6500, 0.5, 2), (2500, 0.5, 2)]
    assert up.own_misses(after, history, CLUSTERKIT) == [after[1]]
    miss = up.judge_own(after[1], history[("node4", BW)], CLUSTERKIT)
    assert "reference nodes reached 50% of their own level; best of 2" in miss.why
    assert miss.limit == 12000 * 0.93 * 0.5
