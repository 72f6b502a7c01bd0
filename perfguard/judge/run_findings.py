"""A run judged and recorded (``judge_and_record``): its lines (perfguard.judge.verdict)
and its findings: what each judged line gives as evidence, the fingerprint changes of
that night, the policy of verdict_rules.yaml (``findings:``), and the stored findings the
CLI, the report, JUnit and Grafana show (migration 0022). The grouping and the paging
rule themselves are perfguard.judge.findings (pure). One way: verdict.py never imports
this module."""

from __future__ import annotations

import dataclasses
import getpass

from perfguard.errors import UsageError
from perfguard.judge import findings as fd
from perfguard.judge import fingerprint as fp
from perfguard.judge import rules as judge
from perfguard.judge import verdict as vd
from perfguard.judge.verdict import Line, devices_of, line_name, rules_file
from perfguard.states import IMPROVEMENT, REGRESSION
from perfguard.store import queries
from perfguard.store.queries import Connection

#: Parameters that name where a line ran, not what it measured (its group leaves them out).
WHERE_PARAMS = ("hca",)


def policy(data: dict | None = None) -> fd.Policy:
    """``findings:`` of the verdict rules (already read: ``data``; any field of
    findings.Policy), else the defaults benchmarks/run_quality.py measured."""
    return fd.policy_of(judge.read_rules_file(rules_file()) if data is None else data)


def evidence_of(line: Line, rules: fd.Policy
                ) -> tuple[dict, tuple[float, ...], tuple[float, ...]]:
    """A judged line as findings read it (``Evidence``'s fields but its pooled z), its
    recent nights' distances (pooled for all lines at once by ``find``) and its
    baseline's (what its far nights are learnt from: ``findings.far_shares``). A curve
    that regressed (judged size by size) is a confirmed line with its band's typical
    size's nights (``curves.Curve.distances``)."""
    fields = {
        "name": line_name(line.check, line.params, line.metric),
        "partition": line.partition,
        "group": " ".join([line.check, *(f"{k}={v}" for k, v in sorted(line.params.items())
                                          if k not in WHERE_PARAMS), line.metric]),
        "nodes": line.nodes,
        "devices": devices_of(line.params, line.nodes),
        "change": line.change_vs_centre}
    if line.metric.endswith(" curve") and line.status in (REGRESSION, IMPROVEMENT):
        side = -1 if line.status == REGRESSION else 1
        return ({**fields, "side": side, "confirmed": True,
                 "nights": len(line.curve_distances)}, line.curve_distances, line.curve_history)
    j = line.judgement
    if j is None or j.centre is None or line.better is None or not line.series:
        return fields, (), ()
    recent = judge.split(line.series, j.rule)[1]
    side, distances = judge.evidence(recent, j, line.better)
    history = judge.history_distances(judge.judged_history(line.series, j.rule), j,
                                      line.better)
    return ({**fields, "side": side, "confirmed": line.status in (REGRESSION, IMPROVEMENT),
             "nights": len(distances), **moves(line, recent)}, distances, history)


def moves(line: Line, recent: list[float]) -> dict:
    """``Evidence``'s moves, nights_at and recent of a judged line: its worse-signed
    change against the baseline's centre on each of its baseline's nights and recent
    ones, and when each was measured (none where the times were not read)."""
    j = line.judgement
    if line.times is None or len(line.times) != len(line.series) or not j.centre:
        return {}
    kept = list(judge.judged_history(line.series, j.rule)) + list(recent)
    sign = 1.0 if line.better == "lower" else -1.0
    return {"moves": tuple(sign * (v - j.centre) / abs(j.centre) for v in kept),
            "nights_at": tuple(line.times[len(line.times) - len(kept):]),
            "recent": len(recent)}


