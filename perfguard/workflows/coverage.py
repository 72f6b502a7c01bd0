"""`perfguard nightly --budget NODE_HOURS` and `perfguard nodes`: the whole machine
measured node by node over several nights within a budget a night (issue 68).

Each night sweeps the loopback of every HCA (the fabric sweep's per-node check) on the
nodes measured longest ago, idle ones first, as many as the budget buys at the cost per
node the earlier budget nightlies stored: each node in a job of its own (ReFrame's -P over
``FabricSweepCheck.pairs``), so a busy node's job waits alone. Every job's time limit caps
the night at the budget even where the estimate is wrong. The sweep judges each loopback
against the others' and its own history (docs/sweep.md); the run is stored with the label
``coverage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from perfguard import paths
from perfguard.errors import PerfguardError, UsageError
from perfguard.judge import coverage as cov
from perfguard.judge import sweep as sw
from perfguard.judge.fingerprint import compact_nodes, natural_key
from perfguard.present import text as tx
from perfguard.run.reframe import RunRequest, run_reframe
from perfguard.site import slurm
from perfguard.site.context import Context
from perfguard.store import db
from perfguard.store import report as rep
from perfguard.workflows import sweep as sweeping
from perfguard.workflows.nightly import nightly_lock
from perfguard.workflows.pipeline import run_and_store

#: The label every budget nightly's run carries (its cost per node is read back by it).
LABEL = "coverage"
#: A node's job still waiting for it this long after the nightly began is dropped
#: (sbatch --deadline): the night ends before the next one starts.
WAIT_HOURS = 20


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
    chosen = cov.plan(candidates, budget, per_node, jobs, why,
                      max_minutes(ctx, partition))
    if not chosen.nodes:
        raise UsageError(f"--budget {budget:g} node-hours cannot give one node's {jobs} "
                         f"job(s) a minute each within the budget: nothing measured")
    with nightly_lock(ctx.state, system):
        completed = run_and_store(ctx, request(system, chosen, labels, job_options,
                                               one_host(ctx, partition)))
        run_id = completed.run_id
        if run_id is None:
            raise PerfguardError(f"the budget nightly's run was not stored: "
                                 f"{completed.message}; its report is kept in the spool "
                                 f"({completed.report.name})")
        findings, drained, said = judged(ctx, system, run_id, drain)
    with db.connect(ctx.dsn) as conn:
        cost = cov.run_cost(conn, run_id)
    text = "\n".join([
        f"perfguard nightly on {system} within {budget:g} node-hours: run {run_id}",
        f"measured {len(chosen.nodes)} node(s): {compact_nodes(chosen.nodes)} "
        f"({chosen.left} left for later nights); estimated {chosen.estimated:.3g} "
        f"node-hours at {per_node:.3g} a node ({why}); {jobs} job(s) a node, each "
        f"limited to {chosen.minutes} min",
        tx.cost_line(cost) + (f" ({cost.node_hours / budget:.2%} of the budget)"
                              if cost else ""),
        "", said])
    return CoverageOutcome(run_id, chosen, cost, findings, text)


def request(system: str, chosen: cov.Plan, labels: tuple[str, ...],
            job_options: tuple[str, ...], serial: bool = False) -> RunRequest:
    """The loopback sweep of each chosen node in a job of its own (ReFrame's -P over
    ``FabricSweepCheck.pairs``: a busy node's job waits alone, a slow node holds nobody
    else's), each job's time limit the plan's, and a deadline: a job still waiting for its
    node then is dropped (the node stays due) and the night ends before the next.
    ``serial``: one job after another, where the nodes are virtual nodes of one host
    (side by side their loopbacks would share its CPUs and be stored disturbed)."""
    pairs = ",".join(f"{node}:{node}" for node in chosen.nodes)
    return RunRequest(system=system, tags=("sweep",), trigger="nightly",
                      labels=(LABEL, *labels),
                      extra=("-P", f"FabricSweepCheck.pairs={pairs}",
                             *(("--exec-policy=serial",) if serial else ())),
                      setvars=(f"FabricSweepCheck.time_limit={chosen.minutes}m",),
                      job_options=(*job_options, f"--deadline=now+{WAIT_HOURS}hours"))


def judged(ctx: Context, system: str, run_id: int, drain: bool) -> tuple[list, list, str]:
    """The sweep's judgement of the night's loopbacks (each against the others' and its
    own history, docs/sweep.md), measured once: no retest spends beyond the budget.
    Findings stored; with ``drain`` the blamed nodes drained."""
    criteria = sw.load_criteria(paths.site_file("sweep.yaml"), system)
    state = sweeping.measured_sweep(ctx, system, run_id, criteria,
                                    f"budget nightly run {run_id} measured no node")
    found = state.measurements
    findings = sw.blame(state)
    drained = sweeping._drain(ctx, run_id, findings) if drain else []
    with db.connect(ctx.dsn) as conn:
        sw.store_findings(conn, run_id, findings, set(drained))
    nodes = sorted({m.server for m in found}, key=natural_key)
    return findings, drained, tx.sweep(run_id, system, state, findings, drained,
                                       f"loopbacks of {compact_nodes(nodes)}")


def one_host(ctx: Context, partition: str | None) -> bool:
    """The partition's nodes are several slurmd of one host (the embedded cluster)."""
    return slurm.nodes(ctx).shares_host(partition or slurm.DEFAULT)


def max_minutes(ctx: Context, partition: str | None) -> int | None:
    """The partition's MaxTime in minutes (sinfo %l), None where it has none."""
    where = ["-p", partition] if partition else []
    listing = slurm.run(ctx, "sinfo", "-h", *where, "-o", "%l|%P")
    for line in listing.stdout.splitlines():
        limit, part = (line.split("|") + [""])[:2]
        if partition or part.endswith("*"):
            return slurm_minutes(limit)
    return None


def slurm_minutes(text: str) -> int | None:
    """Slurm's ``[D-]HH:MM:SS``, ``MM:SS`` or ``MM`` as minutes; None for ``infinite``."""
    text = text.strip()
    if not text or text in ("infinite", "UNLIMITED", "n/a"):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    hours, minutes = (parts + [0, 0])[:2] if len(parts) == 3 else (0, parts[0])
    return int(days or 0) * 1440 + hours * 60 + minutes


def jobs_per_night(ctx: Context, system: str, node: str,
                   job_options: tuple[str, ...] = ()) -> int:
    """How many jobs the loopback sweep of one node submits (one per HCA and memory kind
    its partition has), from a ReFrame dry run: the time limit divides the budget by it."""
    dry = RunRequest(system=system, tags=("sweep",), dry_run=True,
                     setvars=(f"FabricSweepCheck.pairs={node}:{node}",),
                     job_options=job_options,
                     output=ctx.state / "log" / "coverage-dry-run.log")
    outcome = run_reframe(ctx, dry)
    if outcome.returncode != 0 or not outcome.report.exists():
        raise PerfguardError(f"reframe's dry run of the loopback sweep failed (exit "
                             f"{outcome.returncode}): see {dry.output}")
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
