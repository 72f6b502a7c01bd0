"""After a driver or firmware upgrade: the upgraded nodes measured and judged against a
baseline run, and (when asked) their level accepted.

With ``--nodes``, every listed node is measured on its own, not only the nodes a
multi-node check happens to get: the fabric sweep (each HCA in loopback, every pair
among the listed nodes and the peers), the checks that run on one node (a one-node
Himeno; NCCL on the node's GPUs where it has some), each on every node (ReFrame's
--distribute), then the multi-node acceptance checks once. Each node is judged against
its own level before the upgrade and against its peers (perfguard.judge.upgrade), with
what changed in its fingerprint beside its verdict; failed nodes can be drained and
passed ones returned to service."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field

from perfguard import paths
from perfguard.errors import PerfguardError, UsageError
from perfguard.judge import fingerprint as fp
from perfguard.judge import run_findings
from perfguard.judge import sweep as sw
from perfguard.judge import upgrade as up
from perfguard.judge import verdict as vd
from perfguard.run.reframe import NothingSelected, RunRequest
from perfguard.site.context import Context
from perfguard.store import db, queries
from perfguard.workflows import sweep
from perfguard.workflows.nightly import with_report
from perfguard.workflows.pipeline import RunVerdict, run_pipeline

#: The checks measured on each node by itself ({size}: Himeno's grid, --himeno-size).
PER_NODE_CHECKS = ("HimenoCheck%size={size}%nodes=1%ranks_step=1", "NcclTestsCheck%collnet=off")
#: ReFrame variables the per-node run sets: NCCL over one node's GPUs.
PER_NODE_SETVARS = ("NcclTestsCheck.num_nodes=1",)


@dataclass(frozen=True)
class UpgradeRequest:
    """What `perfguard upgrade-check` was asked."""
    baseline: str | None
    nodes: str | None
    tags: tuple[str, ...] = ("acceptance",)
    system: str = "local"
    accept: str | None = None
    job_options: tuple[str, ...] = ()
    #: Not-upgraded nodes the sweep pairs the listed ones with (a level to compare with).
    peers: str | None = None
    drain: bool = False
    resume: bool = False
    #: Groups the batches of one upgrade (`--summary LABEL`); also a label of its runs.
    label: str | None = None
    #: ReFrame's -S for every run of the check (fewer iterations, a time limit).
    setvars: tuple[str, ...] = ()
    himeno_size: str = "M"


@dataclass
class UpgradeOutcome:
    """The acceptance run's verdict and, with --nodes, one verdict per node."""
    run: RunVerdict
    nodes: list[up.NodeVerdict] = field(default_factory=list)
    text: str = ""

    @property
    def exit_code(self) -> int:
        """1 when a node failed, else the acceptance run's own exit code."""
        if any(not v.passed for v in self.nodes):
            return 1
        return self.run.exit_code


def upgrade_check(ctx: Context, request: UpgradeRequest) -> UpgradeOutcome:
    """The upgrade check: per node where ``nodes`` are given, then the acceptance run."""
    with db.connect(ctx.dsn) as conn:
        # a wrong baseline fails before anything runs; none: each node's history so far
        baseline_id = vd.resolve_run(conn, request.baseline) if request.baseline else \
            _latest_run(conn)
    if not request.nodes:
        if request.baseline is None:
            raise UsageError("upgrade-check without --nodes needs --baseline (a run id, "
                             "session uuid or label to compare with)")
        run = _acceptance(ctx, request, None)
        return UpgradeOutcome(run, [], run.text)
    return _per_node(ctx, request, baseline_id)


def _latest_run(conn) -> int | None:
    row = queries.one(conn, "latest_run")
    return row[0] if row else None


def _labels(request: UpgradeRequest) -> tuple[str, ...]:
    return ("post-upgrade", *((request.label,) if request.label else ()))