def night_changes(conn: Connection, run_id: int,
                  rows: list[dict] | None = None) -> dict[str, set[str]]:
    """Each fingerprint change since the previous run of the system (every node against
    its own last fingerprint) → the nodes it happened on (``rows``: the run's
    fingerprints, where read already)."""
    current = fp.fingerprints(conn, run_id, rows)
    row = queries.one(conn, "previous_run", (run_id,))
    if row is None or not current:
        return {}
    before = fp.fingerprints_as_of(conn, row[0], list(current))
    return {f"{c.field} {c.before} → {c.after}": set(c.nodes)
            for c in fp.diff(before, current)
            if c.field not in (fp.NO_EARLIER_STATE, fp.NOT_MEASURED)}


def find(conn: Connection, run_id: int, lines: list[Line], rules: fd.Policy | None = None
         ) -> tuple[list[fd.Finding], float]:
    """The run's findings and the evidence a finding needed to page; each line in a
    paged finding is marked ``paged`` (a regression elsewhere does not fail the run)."""
    rules = policy() if rules is None else rules
    previous = previous_judged_run(conn, run_id)
    evidence = run_evidence(conn, previous, lines, rules)
    fingerprints = fp.fingerprint_rows(conn, run_id)
    confirm = max((line.judgement.rule.confirm for line in lines if line.judgement),
                  default=judge.DEFAULT_RULE.confirm)
    before = changes_before(conn, run_id, confirm - 1)
    found = fd.findings(evidence, rules, groups=leaves(conn, run_id),
                        environment=night_changes(conn, run_id, fingerprints),
                        acknowledged=acknowledged(conn, run_id), before=merged(before),
                        bar_before=bar_before(conn, previous))
    name_shared_hosts(found, fp.hosts_sharing(fingerprints))
    name_changes_before(found, before)
    paged = {id(e) for f in found if f.paged for e in f.lines}
    for line, given in zip(lines, evidence):
        line.paged = id(given) in paged if line.status == REGRESSION else None
    return found, rules.critical_z(len(lines))


def previous_judged_run(conn: Connection, run_id: int) -> int | None:
    """The system's run judged before this one (None: there is none; a sweep's run is
    never judged), whose nodes and findings tonight's findings read."""
    row = queries.one(conn, "previous_judged_run", (run_id,))
    return None if row is None else row[0]


def run_evidence(conn: Connection, previous: int | None, lines: list[Line],
                 rules: fd.Policy) -> list[fd.Evidence]:
    """Each of a run's judged lines as the findings read it (``evidence_of``, its z
    pooled with all the run's), with its test case's nodes in the run judged before it
    (``previous``: ``previous_judged_run``)."""
    given = [evidence_of(line, rules) for line in lines]
    far, pooled = fd.read_lines([distances for _, distances, _ in given],
                                [history for *_, history in given], rules)
    before_tonight = nodes_the_run_before(conn, previous)
    return [fd.Evidence(**({**fields, "z": z, "far": float(share)} if distances else fields),
                        nodes_before=before_tonight.get(vd.variant_of(line)))
            for line, (fields, distances, _), z, share in zip(lines, given, pooled, far)]


def testcase_nodes(conn: Connection, run_id: int) -> dict[tuple, tuple[str, ...]]:
    """(check, params, partition, environ) → the nodes its judged test case of the run
    ran on."""
    return {(check, vd.frozen(params), partition, environ): tuple(nodes or ())
            for check, params, partition, environ, nodes
            in queries.tuples(conn, "testcase_nodes", (run_id,))}


def nodes_the_run_before(conn: Connection, previous: int | None
                         ) -> dict[tuple, tuple[str, ...]]:
    """``testcase_nodes`` of the run judged before tonight's (``previous``; None: none): a
    pair line Slurm gave another partner tonight is new to its nodes' finding
    (``findings._stayed``); a test case with no nodes there is not known."""
    before = {} if previous is None else testcase_nodes(conn, previous)
    return {key: nodes for key, nodes in before.items() if nodes}  # none: not known


