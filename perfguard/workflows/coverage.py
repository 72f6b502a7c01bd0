"""`perfguard nightly --budget NODE_HOURS` and `perfguard nodes`: the whole machine
measured node by node over several nights within a budget a night (issue 68).

Each night sweeps the loopback of every HCA (the fabric sweep's per-node check,
``FabricSweepCheck.pairs=n:n,…``: one job on the chosen nodes) on the nodes measured
longest ago, idle ones first, as many as the budget buys at the cost per node the earlier
budget nightlies stored; every job's time limit caps the night at the budget even where
the estimate is wrong. The sweep judges each loopback against the others' and its own
history (docs/sweep.md); the run is stored with the label ``coverage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from perfguard import paths
from perfguard.errors import PerfguardError, UsageError
from perfguard.judge import coverage as cov
from perfguard.judge import sweep as sw
from perfguard.judge.fingerprint import compact_nodes
from perfguard.present import text as tx
from perfguard.run.reframe import RunRequest, run_reframe
from perfguard.site import slurm
from perfguard.site.context import Context
from perfguard.store import db
from perfguard.store import report as rep
from perfguard.workflows.nightly import nightly_lock
from perfguard.workflows.sweep import fabric_sweep

#: The label every budget nightly's run carries (its cost per node is read back by it).
LABEL = "coverage"


@dataclass
class CoverageOutcome:
    run_id: int
    plan: cov.Plan
    cost: cov.RunCost | None
    findings: list
    text: str

    @property
    def exit_code(self) -> int:
        """1 where the sweep blamed a node or HCA, else 0."""
        return 1 if self.findings else 0


def budget_of(system: str, budget: float | None) -> float:
    """``--budget``, else the site's ``nightly_budget`` for the system (sweep.yaml)."""
    if budget is not None:
        if budget <= 0:
            raise UsageError(f"--budget {budget:g}: expected node-hours above 0")
        return budget
    found = sw.load_criteria(paths.site_file("sweep.yaml"), system).nightly_budget
    if found is None:
        raise UsageError(f"no budget: give --budget NODE_HOURS, or set nightly_budget for "
                         f"system {system} (or default) in {paths.site_file('sweep.yaml')}")
    return found


def node_states(ctx: Context, partition: str | None) -> dict[str, str]:
    """Each node of ``partition`` (else Slurm's default partition) → its state (sinfo)."""
    where = ["-p", partition] if partition else []
    listing = slurm.run(ctx, "sinfo", "-h", "-N", *where, "-o", "%N|%T|%P")
    if listing.returncode != 0:
        raise PerfguardError(f"sinfo failed: {listing.stderr.strip()}")
    states = {}
    for line in listing.stdout.splitlines():
        node, state, part = (line.split("|") + ["", ""])[:3]
        if partition or part.endswith("*"):
            states[node] = state
    if not states:
        raise UsageError(f"Slurm lists no node in partition "
                         f"{partition or '(the default)'}: `sinfo -s` lists them")
    return states


def budget_nightly(ctx: Context, system: str, budget: float | None,
                   partition: str | None = None, labels: tuple[str, ...] = (),
                   job_options: tuple[str, ...] = (), drain: bool = False,
                   now: datetime | None = None) -> CoverageOutcome:
    """One budget night: choose the nodes, sweep their loopbacks within the budget,
    store (with the run's cost), judge; the text says what it measured and spent."""
    budget = budget_of(system, budget)
    states = node_states(ctx, partition)
    now = now or datetime.now(timezone.utc)
    with db.connect(ctx.dsn) as conn:
        db.require_current(conn)
        measured = {row.node: row.last_per_node_at for row in cov.coverage(conn, system)}
        per_node, why = cov.node_cost(conn, system)
    site_estimate = sw.load_criteria(paths.site_file("sweep.yaml"), system).node_hours_per_node
    if site_estimate and why.startswith("no earlier"):
        per_node, why = site_estimate, f"the site's node_hours_per_node ({site_estimate:g})"
    candidates = cov.order(states, measured, now)
    if not candidates:
        raise PerfguardError(f"no node of {partition or 'the default partition'} can take a "
                             f"job now (all drained, down or reserved): nothing measured")
    jobs = jobs_per_night(ctx, system, candidates[0], job_options)
    chosen = cov.plan(candidates, budget, per_node, jobs, why)
    if not chosen.nodes:
        raise UsageError(f"--budget {budget:g} node-hours cannot give one node's {jobs} "
                         f"job(s) a minute each within the budget: nothing measured")
    setvars = (f"FabricSweepCheck.pairs={','.join(f'{n}:{n}' for n in chosen.nodes)}",
               f"FabricSweepCheck.time_limit={chosen.minutes}m")
    with nightly_lock(ctx.state, system):
        swept = fabric_sweep(ctx, system, drain=drain, topology="none", setvars=setvars,
                             job_options=job_options, labels=(LABEL, *labels),
                             trigger="nightly", retests=0)
    with db.connect(ctx.dsn) as conn:
        cost = cov.run_cost(conn, swept.run_id)
    text = "\n".join([
        f"perfguard nightly on {system} within {budget:g} node-hours: run {swept.run_id}",
        f"measured {len(chosen.nodes)} node(s): {compact_nodes(chosen.nodes)} "
        f"({chosen.left} left for later nights); estimated {chosen.estimated:.3g} "
        f"node-hours at {per_node:.3g} a node ({why}); each of {jobs} job(s) limited to "
        f"{chosen.minutes} min",
        tx.cost_line(cost) + (f" ({cost.node_hours / budget:.2%} of the budget)"
                              if cost else ""),
        "", swept.text])
    return CoverageOutcome(swept.run_id, chosen, cost, swept.findings, text)


def jobs_per_night(ctx: Context, system: str, node: str,
                   job_options: tuple[str, ...] = ()) -> int:
    """How many jobs a loopback sweep submits (one per HCA and memory kind the node's
    partition has), from a ReFrame dry run: the time limit divides the budget by it."""
    request = RunRequest(system=system, tags=("sweep",), dry_run=True,
                         setvars=(f"FabricSweepCheck.pairs={node}:{node}",),
                         job_options=job_options,
                         output=ctx.state / "log" / "coverage-dry-run.log")
    outcome = run_reframe(ctx, request)
    if outcome.returncode != 0 or not outcome.report.exists():
        raise PerfguardError(f"reframe's dry run of the loopback sweep failed (exit "
                             f"{outcome.returncode}): see {request.output}")
    cases = [c for c in rep.load(outcome.report).testcases
             if not c.fixture and c.result != "skip"]
    if not cases:
        raise PerfguardError(f"the loopback sweep would run nothing on {system} (every "
                             f"variant skipped): `perfguard checks --system {system} -t "
                             f"sweep` says why")
    return len(cases)


def nodes_listing(ctx: Context, system: str, partition: str | None = None,
                  now: datetime | None = None) -> str:
    """`perfguard nodes`: each node's state and how long ago it was measured."""
    states = node_states(ctx, partition)
    with db.connect(ctx.dsn) as conn:
        rows = cov.coverage(conn, system)
    rows = [row for row in rows if row.node in states]
    return tx.coverage_table(rows, states, now or datetime.now(timezone.utc))