def _acceptance(ctx: Context, request: UpgradeRequest, kept: set[str] | None) -> RunVerdict:
    """The checks tagged acceptance once, on the listed nodes only (the old upgrade check)."""
    extra: tuple[str, ...] = ()
    setvars: tuple[str, ...] = request.setvars
    if request.nodes:
        kept, others = sweep.excluded_nodes(ctx, request.nodes)
        extra = ("-J", f"exclude={others}") if others else ()
        # shapes that need more nodes than given are skipped before anything is submitted
        setvars += (f"nodes_available={len(kept)}",)
    outcome = run_pipeline(ctx, RunRequest(system=request.system, tags=request.tags,
                                           extra=extra, setvars=setvars, trigger="upgrade",
                                           labels=_labels(request),
                                           job_options=request.job_options),
                           request.baseline, kept)
    against = f" against baseline {request.baseline}" if request.baseline else ""
    outcome.text = (f"perfguard upgrade check on {request.system}"
                    + (f" (nodes {request.nodes})" if request.nodes else "")
                    + f": run {outcome.completed.run_id}{against}\n" + outcome.text)
    if request.accept and outcome.completed.run_id is not None:
        outcome.text += "\n" + accept_new_level(ctx, outcome.completed.run_id, kept,
                                                request.accept)
    return with_report(ctx, outcome, request.baseline)


# --- every node on its own ----------------------------------------------------------
@dataclass
class Measured:
    """What the per-node phases found, before judging."""
    sweep_runs: list[int] = field(default_factory=list)
    node_run: int | None = None
    findings: list[sw.Finding] = field(default_factory=list)
    #: (node, figure name) → the sweep's latest loopback after retests
    loopbacks: list[up.Figure] = field(default_factory=list)
    failures: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)


def _per_node(ctx: Context, request: UpgradeRequest, baseline_id: int | None) -> UpgradeOutcome:
    started = time.monotonic()
    listed = hostnames(ctx, request.nodes)
    peers = [n for n in hostnames(ctx, request.peers) if n not in listed] \
        if request.peers else []
    sweep.excluded_nodes(ctx, ",".join(listed + peers))  # every node known to Slurm
    held = _held_for_the_check(ctx, request, listed, peers)
    try:
        measured = Measured()
        _sweep_phase(ctx, request, listed + peers, measured)
        history = _history(ctx, request.system, listed + peers, baseline_id)
        _confirm_loopbacks(ctx, request, listed, peers, history, measured)
        _node_phase(ctx, request, listed + peers, measured)
        run = _acceptance(ctx, request, set(listed))
    except BaseException:
        _drain_again(ctx, held, "the check stopped before its verdict")
        raise
    verdicts = _judge(ctx, request, listed, peers, baseline_id, history, measured, run)
    actions = _drain_and_resume(ctx, request, verdicts, held, run.completed.run_id)
    if run.completed.run_id is not None:
        _store(ctx, request, verdicts, run.completed.run_id, baseline_id)
        if run.html is not None:  # written before the nodes were judged: now with them
            from perfguard.present import htmlreport

            htmlreport.write_for_run(ctx.state, ctx.dsn, run.completed.run_id,
                                     baseline_id if request.baseline else None)
    answer = _answer(request, listed, peers, baseline_id, measured, verdicts, actions,
                     time.monotonic() - started, run)
    return UpgradeOutcome(run, verdicts, answer)


def hostnames(ctx: Context, hostlist: str) -> list[str]:
    """A Slurm hostlist spelled out, in natural order."""
    done = subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True,
                          text=True, env=ctx.slurm_env())
    if done.returncode != 0 or not done.stdout.split():
        raise UsageError(f"cannot read the hostlist {hostlist!r}: "
                         f"{done.stderr.strip() or 'it names no node'}")
    return sorted(dict.fromkeys(done.stdout.split()), key=fp.natural_key)


def node_states(ctx: Context, nodes: list[str]) -> dict[str, tuple[str, str, str]]:
    """node → (state, reason, GRES) as sinfo says."""
    done = subprocess.run(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N|%T|%E|%G"],
                          capture_output=True, text=True, env=ctx.slurm_env())
    if done.returncode != 0:
        raise PerfguardError(f"sinfo failed: {done.stderr.strip()}")
    out = {}
    for line in done.stdout.splitlines():
        node, state, reason, gres = (line.split("|", 3) + ["", "", ""])[:4]
        out.setdefault(node, (state, reason, gres))
    return out


