"""After an upgrade, each node on its own: its figures against its own level before the
upgrade and against its peers, what changed in its fingerprint, and one verdict.

A node's *own level* is the median of its earlier values of the same figure (its HCA
in loopback, a check it ran alone: Himeno on one node, NCCL on its GPUs) up to the
baseline run. A figure fails it by the sweep's criteria (site_config/sweep.yaml:
bandwidth and other higher-is-better figures below ``bandwidth_fraction`` of the level,
latency and other lower-is-better ones above ``latency_factor`` times it), widened to
three noise σ where the node has three values or more: an upgraded node is compared
with itself, not with a fleet's best. Against its *peers*, a figure fails by the same
criteria against the median of the other nodes that ran it in the same run, and the
fabric sweep's blame (a bad node or HCA) counts. A node with no earlier value of a figure
is judged against its peers only, and its row says so.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from statistics import median

from perfguard.judge import rules
from perfguard.judge.fingerprint import NO_EARLIER_STATE, Change, natural_key
from perfguard.judge.sweep import Criteria

#: The states `upgrade-check --summary` gives each node of an upgrade.
PASSED, FAILED, NOT_MEASURED = "measured and passed", "failed", "not yet measured"


@dataclass(frozen=True)
class Figure:
    """One figure of one node: its name says what it is (``loopback bandwidth mlx5_0``,
    ``HimenoCheck %size=M mflops``)."""
    node: str
    name: str
    value: float
    unit: str
    better: str  # higher or lower
    #: Where the figure was measured again beside reference nodes (see ``conditions``):
    #: the share of their own level those reached then, when below 1 (a slower host, a
    #: busier fabric than at the baseline); the own limit is scaled by it.
    conditions: float = 1.0
    #: How often the figure was measured (its best value kept): a miss counts only when
    #: every measurement missed.
    attempts: int = 1


@dataclass(frozen=True)
class Miss:
    """A figure that failed, and what it was held against."""
    figure: Figure
    against: str  # "its own level" or "its peers"
    level: float
    limit: float
    why: str

    def render(self) -> str:
        f = self.figure
        return (f"{f.name} {_num(f.value)} {f.unit}".rstrip()
                + f", {self.against} {_num(self.level)} {f.unit}".rstrip()
                + f" ({self.why}; limit {_num(self.limit)})")


@dataclass
class NodeVerdict:
    """One row of the upgrade check: the node, what changed, its verdict and why."""
    node: str
    changed: list[str] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    #: Failures that are no figure: a test case that failed on the node, the sweep's
    #: blame of its HCA, a phase that measured nothing.
    failures: list[str] = field(default_factory=list)
    #: What was not judged and why (no GPU, no earlier level, a skipped check).
    notes: list[str] = field(default_factory=list)
    #: Each figure that was judged against the node's own level: name → (value, level).
    own: dict[str, tuple[float, float, str]] = field(default_factory=dict)
    drained: bool = False
    resumed: bool = False

    @property
    def passed(self) -> bool:
        return not self.misses and not self.failures

    @property
    def word(self) -> str:
        return "PASS" if self.passed else "FAIL"

    @property
    def figure(self) -> str:
        """The first figure that failed with its own level (or the first failure)."""
        if self.misses:
            return self.misses[0].render()
        return self.failures[0] if self.failures else ""

    @property
    def own_level(self) -> str:
        """The figures judged against the node's own level, as 'name value (own level)'."""
        return "; ".join(f"{name} {_num(value)} {unit} (own level {_num(level)})".replace(
            "  ", " ") for name, (value, level, unit) in self.own.items())


def own_limit(history: list[float], better: str, unit: str,
              criteria: Criteria) -> tuple[float, float, str]:
    """(level, limit, why) of a node's earlier values of one figure."""
    level = median(history)
    noise = rules.baseline(history)[1] if len(history) >= 3 else 0.0
    return (level, *_limit(level, noise, better, unit, criteria,
                           f"median of {len(history)} earlier value(s)"))


