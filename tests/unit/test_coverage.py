"""Issue 68 items 4 and 5, the pure parts: a run's cost from sacct's lines, and the budget
nightly's choice of nodes and time limit (the nodes measured longest ago, idle first,
never more than the budget even when every job runs to its limit)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from perfguard.judge import coverage as cov
from perfguard.present import text as tx
from perfguard.site.slurm import parse_jobs

NOW = datetime(2026, 11, 28, 22, 0, tzinfo=timezone.utc)

# sacct -X -n -P -o JobIDRaw,NNodes,Submit,Start,End,ElapsedRaw,State (Slurm 22.05)
SACCT = """\
101|4|2026-11-28T21:00:00|2026-11-28T21:00:30|2026-11-28T21:10:30|600|COMPLETED
102|2|2026-11-28T21:00:01|2026-11-28T21:02:01|2026-11-28T21:03:01|60|FAILED
103|1|2026-11-28T21:00:02|Unknown|Unknown|0|PENDING
sacct: warning: something else
"""


def test_sacct_lines_give_node_hours_and_queue_wait() -> None:
    jobs = parse_jobs(SACCT)
    assert [j.job_id for j in jobs] == ["101", "102", "103"]
    assert jobs[0].node_hours == pytest.approx(4 * 600 / 3600)
    assert jobs[0].queue_wait_s == pytest.approx(30)
    assert jobs[1].queue_wait_s == pytest.approx(120)
    assert jobs[2].queue_wait_s is None and not jobs[2].finished
    assert jobs[0].finished and jobs[1].finished


def test_the_cost_line_says_node_hours_and_waits() -> None:
    line = tx.cost_line(cov.RunCost(jobs=2, node_hours=0.6833, queue_wait_s=150,
                                    longest_wait_s=120))
    assert line == "cost: 0.683 node-hours in 2 jobs; queue wait 2.5 min in all, " \
                   "the longest 2.0 min"
    assert "not recorded" in tx.cost_line(None)


def test_due_nodes_first_idle_before_busy_oldest_first_busy_only_when_due() -> None:
    states = {"n1": "idle", "n2": "allocated", "n3": "idle", "n4": "drained",
              "n5": "mixed", "n6": "idle", "n7": "down*", "n10": "idle", "n11": "mixed"}
    measured = {"n1": NOW - timedelta(days=1), "n2": NOW - timedelta(days=9),
                "n3": NOW - timedelta(days=6), "n5": None, "n6": NOW - timedelta(days=2),
                "n10": NOW - timedelta(days=3), "n11": NOW - timedelta(days=4)}
    # due (5 days): n3 (6 d, idle), n5 (never, busy), n2 (9 d, busy); then the idle ones
    # measured lately, the oldest first; n11 busy and not due: never waited for
    assert cov.order(states, measured, NOW) == ["n3", "n5", "n2", "n10", "n6", "n1"]


def test_never_measured_comes_before_measured_in_natural_order() -> None:
    states = {f"node{i}": "idle" for i in (1, 2, 10, 11)}
    measured = {"node2": NOW - timedelta(days=30)}
    assert cov.order(states, measured, NOW) == ["node1", "node10", "node11", "node2"]


def test_the_plan_fits_the_budget_even_if_every_job_runs_to_its_limit() -> None:
    nodes = [f"n{i}" for i in range(100)]
    for budget in (0.1, 0.15, 1, 2.5, 10, 200):
        for per_node in (0.0001, 0.01, 0.25, 3):
            for jobs in (1, 2, 4):
                chosen = cov.plan(nodes, budget, per_node, jobs, "test")
                if not chosen.nodes:
                    continue
                worst = len(chosen.nodes) * jobs * (chosen.minutes + cov.KILL_WAIT_MIN) / 60
                assert worst <= budget + 1e-9, (budget, per_node, jobs, chosen)
                assert chosen.minutes >= 1


def test_the_plan_takes_what_the_estimate_buys_and_one_node_the_first_night() -> None:
    nodes = [f"n{i}" for i in range(512)]
    # 2 % of 512 nodes × 24 h = 245.76 node-hours; 1.5 node-hours a node
    chosen = cov.plan(nodes, 245.76, 1.5, 2, "test")
    assert len(chosen.nodes) == int(245.76 * cov.PLANNED_SHARE / 1.5) == 81
    assert chosen.left == 512 - 81 and chosen.estimated == pytest.approx(81 * 1.5)
    assert chosen.minutes == int(245.76 * 60 / (81 * 2) - cov.KILL_WAIT_MIN) == 90
    first = cov.plan(nodes, 0.2, cov.DEFAULT_NODE_HOURS_PER_NODE, 1, "first night")
    assert first.nodes == ["n0"] and first.minutes == 11  # 12 min less the kill wait
    assert cov.plan(nodes, 0.02, 0.25, 1, "too small").nodes == []


def test_perfguard_nodes_lists_the_longest_unmeasured_first() -> None:
    rows = [cov.NodeCoverage("n1", NOW - timedelta(hours=2), NOW - timedelta(hours=2), 7,
                             ("mlx5_0",), NOW - timedelta(hours=2)),
            cov.NodeCoverage("n2", NOW - timedelta(days=3), NOW - timedelta(days=3), 5,
                             ("mlx5_0", "mlx5_1"), NOW - timedelta(days=3)),
            cov.NodeCoverage("n3", NOW - timedelta(days=1), None, 6, (), None)]
    text = tx.coverage_table(rows, {"n1": "idle", "n2": "mixed", "n3": "idle",
                                    "n4": "drained"}, NOW)
    lines = text.splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == ["n3", "n4", "n2", "n1"]
    assert "3.0 d ago" in lines[3] and "mlx5_0, mlx5_1" in lines[3]
    assert lines[-1] == "4 nodes; 2 never measured by a per-node check"


def test_a_time_limit_never_above_the_partitions_nor_four_times_the_estimate() -> None:
    nodes = ["n1", "n2", "n3", "n4"]
    roomy = cov.plan(nodes, 245, 1.0, 1, "test")  # 245 node-hours over 4 nodes
    assert roomy.minutes == 4 * 60  # STRETCH × the estimated hour, not 3,674 min
    assert cov.plan(nodes, 245, 1.0, 1, "test", max_minutes=120).minutes == 120


def test_slurm_time_limits_read_as_minutes() -> None:
    from perfguard.workflows.coverage import slurm_minutes

    assert [slurm_minutes(t) for t in ("2:00:00", "1-00:00:00", "1-2:03:00", "45:00", "30",
                                       "infinite", "UNLIMITED")] == \
        [120, 1440, 1563, 45, 30, None, None]


def test_the_cost_counts_slurm_jobs_not_a_local_build(tmp_path) -> None:
    """A job ReFrame ran on this host (the Spack stack) has a process id for a job id:
    accounting may know that number as another user's job."""
    import json

    from perfguard.workflows.pipeline import slurm_job_ids

    report = tmp_path / "report.json"
    case = {"scheduler": "slurm", "local": False}
    report.write_text(json.dumps({"runs": [
        {"testcases": [{**case, "jobid": "12"}, {**case, "jobid": "13"},
                       {"scheduler": "local", "local": True, "jobid": "27801"},
                       {"scheduler": "slurm", "local": True, "jobid": "27802"},
                       {**case, "jobid": None}]},
        {"testcases": [{**case, "jobid": "14"}, {**case, "jobid": "12"}]}]}))  # a retry
    assert slurm_job_ids(report) == ["12", "13", "14"]
    assert slurm_job_ids(tmp_path / "missing.json") == []