def bar_before(conn: Connection, previous: int | None) -> dict[str, str]:
    """The findings that reached their bar in the run judged before tonight's
    (``previous``: ``previous_judged_run``; None: none to read; ``findings.at_the_bar``):
    a worse local finding of the same subject is confirmed by it."""
    if previous is None:
        return {}
    return fd.at_the_bar(((f["subject"], f["evidence"], f["critical"], f["acknowledged"])
                          for f in stored(conn, previous)), f"run {previous}")


def leaves(conn: Connection, run_id: int) -> dict[str, set[str]]:
    """The run's leaf switches, each → its nodes, as Slurm's tree had them when it ran
    (``pipeline.leaves_now``, stored with the report's metadata; none for a run without
    Slurm's tree)."""
    return {row["leaf"]: set(row["nodes"]) for row in queries.rows(conn, "leaves_of_run",
                                                                   (run_id,))}


def changes_before(conn: Connection, run_id: int, runs: int = judge.DEFAULT_RULE.confirm - 1
                   ) -> list[tuple[str, dict[str, set[str]]]]:
    """The fingerprint changes of each of the ``runs`` runs before this one (each against
    the run before it), newest first, each with how it is named (``run 41 (one run
    before)``): the runs whose nights a level confirmed tonight was judged on."""
    earlier = [row[0] for row in queries.tuples(conn, "runs_before", (run_id, runs))]
    return [(f"run {rid} ({'one run' if n == 1 else f'{n} runs'} before)",
             night_changes(conn, rid)) for n, rid in enumerate(earlier, 1)]


def merged(before: list[tuple[str, dict[str, set[str]]]]) -> dict[str, set[str]]:
    """``changes_before``'s changes of every run as one: each change → every node it
    happened on in any of them (a driver rolled out over two nights is one change)."""
    nodes: dict[str, set[str]] = {}
    for _, changes in before:
        for change, on in changes.items():
            nodes.setdefault(change, set()).update(on)
    return nodes


def name_changes_before(found: list[fd.Finding],
                        before: list[tuple[str, dict[str, set[str]]]]) -> None:
    """A finding that no change of tonight explains names the changes on its nodes in the
    runs before (``changes_before``) with the run each was in: a driver's +0.3 µs is one
    night among the noise on its update's night and pages when its lines hold, the next
    (a shared cause confirmed by the change: ``findings.findings``'s ``before``); the
    words only, what pages is decided already."""
    for finding in found:
        if finding.environment or finding.kind == fd.ENVIRONMENT:
            continue
        nodes = {node for line in finding.lines for node in line.nodes}
        finding.changed_before = [f"{run}: {change}" for run, changes in before
                                  for change, on in changes.items() if on & nodes]


def name_shared_hosts(found: list[fd.Finding], hosts: dict[str, tuple[str, ...]]) -> None:
    """A node or device finding whose node shares its host with other nodes of the run
    names them: the words only, what pages is decided already."""
    for finding in found:
        if finding.kind in (fd.NODE, fd.DEVICE):
            finding.host_shared_with = host_clause(fd.subject_names(finding.subject), hosts)


def host_clause(named: set[str], hosts: dict[str, tuple[str, ...]]) -> str:
    """``node1 shares its host with node[2-4] …`` for the nodes a finding names
    (``findings.subject_names``: twins and devices' nodes) that share a host ('' where
    none does)."""
    sharing = [node for node in named if hosts.get(node)]
    if not sharing:
        return ""
    others = {n for node in sharing for n in hosts[node]} - named
    who = fp.compact_nodes(sharing)
    if len(sharing) == 1:
        return (f"{who} shares its host with {fp.compact_nodes(others)} (one booted kernel): "
                f"a change of that host reads as {who}'s")
    with_others = f" with {fp.compact_nodes(others)}" if others else ""
    return (f"{who} share one host{with_others} (one booted kernel): a change of that host "
            f"reads as theirs")