def _drained(state: str) -> bool:
    return "drain" in state.lower()


def _held_for_the_check(ctx: Context, request: UpgradeRequest, listed: list[str],
                        peers: list[str]) -> dict[str, str]:
    """Drained listed nodes: Slurm runs no job on them, so without --resume the check
    stops here; with it they are resumed for the check (node → the reason they had)."""
    states = node_states(ctx, listed + peers)
    drained = {n: states[n][1] for n in listed if n in states and _drained(states[n][0])}
    peers_out = [n for n in peers if n in states and _drained(states[n][0])]
    if peers_out:
        raise UsageError(f"--peers names drained nodes ({fp.compact_nodes(peers_out)}): "
                         f"Slurm runs no job there; name peers in service")
    if drained and not request.resume:
        said = "; ".join(f"{n}: {r or 'no reason'}" for n, r in drained.items())
        raise UsageError(f"--nodes names drained nodes ({said}): Slurm runs no job on them. "
                         f"--resume resumes them for the check (inside a maintenance "
                         f"reservation, --reservation, no user's job lands there); those "
                         f"that fail are drained again; nothing was run")
    for node in drained:
        _scontrol(ctx, "update", f"NodeName={node}", "State=RESUME")
    return drained


def _drain_again(ctx: Context, held: dict[str, str], why: str) -> None:
    """Nodes resumed for the check back to drained, with the reason they had."""
    for node, reason in held.items():
        _scontrol(ctx, "update", f"NodeName={node}", "State=DRAIN",
                  f"Reason={reason or why}")


def _scontrol(ctx: Context, *argv: str) -> None:
    done = subprocess.run(["scontrol", *argv], capture_output=True, text=True,
                          env=ctx.slurm_env())
    if done.returncode != 0:
        raise PerfguardError(f"scontrol {' '.join(argv[:2])} failed: {done.stderr.strip()}")


def _sweep_phase(ctx: Context, request: UpgradeRequest, nodes: list[str],
                 measured: Measured) -> None:
    """Each node's HCAs in loopback and every pair (perfguard sweep, retests and blame):
    a node the sweep blames fails against its peers."""
    try:
        outcome = sweep.fabric_sweep(ctx, request.system, ",".join(nodes),
                                     setvars=request.setvars,
                                     job_options=request.job_options,
                                     labels=_labels(request))
    except sweep.NothingMeasured as exc:
        for node in nodes:
            measured.failures.setdefault(node, []).append(f"the fabric sweep: {exc}")
        measured.text.append(f"fabric sweep: {exc}")
        return
    measured.sweep_runs = outcome.runs
    measured.findings = outcome.findings
    measured.text.append(outcome.text)
    for m in outcome.state.measurements if outcome.state else []:
        if m.loopback and m.value is not None and m.metric in sw.BETTER:
            measured.loopbacks.append(up.Figure(m.server, f"loopback {m.metric} {m.hca}",
                                                m.value, m.unit, sw.BETTER[m.metric]))
    for finding in outcome.findings:
        if finding.node is not None:
            measured.failures.setdefault(finding.node, []).append(
                f"the fabric sweep blames {finding.kind} {finding.subject}: "
                f"{finding.evidence}")


