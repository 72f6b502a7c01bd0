"""Budget nightlies on a simulated 512-node site: with 2 % of the machine's node-hours a
night, is every node measured at least once a week? (issue 68; docs/operations.md)

    .venv/bin/python benchmarks/coverage_budget.py [--nodes 512] [--weeks 8]
        [--share 0.02] [--costs 0.05,0.1,0.25,0.5,1,2] [--busy 0.85] [--seed 1] [--smoke]

No cluster: each night calls the budget nightly's own choice (perfguard.judge.coverage:
``order`` — due nodes first, idle before busy, the longest unmeasured first — and ``plan``
— as many nodes as the budget buys at the largest cost per node of the last five nights,
every job's time limit capping the night at the budget) on a simulated machine:

- the nightly starts at 02:00; a node is busy with a production job with probability
  ``--busy`` (its remaining time exponential, mean 6 h, at most 48 h), drained with
  probability 1 % a night for 1-5 nights (never chosen meanwhile), else idle;
- each chosen node runs one job per check kind (2: host and device memory) of its own,
  as the budget nightly submits them; a busy node's jobs start when its production job
  ends, or are dropped at the deadline (20 h: sbatch --deadline) and the node stays due;
- a job's time is lognormal around ``cost / 2`` hours (σ 0.25): ``cost`` is what the
  per-node checks take of one node, in node-hours; a job at its time limit is killed
  (plus Slurm's kill wait) and its node not measured that night;
- what a night spent is Σ jobs' elapsed; its cost per node feeds the next nights (a job
  that hit its limit counted twice).

Prints per cost: nodes measured a night, the nights' spend against the budget (the
largest must not exceed 100 %), the oldest measurement of a node that was not drained
(after the first week), and node-days past a week; then whether every node was measured
within a week.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfguard.judge import coverage as cov  # noqa: E402
from perfguard.workflows import coverage as cov_wf  # noqa: E402

START = datetime(2026, 1, 5, 2, 0, tzinfo=timezone.utc)
JOBS = 2
SIGMA = 0.25
BUSY_MEAN_H, BUSY_MAX_H = 6.0, 48.0


@dataclass
class Result:
    cost: float
    budget: float
    nodes_per_night: list[int] = field(default_factory=list)
    spent: list[float] = field(default_factory=list)
    waits_h: list[float] = field(default_factory=list)
    dropped_nodes: int = 0
    killed_nodes: int = 0
    worst_age_days: float = 0.0
    node_days_past_week: int = 0


def simulate(nodes: int, weeks: int, share: float, cost: float, busy: float,
             seed: int) -> Result:
    """One site for ``weeks`` weeks of budget nightlies at per-node cost ``cost``."""
    rng = random.Random(seed)
    names = [f"node{i}" for i in range(1, nodes + 1)]
    budget = share * nodes * 24
    result = Result(cost, budget)
    measured: dict[str, datetime | None] = {n: None for n in names}
    drained_until = {n: -1 for n in names}
    per_node_costs: list[float] = []
    for night in range(weeks * 7):
        now = START + timedelta(days=night)
        states, remaining = {}, {}
        for name in names:
            if drained_until[name] >= night:
                states[name] = "drained"
            elif rng.random() < 0.01:
                drained_until[name] = night + rng.randint(0, 4)
                states[name] = "drained"
            elif rng.random() < busy:
                states[name] = "allocated"
                remaining[name] = min(rng.expovariate(1 / BUSY_MEAN_H), BUSY_MAX_H)
            else:
                states[name] = "idle"
        estimate, why = (max(per_node_costs[-cov.COST_RUNS:]), "stored") if per_node_costs \
            else (cov.DEFAULT_NODE_HOURS_PER_NODE, "default")
        chosen = cov.plan(cov.order(states, measured, now), budget, estimate, JOBS, why)
        if chosen.nodes:
            _night(result, chosen, remaining, measured, per_node_costs, cost, rng, now)
        # how old each node's measurement is when the next night begins
        _age(result, names, measured, drained_until, night, now + timedelta(days=1))
    return result


def _night(result: Result, chosen: cov.Plan, remaining: dict, measured: dict,
           per_node_costs: list, cost: float, rng: random.Random, now: datetime) -> None:
    """The night's jobs: a node's start waits for its production job (dropped past the
    deadline); each job runs its lognormal time or is killed at the limit."""
    limit_h = chosen.minutes / 60
    spent, counted, ran, waits = 0.0, 0.0, 0, []
    for name in chosen.nodes:
        wait = remaining.get(name, 0.0)
        if wait > cov_wf.WAIT_HOURS:  # sbatch --deadline: dropped, still due
            result.dropped_nodes += 1
            continue
        ran += 1
        waits.append(wait)
        done = True
        for _ in range(JOBS):  # a job per check kind, on this node alone
            own = rng.lognormvariate(math.log(cost / JOBS), SIGMA)
            if own > limit_h:
                own, done = limit_h + cov.KILL_WAIT_MIN / 60, False
                counted += own  # coverage_node_cost.sql: a job at its limit twice
            spent += own
        if done:
            measured[name] = now + timedelta(hours=wait)
        else:
            result.killed_nodes += 1
    if ran:
        per_node_costs.append((spent + counted) / ran)
    result.nodes_per_night.append(ran)
    result.spent.append(spent)
    result.waits_h.extend(waits)

def _age(result: Result, names: list[str], measured: dict, drained_until: dict,
         night: int, now: datetime) -> None:
    """After the first week: the oldest measurement of a node in service, and node-days
    past a week (a node drained now is out of service, not unmeasured)."""
    if night < 7:
        return
    for name in names:
        if drained_until[name] >= night:
            continue
        when = measured[name]
        age = (now - (when or START)).total_seconds() / 86400
        result.worst_age_days = max(result.worst_age_days, age)
        result.node_days_past_week += age > 7


def table(results: list[Result], nodes: int, share: float, busy: float) -> str:
    out = [f"{nodes} nodes, budget {share:.0%} of the machine = {results[0].budget:g} "
           f"node-hours a night, {busy:.0%} of nodes busy at 02:00, {JOBS} jobs a night",
           "| node-hours a node | nodes a night (median, min) | spend, median / largest "
           "(% of budget) | queue wait, median h | dropped at the deadline | cut at the "
           "limit "
           "| oldest measurement, days | node-days past a week |",
           "|---|---|---|---|---|---|---|---|"]
    for r in results:
        per = r.nodes_per_night or [0]
        spend = [s / r.budget for s in r.spent] or [0]
        out.append(f"| {r.cost:g} | {statistics.median(per):.0f}, {min(per)} | "
                   f"{statistics.median(spend):.0%} / {max(spend):.0%} | "
                   f"{statistics.median(r.waits_h or [0]):.1f} | {r.dropped_nodes} | "
                   f"{r.killed_nodes} | {r.worst_age_days:.1f} | {r.node_days_past_week} |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--weeks", type=int, default=8)
    parser.add_argument("--share", type=float, default=0.02)
    parser.add_argument("--costs", default="0.05,0.1,0.25,0.5,1,2",
                        help="node-hours the per-node checks take of one node")
    parser.add_argument("--busy", type=float, default=0.85)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="64 nodes, 3 weeks, 2 costs")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.weeks, args.costs = 64, 3, "0.5,2"
    costs = [float(c) for c in args.costs.split(",")]
    results = [simulate(args.nodes, args.weeks, args.share, c, args.busy, args.seed)
               for c in costs]
    print(table(results, args.nodes, args.share, args.busy))
    over = [r for r in results if max(r.spent, default=0) > r.budget + 1e-9]
    weekly = [r.cost for r in results if r.worst_age_days <= 7]
    print(f"\nnever over the budget: {'yes' if not over else 'NO'}; every node in service "
          f"measured within a week at node-hours a node: "
          f"{', '.join(f'{c:g}' for c in weekly) or 'none'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