def acknowledged(conn: Connection, run_id: int) -> dict[str, str]:
    """The causes acknowledged on the run's system (and not cleared) → who, when, why."""
    return dict(queries.tuples(conn, "acknowledged_on_run", (run_id,)))


@dataclasses.dataclass(frozen=True)
class Acknowledged:
    """An acknowledgement made: its id, and the open findings it mutes from the next verdict
    on and those it names a part of without muting (they page on), on ``system``."""
    id: int
    system: str
    mutes: list[str]
    named: list[str]


def open_findings(conn: Connection, system: str) -> list[dict]:
    """The system's open findings: those of its runs in the week up to its newest run, each
    cause once (subject, members, run_id, paged, acknowledged)."""
    return queries.rows(conn, "open_findings", {"system": system})


def acknowledge(conn: Connection, system: str | None, subject: str, reason: str
                ) -> Acknowledged:
    """Acknowledge a cause ("known, being fixed"): the findings it names stop paging. It
    must name an open finding or a node, device, leaf or line one contains: anything else
    is refused with the open findings listed (an ack that mutes nothing is a page missed).
    ``system`` None: the system whose open findings it names (``_system_named``)."""
    if not reason.strip():
        raise UsageError("--reason: say why (it is shown with every finding it silences)")
    system, named = _system_named(conn, system, subject)
    with conn.transaction():
        row = queries.one(conn, "active_acknowledgement", (system, subject))
        if row:
            raise UsageError(f"{subject} on {system} is acknowledged already (#{row[0]}); "
                             f"`perfguard ack --clear {row[0]}` first")
        ack_id = queries.one(conn, "insert_acknowledgement",
                             (system, subject, reason, getpass.getuser()))[0]
    mutes = [f["subject"] for f in named
             if fd.acknowledges(subject, f["subject"], f["members"])]
    return Acknowledged(ack_id, system, mutes, [f["subject"] for f in named
                                                if f["subject"] not in mutes])


def _system_named(conn: Connection, system: str | None, subject: str
                  ) -> tuple[str, list[dict]]:
    """The system ``subject`` is acknowledged on and the open findings it names there:
    ``system``, or where none is given the one system whose open findings it names (a
    default of the demo's ``local`` refused every ack at a site whose system has its own
    name; the newest run's system muted the wrong one where two systems share node
    names). Refused, listing what is open, where it names none; where it names findings
    on several systems, refused naming them."""
    systems = [system] if system else [name for (name,) in queries.tuples(conn, "systems")]
    if not systems:
        raise UsageError("no run is stored yet: there is no finding to acknowledge")
    found = {name: open_findings(conn, name) for name in systems}
    named = {name: [f for f in open_ if fd.contains(subject, f["subject"], f["members"])]
             for name, open_ in found.items()}
    on = [name for name in systems if named[name]]
    if len(on) > 1:
        raise UsageError(f"{subject!r} names open findings on {len(on)} systems "
                         f"({', '.join(on)}): give --system")
    if on:
        return on[0], named[on[0]]
    where = systems[0] if len(systems) == 1 else f"any of {', '.join(systems)}"
    listed = "; ".join(f"{f['subject']} (run {f['run_id']}"
                       + (f", {name})" if len(systems) > 1 else ")")
                       for name, open_ in found.items() for f in open_)
    raise UsageError(f"{subject!r} names no open finding on {where}, nor a node, device, "
                     f"leaf or line of one; open findings: {listed or 'none'} "
                     f"(`perfguard verdict` prints them; give one, or what it names)")