def _node_phase(ctx: Context, request: UpgradeRequest, nodes: list[str],
                measured: Measured) -> None:
    """The one-node checks on every node (ReFrame's --distribute, one job per node), the
    others excluded; GPU checks where Slurm gives the node GPUs, else a note why not."""
    from perfguard.workflows.pipeline import run_and_store

    others = sweep.excluded_nodes(ctx, ",".join(nodes))[1]
    names = tuple(name.format(size=request.himeno_size) for name in PER_NODE_CHECKS)
    try:
        completed = run_and_store(ctx, RunRequest(
            system=request.system, names=names,
            extra=("--distribute=all", *(("-J", f"exclude={others}") if others else ())),
            setvars=(*PER_NODE_SETVARS, *request.setvars), trigger="upgrade",
            labels=(*_labels(request), "per-node"), job_options=request.job_options))
    except NothingSelected:
        for node in nodes:
            measured.failures.setdefault(node, []).append(
                "the one-node checks ran nowhere: ReFrame's --distribute found no node it "
                "may use among them (in a reservation not given with --reservation, down?)")
        return
    if not completed.stored:
        for node in nodes:
            measured.failures.setdefault(node, []).append(
                f"the one-node checks were not stored: {completed.message}")
        return
    measured.node_run = completed.run_id
    with db.connect(ctx.dsn) as conn:
        run_findings.judge_and_record(conn, completed.run_id)
        cases = queries.tuples(conn, "upgrade_node_cases", (completed.run_id,))
    ran = set()
    for check, params, node, state, reason in cases:
        ran.add(node)
        what = f"{check}{_params(params)}"
        if state == "test-failed":
            measured.failures.setdefault(node, []).append(f"{what} failed: {reason}")
        elif state in ("skipped", "aborted", "disturbed"):
            measured.notes.setdefault(node, []).append(f"{what} {state}: {reason}")
    for node in nodes:
        if node not in ran:
            measured.notes.setdefault(node, []).append(
                f"no one-node check ran there (run {completed.run_id})")
    states = node_states(ctx, nodes)
    for node in nodes:
        gres = states.get(node, ("", "", ""))[2]
        if "gpu" not in gres:
            measured.notes.setdefault(node, []).append(
                f"GPU checks not run: no GPU (Slurm's GRES {gres or '(null)'})")


def _params(params: dict) -> str:
    return "".join(f" %{k}={v}" for k, v in sorted(params.items()))


def _history(ctx: Context, system: str, nodes: list[str],
             baseline_id: int | None) -> dict[tuple, list[float]]:
    """(node, figure name) → the node's values of it up to the baseline, oldest first."""
    history: dict[tuple, list[float]] = {}
    with db.connect(ctx.dsn) as conn:
        before = _node_figures(conn, system, nodes, [], baseline_id) + \
            _loopbacks(conn, system, nodes, [], baseline_id)
    for f in before:
        history.setdefault((f.node, f.name), []).append(f.value)
    return history


def _confirm_loopbacks(ctx: Context, request: UpgradeRequest, listed: list[str],
                       peers: list[str], history: dict[tuple, list[float]],
                       measured: Measured) -> None:
    """A listed node's loopback below its own level is measured again (as often as the
    sweep retests, site_config/sweep.yaml), one at a time beside the loopbacks of up to
    two reference nodes (peers first) that tell the conditions: it fails only when every
    measurement missed, its limit scaled to how the references fared then."""
    criteria = sw.load_criteria(paths.site_file("sweep.yaml"), request.system)
    mine = [f for f in measured.loopbacks if f.node in listed]
    for _ in range(criteria.retests):
        suspects = up.own_misses(mine, history, criteria)
        if not suspects:
            break
        suspect_nodes = {f.node for f in suspects}
        references = [n for n in peers + listed if n not in suspect_nodes and any(
            node == n for node, _ in history)][:2]
        pairs = [f"{n}:{n}" for n in sorted(suspect_nodes | set(references),
                                             key=fp.natural_key)]
        run_id = sweep.loopback_retest(ctx, request.system, pairs, request.setvars,
                                       request.job_options, _labels(request))
        measured.sweep_runs.append(run_id)
        with db.connect(ctx.dsn) as conn:
            again = _loopbacks(conn, request.system, listed + peers, [run_id], None)
        mine = up.remeasured(mine, again, suspects, history)
    measured.loopbacks = mine + [f for f in measured.loopbacks if f.node not in listed]


