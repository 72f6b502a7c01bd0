"""What runs cost and which nodes were measured when (issue 68): a run's node-hours and
queue wait from its jobs' accounting, each node's coverage age, and the budget nightly's
choice of nodes — the nodes measured longest ago, idle ones first, as many as the budget
buys. The choice is pure (``plan``); the reads and writes go through named queries."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from perfguard.judge.fingerprint import natural_key
from perfguard.store import queries
from perfguard.store.queries import Connection

#: A node's cost in a budget nightly when no earlier one says (node-hours): a loopback
#: sweep job of a real node (allocation, fingerprints, every HCA × memory kind) takes
#: minutes; an hour is far on the safe side of it, and the first night's stored cost
#: replaces it.
DEFAULT_NODE_HOURS_PER_NODE = 1.0
#: The budget nightly plans to spend this share of the budget on its estimate: the rest
#: is the jobs' headroom under the time limit that caps them at the budget.
PLANNED_SHARE = 1 / 2
#: A job's time limit is at most this many times its estimated share of a node's cost:
#: room for a slow night, never hours for a job of minutes.
STRETCH = 4
#: Earlier budget nightlies whose cost per node is read (the largest counts).
COST_RUNS = 5
#: Slurm states of nodes that can take a job now, idle first.
IDLE, BUSY = ("idle",), ("mixed", "allocated", "completing")
#: Slurm's KillWait (30 s by default): how long a job at its limit may run on.
KILL_WAIT_MIN = 0.5
#: A node not measured for this long is due: two nights before the week the coverage
#: promises (every node weekly) is out, so a node busy or drained one night has two more.
DUE = timedelta(days=5)


@dataclass(frozen=True)
class RunCost:
    """A run's cost as accounting said (run_cost view)."""
    jobs: int
    node_hours: float
    queue_wait_s: float
    longest_wait_s: float


@dataclass(frozen=True)
class NodeCoverage:
    """When a node was last measured (node_coverage view); None: never."""
    node: str
    last_measured_at: datetime | None
    last_per_node_at: datetime | None
    last_run_id: int | None
    devices: tuple[str, ...]
    oldest_device_at: datetime | None


@dataclass(frozen=True)
class Plan:
    """The budget nightly's choice: which nodes, at what estimated cost, under what cap."""
    nodes: list[str]
    per_node: float
    estimated: float
    #: Each job's time limit in whole minutes: nodes × jobs × limit ≤ budget.
    minutes: int
    #: Nodes that could run but did not fit the budget (measured later nights).
    left: int
    why: str


def store_jobs(conn: Connection, run_id: int, jobs: list) -> None:
    """The run's jobs as sacct saw them (site.slurm.JobAccount), their cost recorded."""
    queries.execute_many(conn, "insert_run_job", [
        {"run_id": run_id, "job_id": j.job_id, "nodes": j.nodes,
         "submitted_at": j.submitted_at, "started_at": j.started_at,
         "ended_at": j.ended_at, "elapsed_s": j.elapsed_s, "state": j.state}
        for j in jobs])
    conn.commit()


def run_cost(conn: Connection, run_id: int) -> RunCost | None:
    """The run's node-hours and queue wait; None where accounting was not recorded."""
    row = queries.first(conn, "run_cost", (run_id,))
    return RunCost(**row) if row else None


def coverage(conn: Connection, system: str) -> list[NodeCoverage]:
    """Every node the system's runs measured, oldest per-node measurement first."""
    return [NodeCoverage(r["node"], r["last_measured_at"], r["last_per_node_at"],
                         r["last_run_id"], tuple(r["devices"] or ()), r["oldest_device_at"])
            for r in queries.rows(conn, "node_coverage", (system,))]


def node_cost(conn: Connection, system: str) -> tuple[float, str]:
    """One node's cost in a budget nightly: the largest of the recent nightlies' node-hours
    per node measured, else the conservative default; and where it comes from."""
    found = queries.rows(conn, "coverage_node_cost", {"system": system, "runs": COST_RUNS})
    if not found:
        return DEFAULT_NODE_HOURS_PER_NODE, (
            f"no earlier budget nightly on {system}: {DEFAULT_NODE_HOURS_PER_NODE:g} "
            f"node-hours a node assumed")
    worst = max(found, key=lambda r: r["per_node"])
    return float(worst["per_node"]), (
        f"the largest of the last {len(found)} budget nightlies' cost per node (run "
        f"{worst['run_id']})")


def order(states: dict[str, str], measured: dict[str, datetime | None], now: datetime,
          due: timedelta = DUE) -> list[str]:
    """Nodes a budget nightly may take, in the order it takes them: first those due (never
    measured, or not for ``due``), then the rest; within each, idle nodes before busy
    ones, and the longest unmeasured first. A busy node is taken only when due: its job
    waits for its production job's end (worth it for a node that must be measured, not
    for one measured lately). Drained, down or reserved nodes are never taken (a job
    naming one would wait for it as long as it stays so)."""
    def is_due(node: str) -> bool:
        when = measured.get(node)
        return when is None or now - when >= due

    def key(node: str) -> tuple:
        when = measured.get(node)
        return (not is_due(node), _state(states[node]) not in IDLE, when is not None,
                when or now, natural_key(node))

    usable = [n for n, s in states.items()
              if _state(s) in IDLE or (_state(s) in BUSY and is_due(n))]
    return sorted(usable, key=key)


def _state(text: str) -> str:
    """sinfo's %T without its flags (``idle*``: not responding; ``mixed-``, …)."""
    return text.rstrip("*~#!%$@^-+").lower()


def plan(candidates: list[str], budget: float, per_node: float, jobs_per_node: int,
         why: str, max_minutes: int | None = None) -> Plan:
    """As many of ``candidates`` (in order) as PLANNED_SHARE of ``budget`` buys at
    ``per_node`` node-hours each (at least one where the cap allows it: the first night
    has no stored cost), and every job's time limit so that even jobs that run to their
    limit stay within the budget: nodes × jobs × (limit + Slurm's kill wait) ≤ budget,
    the limit in whole minutes (Slurm's unit), never above STRETCH times a job's
    estimated share nor the partition's ``max_minutes`` (a job asking more would wait
    for ever). None fits where the budget cannot give each job a minute."""
    if budget <= 0 or per_node <= 0:
        raise ValueError("budget and cost per node must be positive")
    jobs = max(1, jobs_per_node)
    count = min(len(candidates),
                max(1, math.floor(budget * PLANNED_SHARE / per_node + 1e-9)))
    while count > 0 and _minutes(budget, count, jobs) < 1:
        count -= 1
    minutes = _minutes(budget, count, jobs) if count else 0
    caps = [math.ceil(STRETCH * per_node * 60 / jobs)] + ([max_minutes] if max_minutes else [])
    minutes = min([minutes, *caps]) if count else 0
    return Plan(candidates[:count], per_node, count * per_node, minutes,
                len(candidates) - count, why)


def _minutes(budget: float, count: int, jobs: int) -> int:
    """Each job's whole minutes of its share of the budget, less Slurm's kill wait (a job
    at its limit is signalled, then killed that much later)."""
    return math.floor(budget * 60 / (count * jobs) - KILL_WAIT_MIN + 1e-9)