def overlay(conn: Connection, run_id: int, since, found: list[dict]) -> dict[str, list[str]]:
    """What changed since the run's verdict was stored (at ``since``), shown over it and
    never written into it: each finding's subject → "acknowledged since by who on date:
    why (#id)" for the acknowledgements made later that mute it, or, of a finding muted,
    "acknowledgement #id cleared since by who on date" for those that muted it and were
    cleared since; "*" → "accepted since: cause: new level from run N accepted by …" for
    levels accepted later, "cleared since: cause: new level … (#id; cleared by …)" for
    levels it was judged with and cleared since."""
    notes: dict[str, list[str]] = {}
    if since is None:
        return notes
    at = {"run_id": run_id, "since": since}
    later = queries.tuples(conn, "acknowledged_since", at)
    cleared = queries.tuples(conn, "acknowledgements_cleared_since", at)
    for finding in found:
        muted = bool(finding["acknowledged"])
        notes[finding["subject"]] = [
            f"acknowledgement #{ack_id} cleared since {said}" if muted
            else f"acknowledged since {said} (#{ack_id})"
            for ack_id, cause, said in (cleared if muted else later)
            if fd.acknowledges(cause, finding["subject"], finding["members"])]
    notes["*"] = [f"accepted since: {cause}: {said} (#{level_id})" for level_id, cause, said
                  in queries.tuples(conn, "accepted_since", at)]
    notes["*"] += [f"cleared since: {cause}: {said} (#{level_id}; {how})"
                   for level_id, cause, said, how
                   in queries.tuples(conn, "accepted_cleared_since", at)]
    return {subject: said for subject, said in notes.items() if said}


def clear(conn: Connection, ack_id: int) -> str:
    """Clear an acknowledgement: its cause pages again."""
    with conn.transaction():
        row = queries.one(conn, "clear_acknowledgement", (getpass.getuser(), ack_id))
    if row is None:
        raise UsageError(f"no active acknowledgement #{ack_id} (`perfguard ack --list`)")
    return row[0]


def acknowledgements(conn: Connection) -> list[tuple]:
    return queries.tuples(conn, "active_acknowledgements")


def cleared_acknowledgements(conn: Connection) -> list[tuple]:
    """The acknowledgements cleared (kept): those of ``acknowledgements`` and who cleared
    each, when."""
    return queries.tuples(conn, "cleared_acknowledgements")


def rows(run_id: int, found: list[fd.Finding], critical: float) -> list[tuple]:
    """What ``record`` stores: the findings worth an admin's eyes (paged, confirmed, or
    several lines with one cause), in the order they are shown."""
    shown = [f for f in found if f.paged or f.confirmed or len(f.lines) > 1]
    return [(run_id, n, f.kind, f.subject, f.summary(), len(f.lines), f.evidence, critical,
             f.change, f.confirmed, f.paged, f.environment, f.acknowledged or None,
             queries.json(f.members()))
            for n, f in enumerate(shown)]


def stored(conn: Connection, run_id: int) -> list[dict]:
    return queries.rows(conn, "findings_of_run", (run_id,))


def judge_and_record(conn: Connection, run_id: int) -> list[Line]:
    """The verdict of a stored run, recorded for the dashboards (after ingest, by
    `perfguard run`, `ingest`, `nightly`, `upgrade-check`, and `verdict --rejudge`: a run
    judged already is judged again only when asked, its earlier verdict kept). Statistics
    first: a first large run judged with the planner's empty-table guesses took minutes."""
    queries.one(conn, "analyze_run", (run_id,))  # as the owner: a writer may not
    data = judge.read_rules_file(rules_file())  # once: rules, findings' policy, floor
    rules = judge.load_rules(rules_file(), data)
    [begins] = queries.one(conn, "judgement_begins")
    lines = vd.verdict(conn, run_id, rules)
    found, critical = find(conn, run_id, lines, policy(data))
    vd.record(conn, run_id, lines, rows(run_id, found, critical), vd.measured_floor(data),
              judged_at=begins)
    return lines


def stored_verdict(conn: Connection, run_id: int) -> list[Line]:
    """The run's stored verdict; a run stored but never judged is judged (and recorded)."""
    return vd.recorded(conn, run_id) or judge_and_record(conn, run_id)
