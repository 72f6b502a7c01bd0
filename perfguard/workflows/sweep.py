"""`perfguard sweep`: sweep, retest the suspects alone beside reference pairs, blame,
store the findings and, if asked, drain the blamed nodes (and resume them later)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from perfguard import paths
from perfguard.contract import switches
from perfguard.contract.switches import leaf_of
from perfguard.errors import PerfguardError
from perfguard.judge import fingerprint as fp
from perfguard.judge import rules as judge
from perfguard.judge import sweep as sw
from perfguard.judge import verdict as vd
from perfguard.present import text as tx
from perfguard.run.reframe import RunRequest
from perfguard.site.context import Context
from perfguard.store import db
from perfguard.workflows.pipeline import run_and_store


def excluded_nodes(ctx: Context, keep: str) -> tuple[set[str], str]:
    """The nodes ``keep`` names, and the partition's other nodes as a list for
    sbatch --exclude."""
    env = ctx.slurm_env()
    wanted = subprocess.run(["scontrol", "show", "hostnames", keep], capture_output=True,
                            text=True, env=env)
    every = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True,
                           env=env)
    if wanted.returncode != 0 or every.returncode != 0:
        raise PerfguardError(f"cannot resolve nodes {keep!r}: "
                             f"{(wanted.stderr or every.stderr).strip()}")
    keep_set = set(wanted.stdout.split())
    unknown = keep_set - set(every.stdout.split())
    if unknown:
        raise PerfguardError(f"--nodes names nodes Slurm does not know: {sorted(unknown)}")
    return keep_set, ",".join(sorted(set(every.stdout.split()) - keep_set, key=fp.natural_key))


@dataclass
class SweepOutcome:
    run_id: int
    findings: list
    drained: list[str]
    text: str
    #: The sweep's runs: the sweep, then its retests.
    runs: list[int] = field(default_factory=list)
    #: Every pair's latest value after the retests, with the limits it was judged by.
    state: sw.Sweep | None = None


class NothingMeasured(PerfguardError):
    """A sweep run stored no pair (its jobs failed, were held, or cancelled): why."""


def fabric_sweep(ctx: Context, system: str, nodes: str | None = None,
                 drain: bool = False, topology: str = "slurm",
                 setvars: tuple[str, ...] = (), job_options: tuple[str, ...] = (),
                 labels: tuple[str, ...] = ("sweep",), trigger: str = "sweep",
                 retests: int | None = None) -> SweepOutcome:
    """Sweep, retest the failing pairs one at a time, blame, store, drain. Where the leaf
    switches are known (``topology``: see switch_leaves), the sweep pairs nodes within
    each leaf and one pair per leaf pair, and may blame a leaf. ``setvars`` (ReFrame's
    -S, such as FabricSweepCheck.time_limit=2h) and ``job_options`` (sbatch's
    ``--reservation=R`` …) go to the sweep and its retests. The budget nightly sweeps
    loopbacks alone (``FabricSweepCheck.pairs=n:n,…``) with its own ``labels`` and
    ``trigger``, and ``retests`` (else the criteria's) 0: a retest would spend beyond
    its budget. `upgrade-check` adds its labels (kept on the retests too)."""
    criteria = sw.load_criteria(paths.site_file("sweep.yaml"), system)
    kept = excluded_nodes(ctx, nodes)[0] if nodes else None
    leaves = switch_leaves(ctx, topology, kept)
    asked = setvars
    if leaves:
        setvars += ("FabricSweepCheck.switch_groups=" + ",".join(
            f"{node}:{index}" for index, members in enumerate(leaves.values())
            for node in members),)
    elif kept:
        setvars += (f"FabricSweepCheck.nodes={','.join(sorted(kept, key=fp.natural_key))}",)
    first = _sweep_run(ctx, system, setvars, labels, job_options, trigger)
    state_of = measured_sweep(ctx, system, first, criteria,
                              f"sweep run {first} measured no pair")
    runs = [first]
    state_of, load, unretested = _retested(
        ctx, system, asked, first, state_of,
        criteria.retests if retests is None else retests, job_options,
        tuple(label for label in labels if label != "sweep"), runs)
    notes = "; ".join(note for note in (load, unretested) if note)
    findings = [sw.Finding(f.kind, f.subject, f.hca, f"{f.evidence}; {notes}" if notes
                           else f.evidence) for f in sw.blame(state_of, leaf_of(leaves))]
    drained = _drain(ctx, first, findings) if drain and not unretested else []
    with db.connect(ctx.dsn) as conn:
        sw.store_findings(conn, first, findings, set(drained))
    shape = f"{len(leaves)} leaf switches ({topology})" if leaves else "every pair"
    text = tx.sweep(first, system, state_of, findings, drained, shape)
    if unretested:
        text += f"\n{unretested[0].upper()}{unretested[1:]}" + (
            "; nothing drained on one measurement" if drain and findings else "")
    return SweepOutcome(first, findings, drained, text, runs, state_of)


def measured_sweep(ctx: Context, system: str, run_id: int, criteria: sw.Criteria,
                   none_measured: str) -> sw.Sweep:
    """What run ``run_id`` measured, with the limits it is judged by: the criteria's
    from this sweep and each pair's own from its history. One place for the sweep and the
    budget nightly, so both judge a loopback alike. ``NothingMeasured`` (``none_measured``
    and why) where the run stored no pair."""
    with db.connect(ctx.dsn) as conn:
        found = sw.measurements(conn, run_id)
        if not found:
            raise NothingMeasured(f"{none_measured}: {sw.why_unmeasured(conn, run_id)}")
        own = sw.history_limits(conn, run_id, judge.load_rules(vd.rules_file()), criteria)
    rates = _line_rates(system)
    return sw.Sweep(found, sw.limits(found, rates, criteria), pair_limits=own,
                    criteria=criteria, line_rate=rates)


def _retested(ctx: Context, system: str, asked: tuple[str, ...], first: int,
              state_of: sw.Sweep, retests: int, job_options: tuple[str, ...] = (),
              labels: tuple[str, ...] = (), runs: list[int] | None = None
              ) -> tuple[sw.Sweep, str, str]:
    """The sweep after up to ``retests`` retests of its failing pairs, one at a time, each
    kind's best pair measured again beside them; the host's load at the last retest; and
    why a retest measured nothing (the sweep then stands as measured once: said, and
    nobody drained). Each retest's run id is added to ``runs``."""
    load = ""
    for _ in range(retests):
        suspects = state_of.failing()
        if not suspects:
            break
        pairs = sorted({f"{m.server}:{m.client}"
                        for m in suspects + state_of.references(suspects)})
        load = sw.host_load()
        again = _sweep_run(ctx, system,
                           (*asked, f"FabricSweepCheck.pairs={','.join(pairs)}",
                            "FabricSweepCheck.at_once=1"),
                           (*labels, "sweep-retest", f"sweep:{first}"), job_options)
        if runs is not None:
            runs.append(again)
        with db.connect(ctx.dsn) as conn:
            remeasured = sw.measurements(conn, again)
            if not remeasured:
                return state_of, load, (f"the retest (run {again}) measured nothing: "
                                        f"{sw.why_unmeasured(conn, again)}")
        state_of = state_of.retested(remeasured)
    return state_of, load, ""


def loopback_retest(ctx: Context, system: str, pairs: list[str], setvars: tuple[str, ...],
                    job_options: tuple[str, ...], labels: tuple[str, ...]) -> int:
    """Loopbacks (``node:node``) measured again one at a time (`upgrade-check`: a node
    below its own level, beside reference nodes); the run id."""
    return _sweep_run(ctx, system, (*setvars, f"FabricSweepCheck.pairs={','.join(pairs)}",
                                    "FabricSweepCheck.at_once=1"),
                      (*labels, "sweep-retest"), job_options)


def switch_leaves(ctx: Context, source: str, kept: set[str] | None) -> dict[str, list[str]]:
    """Leaf → the nodes to sweep on it (``kept``, else those that can run a job now): from
    Slurm's own tree (``slurm``: {} where it has none), from a topology.conf or
    ibnetdiscover file, or none (``none``: every pair)."""
    if source == "none":
        return {}
    leaves = switches.from_slurm(ctx.slurm_env()) if source == "slurm" else \
        switches.load(Path(source))
    if not leaves:
        return leaves
    outside = (kept or set()) - set(leaf_of(leaves))
    if outside:
        raise PerfguardError(f"--nodes names nodes on no leaf switch of {source}: "
                             f"{fp.compact_nodes(outside)} (`--topology none` sweeps every "
                             f"pair)")
    chosen = kept if kept is not None else _usable_nodes(ctx)
    narrowed = {leaf: [n for n in members if n in chosen] for leaf, members in leaves.items()}
    return {leaf: members for leaf, members in narrowed.items() if members}


def _sweep_run(ctx: Context, system: str, setvars: tuple[str, ...],
               labels: tuple[str, ...], job_options: tuple[str, ...] = (),
               trigger: str = "sweep") -> int:
    completed = run_and_store(ctx, RunRequest(system=system, tags=("sweep",),
                                              setvars=setvars, trigger=trigger, labels=labels,
                                              job_options=job_options))
    if not completed.stored:
        raise PerfguardError(f"sweep run not stored: {completed.message}; the report is kept "
                             f"in the spool ({completed.report.name})")
    return completed.run_id


def _line_rates(system: str) -> dict[str, float]:
    """HCA → line rate in MiB/s, from the system's topology file (none: no such floor)."""
    from perfguard.contract.topology import find_system

    known = find_system(paths.site_folder("systems"), system)
    return {hca.name: hca.data_rate_gbps * 1e9 / 8 / 2**20
            for part in (known.partitions if known else ()) for hca in part.node.hcas
            if hca.data_rate_gbps}


def _usable_nodes(ctx: Context) -> set[str]:
    """Nodes that can run a job now: a sweep that lists a down or drained node in
    --nodelist would wait for it forever."""
    listing = _slurm(ctx, "sinfo", "-h", "-N", "-t", "idle,mixed,allocated,completing",
                    "-o", "%N")
    if listing.returncode != 0:
        raise PerfguardError(f"sinfo failed: {listing.stderr.strip()}")
    return set(listing.stdout.split())


def _slurm(ctx: Context, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, env=ctx.slurm_env())


def _drain(ctx: Context, run_id: int, findings: list) -> list[str]:
    """Blamed nodes (and nodes of blamed HCAs) to DRAIN, the reason naming the sweep."""
    drained = []
    for finding in findings:
        node = finding.node
        if node is None or node in drained:
            continue
        reason = f"{sw.DRAIN_MARK} sweep run {run_id}: {finding.kind} {finding.subject} " \
                 f"{finding.evidence}"[:200]
        result = _slurm(ctx, "scontrol", "update", f"NodeName={node}", "State=DRAIN",
                        f"Reason={reason}")
        if result.returncode != 0:
            raise PerfguardError(f"cannot drain {node}: {result.stderr.strip()}")
        drained.append(node)
    return drained


def drained_by_perfguard(ctx: Context) -> dict[str, str]:
    """Nodes drained with a reason perfguard wrote: node → reason."""
    listing = _slurm(ctx, "sinfo", "-h", "-N", "-o", "%N|%T|%E")
    if listing.returncode != 0:
        raise PerfguardError(f"sinfo failed: {listing.stderr.strip()}")
    found = {}
    for line in listing.stdout.splitlines():
        node, node_state, reason = (line.split("|", 2) + ["", ""])[:3]
        if reason.startswith(sw.DRAIN_MARK) and "drain" in node_state.lower():
            found[node] = reason
    return found


def resume_drained(ctx: Context) -> list[str]:
    """RESUME the nodes perfguard drained; nodes drained by anyone else stay as they are."""
    nodes = sorted(drained_by_perfguard(ctx), key=fp.natural_key)
    for node in nodes:
        result = _slurm(ctx, "scontrol", "update", f"NodeName={node}", "State=RESUME")
        if result.returncode != 0:
            raise PerfguardError(f"cannot resume {node}: {result.stderr.strip()}")
    return nodes