def _limit(level: float, noise: float, better: str, unit: str, criteria: Criteria,
           what: str) -> tuple[float, str]:
    """The limit a figure must reach given a level, its noise and the criteria."""
    if better == "higher":
        limit = min(level * criteria.bandwidth_fraction, level - 3 * noise)
        return limit, f"{what}, {criteria.bandwidth_fraction:.0%} of it"
    slack = criteria.latency_slack_us if unit == "us" else 0.0
    limit = max(level * criteria.latency_factor, level + slack, level + 3 * noise)
    return limit, f"{what}, {criteria.latency_factor:g}× it" + (
        f" or {slack:g} us above" if slack else "")


def _misses(value: float, limit: float, better: str) -> bool:
    return value < limit if better == "higher" else value > limit


def judge_own(figure: Figure, history: list[float], criteria: Criteria) -> Miss | None:
    """The figure against the node's own earlier values (None: it holds its level), its
    limit scaled by the conditions it was measured in again (``Figure.conditions``)."""
    level, limit, why = own_limit(history, figure.better, figure.unit, criteria)
    if figure.conditions < 1:
        limit = limit * figure.conditions if figure.better == "higher" else \
            limit / figure.conditions
        why += (f"; scaled to the conditions of its retest, where the reference nodes "
                f"reached {figure.conditions:.0%} of their own level")
    if figure.attempts > 1:
        why += f"; best of {figure.attempts} measurements"
    if _misses(figure.value, limit, figure.better):
        return Miss(figure, "its own level before the upgrade", level, limit, why)
    return None


def own_misses(figures: list[Figure], history: dict[tuple, list[float]],
               criteria: Criteria) -> list[Figure]:
    """The figures that miss their node's own level (those to measure again)."""
    return [f for f in figures if history.get((f.node, f.name))
            and judge_own(f, history[(f.node, f.name)], criteria) is not None]


def remeasured(figures: list[Figure], again: list[Figure], suspects: list[Figure],
               history: dict[tuple, list[float]]) -> list[Figure]:
    """``figures`` with each suspect's value the best of its measurements (``again``:
    the suspects' and the reference nodes' new values), and its conditions: the median
    share of their own level the references (those measured again that were no suspect)
    reached at the retest, per figure name."""
    suspect_keys = {(f.node, f.name) for f in suspects}
    shares: dict[str, list[float]] = defaultdict(list)
    for f in again:
        earlier = history.get((f.node, f.name))
        if (f.node, f.name) not in suspect_keys and earlier and median(earlier):
            share = f.value / median(earlier)
            shares[f.name].append(share if f.better == "higher" else 1 / share)
    best = {(f.node, f.name): f for f in again if (f.node, f.name) in suspect_keys}
    out = []
    for f in figures:
        newer = best.get((f.node, f.name))
        if newer is None:
            out.append(f)
            continue
        better = max if f.better == "higher" else min
        conditions = min(median(shares[f.name]), f.conditions) if shares[f.name] else \
            f.conditions
        out.append(Figure(f.node, f.name, better(f.value, newer.value), f.unit, f.better,
                          conditions, f.attempts + 1))
    return out


def judge_peers(figures: list[Figure], criteria: Criteria) -> list[Miss]:
    """Each figure against the median of the other nodes' values of it in the same run
    (where two others or more have it)."""
    by_name: dict[str, list[Figure]] = defaultdict(list)
    for f in figures:
        by_name[f.name].append(f)
    out = []
    for same in by_name.values():
        for f in same:
            others = [o.value for o in same if o.node != f.node]
            if len(others) < 2:
                continue
            level = median(others)
            limit, why = _limit(level, 0.0, f.better, f.unit, criteria,
                                f"median of {len(others)} other nodes")
            if _misses(f.value, limit, f.better):
                out.append(Miss(f, "its peers", level, limit, why))
    return out