def _judge(ctx: Context, request: UpgradeRequest, listed: list[str], peers: list[str],
           baseline_id: int | None, history: dict[tuple, list[float]], measured: Measured,
           run: RunVerdict) -> list[up.NodeVerdict]:
    """Each listed node against its own level up to the baseline and against its peers."""
    criteria = sw.load_criteria(paths.site_file("sweep.yaml"), request.system)
    with db.connect(ctx.dsn) as conn:
        now = measured.loopbacks + _node_figures(
            conn, request.system, listed + peers,
            [measured.node_run] if measured.node_run else [], None)
        last = run.completed.run_id or measured.node_run or \
            (measured.sweep_runs[-1] if measured.sweep_runs else None)
        changes = _changes(conn, listed, baseline_id, last)
    return up.node_verdicts(listed, now, history, criteria, failures=measured.failures,
                            notes=measured.notes, changes=changes)


def _node_figures(conn, system: str, nodes: list[str], runs: list[int],
                  upto: int | None) -> list[up.Figure]:
    if not runs and upto is None:
        return []
    rows = queries.rows(conn, "upgrade_node_figures",
                        {"system": system, "nodes": nodes, "runs": runs, "upto": upto})
    return [up.Figure(r["node"], f"{r['check_name']}{_params(r['params'])} {r['metric']}",
                      r["value"], r["unit"] or "", r["better"]) for r in rows]


def _loopbacks(conn, system: str, nodes: list[str], runs: list[int],
               upto: int | None) -> list[up.Figure]:
    if not runs and upto is None:
        return []
    rows = queries.rows(conn, "upgrade_node_loopbacks",
                        {"system": system, "nodes": nodes, "runs": runs, "upto": upto})
    return [up.Figure(r["node"], f"loopback {r['metric']} "
                                 f"{sw.variant_label(r['hca'], r['memory'])}",
                      r["value"], r["unit"] or "", sw.BETTER[r["metric"]]) for r in rows]


def _changes(conn, nodes: list[str], baseline_id: int | None,
             last: int | None) -> list[fp.Change]:
    """What changed in each node's fingerprint since the baseline (each against its own
    state then)."""
    if baseline_id is None or last is None:
        return []
    before = fp.fingerprints_as_of(conn, baseline_id, nodes)
    after = fp.fingerprints_as_of(conn, last, nodes)
    return [c for c in fp.diff(before, after) if c.field != fp.NOT_MEASURED]


def _drain_and_resume(ctx: Context, request: UpgradeRequest, verdicts: list[up.NodeVerdict],
                      held: dict[str, str], run_id: int | None) -> list[str]:
    """--drain: failed nodes drained, the reason beginning 'perfguard:'; a failed node
    resumed for the check goes back to drained with its reason. Passed nodes resumed for
    the check (--resume) stay in service."""
    said = []
    for v in verdicts:
        if v.passed:
            v.resumed = v.node in held
            continue
        if request.drain:
            reason = f"{sw.DRAIN_MARK} upgrade-check run {run_id}: {v.figure}"[:200]
            _scontrol(ctx, "update", f"NodeName={v.node}", "State=DRAIN", f"Reason={reason}")
            v.drained = True
        elif v.node in held:
            _drain_again(ctx, {v.node: held[v.node]}, "")
            said.append(f"{v.node} drained again as it was ({held[v.node]})")
    drained = [v.node for v in verdicts if v.drained]
    resumed = [v.node for v in verdicts if v.resumed]
    if drained:
        said.insert(0, f"drained: {fp.compact_nodes(drained)} (reason 'perfguard: "
                       f"upgrade-check run {run_id}: …')")
    if resumed:
        said.insert(0, f"resumed: {fp.compact_nodes(resumed)}")
    return said


def _store(ctx: Context, request: UpgradeRequest, verdicts: list[up.NodeVerdict],
           run_id: int, baseline_id: int | None) -> None:
    with db.connect(ctx.dsn) as conn, conn.transaction():
        queries.execute_many(conn, "insert_upgrade_node", [
            (request.label or "", v.node, run_id, baseline_id, v.passed, "; ".join(v.changed),
             v.figure, v.own_level, v.drained, v.resumed) for v in verdicts])


def _answer(request: UpgradeRequest, listed: list[str], peers: list[str],
            baseline_id: int | None, measured: Measured, verdicts: list[up.NodeVerdict],
            actions: list[str], seconds: float, run: RunVerdict) -> str:
    failed = [v.node for v in verdicts if not v.passed]
    head = (f"perfguard upgrade check on {request.system}: {len(listed)} node(s) "
            f"{fp.compact_nodes(listed)}" + (f", peers {fp.compact_nodes(peers)}" if peers
                                             else "")
            + (f", each against its own level up to run {baseline_id}" if baseline_id
               else ", no earlier run: against their peers only")
            + (f", label {request.label}" if request.label else ""))
    runs = (f"runs: fabric sweep {', '.join(map(str, measured.sweep_runs)) or '-'}, "
            f"one-node checks {measured.node_run or '-'}, acceptance "
            f"{run.completed.run_id or '-'}")
    answer = (f"{len(verdicts) - len(failed)} of {len(verdicts)} node(s) passed"
              + (f"; failed: {fp.compact_nodes(failed)}" if failed else "")
              + f" (answer after {seconds:.0f} s)")
    return "\n\n".join(part for part in (
        head, runs, *measured.text, run.text, up.rows(verdicts), "\n".join(actions),
        answer) if part)


def accept_new_level(ctx: Context, run_id: int, nodes: set[str] | None, reason: str) -> str:
    """The upgrade's run as the new level of what it measured (every line, or the lines of
    the upgraded nodes): later runs are judged against it, as `perfguard accept` does."""
    subjects = sorted(nodes, key=fp.natural_key) if nodes else ["*"]
    with db.connect(ctx.dsn) as conn:
        for subject in subjects:
            vd.accept(conn, subject, run_id, reason)
    return (f"accepted: {', '.join(subjects)} judged against the level of run {run_id} from "
            f"now on ({reason}); `perfguard accept --list` shows it")


# --- a rolling upgrade ----------------------------------------------------------------
def upgrade_summary(ctx: Context, label: str, nodes: str | None = None) -> tuple[str, int]:
    """Every node of an upgrade (``nodes``, else those of the partitions its batches
    measured) with its state; exit 1 while a node failed or is not yet measured."""
    with db.connect(ctx.dsn) as conn:
        stored = {row["node"]: row for row in queries.rows(conn, "upgrade_summary", (label,))}
    if not stored and nodes is None:
        raise UsageError(f"no upgrade check carried --label {label!r} (`perfguard "
                         f"upgrade-check --nodes LIST --label {label}` measures a batch)")
    every = hostnames(ctx, nodes) if nodes else _partition_nodes(ctx, list(stored))
    states = up.summary(every, stored)
    width = max(len(node) for node, _, _ in states)
    wide = max(len(state) for _, state, _ in states)
    lines = [f"upgrade {label}: {len(states)} node(s)"]
    lines += [(f"{node.ljust(width)}  {state.ljust(wide)}" + (f"  {detail}" if detail
                                                             else "")).rstrip()
              for node, state, detail in states]
    counts = {state: sum(1 for _, s, _ in states if s == state)
              for state in (up.PASSED, up.FAILED, up.NOT_MEASURED)}
    lines.append(", ".join(f"{n} {state}" for state, n in counts.items()))
    return "\n".join(lines), 0 if counts[up.PASSED] == len(states) else 1


def _partition_nodes(ctx: Context, measured: list[str]) -> list[str]:
    """Every node of the Slurm partitions the measured nodes are in."""
    done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%R"], capture_output=True, text=True,
                          env=ctx.slurm_env())
    if done.returncode != 0:
        raise PerfguardError(f"sinfo failed: {done.stderr.strip()}")
    pairs = [line.split("|", 1) for line in done.stdout.splitlines() if "|" in line]
    partitions = {part for node, part in pairs if node in measured}
    return sorted({node for node, part in pairs if part in partitions} | set(measured),
                  key=fp.natural_key)