def node_verdicts(nodes: list[str], figures: list[Figure], history: dict[tuple, list[float]],
                  criteria: Criteria, peer_figures: list[Figure] | None = None,
                  failures: dict[str, list[str]] | None = None,
                  notes: dict[str, list[str]] | None = None,
                  changes: list[Change] | None = None) -> list[NodeVerdict]:
    """One verdict per node of ``nodes``: ``figures`` (the listed nodes' and the peers',
    ``peer_figures`` too when given) judged against ``history`` ((node, figure name) →
    earlier values up to the baseline) and against each other; ``failures`` and ``notes``
    per node as found elsewhere; ``changes`` the fingerprint diff."""
    verdicts = {node: NodeVerdict(node) for node in nodes}
    for f in figures:
        verdict = verdicts.get(f.node)
        if verdict is None:
            continue
        earlier = history.get((f.node, f.name))
        if not earlier:
            note = "no earlier value of its own (judged against its peers)"
            if note not in verdict.notes:
                verdict.notes.append(note)
            continue
        miss = judge_own(f, earlier, criteria)
        verdict.own[f.name] = (f.value, median(earlier), f.unit)
        if miss:
            verdict.misses.append(miss)
    for miss in judge_peers(figures + list(peer_figures or []), criteria):
        if miss.figure.node in verdicts:
            verdicts[miss.figure.node].misses.append(miss)
    for node, found in (failures or {}).items():
        if node in verdicts:
            verdicts[node].failures.extend(found)
    for node, said in (notes or {}).items():
        if node in verdicts:
            verdicts[node].notes.extend(n for n in said if n not in verdicts[node].notes)
    for change in changes or []:
        for node in change.nodes:
            if node in verdicts:
                verdicts[node].changed.append(_change_text(change))
    return [verdicts[n] for n in sorted(verdicts, key=natural_key)]


def _change_text(change: Change) -> str:
    if change.field == NO_EARLIER_STATE:
        return "no earlier fingerprint"
    if change.before is None and change.after is None:
        return change.field
    return f"{change.field} {change.before or '(none)'} → {change.after or '(none)'}"


def rows(verdicts: list[NodeVerdict]) -> str:
    """The answer: one row per node (node, what changed, verdict, the figure that failed
    with its own level), then the notes."""
    table = [("node", "changed", "verdict", "figure (against)")]
    for v in verdicts:
        changed = "; ".join(v.changed) or "nothing"
        table.append((v.node, changed, v.word, v.figure or _passed_figure(v)))
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 3 else cell
                       for i, cell in enumerate(row)).rstrip() for row in table]
    for v in verdicts:
        extra = v.misses[1:] if v.misses else []
        for miss in extra:
            lines.append(f"  {v.node}: also {miss.render()}")
        for failure in (v.failures[1:] if not v.misses else v.failures):
            lines.append(f"  {v.node}: also {failure}")
        for note in v.notes:
            lines.append(f"  {v.node}: {note}")
    return "\n".join(lines)


def _passed_figure(v: NodeVerdict) -> str:
    """A passing node's first figure with its own level, so a row says what held."""
    if not v.own:
        return "-"
    name, (value, level, unit) = next(iter(v.own.items()))
    return f"{name} {_num(value)} {unit}, its own level {_num(level)}".replace("  ", " ")


def summary(nodes: list[str], stored: dict[str, dict]) -> list[tuple[str, str, str]]:
    """(node, state, detail) for every node of an upgrade: its latest batch's verdict, or
    not yet measured."""
    out = []
    for node in sorted(set(nodes) | set(stored), key=natural_key):
        row = stored.get(node)
        if row is None:
            out.append((node, NOT_MEASURED, ""))
            continue
        detail = f"run {row['run_id']} at {row['checked_at']:%Y-%m-%d %H:%M}"
        if row["changed"]:
            detail += f"; changed: {row['changed']}"
        if not row["passed"]:
            detail += f"; {row['figure']}" + ("; drained" if row["drained"] else "")
        out.append((node, PASSED if row["passed"] else FAILED, detail))
    return out


def _num(value: float) -> str:
    return f"{value:.4g}"
