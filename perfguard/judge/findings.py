"""Findings: the lines of a run that moved, grouped by the cause they share, and whether
the run pages.

Judged line by line, a nightly of 4,000 lines at 0.5 % false regressions per line carries
about 20 false lines a night, and one bad HCA or one driver update is 14 or 400 lines.
Here the lines that moved tonight are explained by the fewest causes (greedy cover):
a fingerprint change on their nodes that night, a shared shift of a partition or of one
check's metric across it (common mode: fabric load or a shared change), a leaf switch, a
node, one device of a node (HCA, GPU), and what is left one line each. Each finding's
evidence is the lines' pooled z (Stouffer: each line's worse-signed distance from its
baseline in noise, over the recent nights that agree, combined over the finding's lines).

Each night's distance is read through a Student-t of ``tail_df`` degrees of freedom
(performance noise has heavy tails, and each baseline's noise is an estimate) and turned
into the normal z of the same tail probability before the nights and lines are combined.
Family-wise control: a finding pages only when its evidence passes the Bonferroni bar
for the night, ``z ≥ Φ⁻¹(1 - alpha / m)`` with ``m`` the lines judged, so a night of
noise pages with probability about ``alpha`` however many lines a site runs; and only
when it is confirmed: its lines moved on ``needed`` of the last nights (a level, not one
night; the line rule's regression), or a fingerprint change on its nodes that night
explains it. A one-night shift of most of a partition is named, never paged.
``benchmarks/run_quality.py`` measures false pages a month and faults paged within 1
and 2 nights at 300 and 4,000 lines (docs/verdicts.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy import special

#: Kinds of cause, most specific first (a tie in lines explained goes to the first).
LINE, DEVICE, NODE, LEAF, GROUP, PARTITION, ENVIRONMENT = (
    "line", "device", "node", "leaf", "group", "partition", "environment")
SHARED = (GROUP, PARTITION)


@dataclass(frozen=True)
class Policy:
    """The family-wise control and what makes a cause (verdict_rules.yaml ``findings:``)."""
    #: Chance that a night of noise pages, over all its lines (Bonferroni).
    alpha: float = 0.0001
    #: Degrees of freedom of the Student-t each night's distance is read through.
    tail_df: float = 3.0
    #: The most one night of one line counts as (in normal z): a spike is one night.
    night_cap: float = 4.0
    #: A shared cause (partition, a check's metric across it) covers this share of its
    #: lines moved the same way tonight, and at least ``shared_min_lines`` of them; it
    #: pages when its lines moved on ``shared_nights`` nights running (other jobs' traffic
    #: is a night or two) or a fingerprint change explains it.
    shared_share: float = 0.5
    shared_min_lines: int = 8
    shared_nights: int = 3
    #: A local cause (node, device, leaf) explains at least this many moved lines, and
    #: this share of the lines it takes part in.
    local_min_lines: int = 2
    local_share: float = 0.3

    def critical_z(self, lines: int) -> float:
        """The evidence a finding needs to page on a night of ``lines`` judged lines."""
        return statistics.NormalDist().inv_cdf(1 - self.alpha / max(lines, 1))


DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class Evidence:
    """What findings need of one judged line."""
    name: str
    partition: str
    #: The check's metric and size band it belongs to (``osu_latency latency small``):
    #: lines of one group share a common-mode cause.
    group: str
    nodes: tuple[str, ...]
    #: Devices as ``node:device`` (``node37:mlx5_1``, ``node4:gpu``).
    devices: tuple[str, ...] = ()
    #: -1 worse tonight, +1 better, 0 within the noise (or not judged).
    side: int = 0
    #: The line rule's decision: moved on enough of the recent nights (a level).
    confirmed: bool = False
    #: Pooled z of the recent nights that agree (of tonight alone for a line within its
    #: noise), worse > 0, and how many nights agree.
    z: float = 0.0
    nights: int = 0
    #: Relative change tonight against the baseline's centre.
    change: float | None = None


@dataclass
class Finding:
    kind: str
    subject: str
    lines: list[Evidence]
    covered: int
    evidence: float = 0.0
    confirmed: bool = False
    environment: list[str] = field(default_factory=list)
    paged: bool = False
    #: "by who on date: why" where an admin acknowledged the cause: shown, never paged.
    acknowledged: str = ""

    @property
    def worse(self) -> bool:
        return statistics.fmean(line.side for line in self.lines) < 0

    @property
    def change(self) -> float | None:
        changes = [line.change for line in self.lines if line.change is not None]
        return statistics.median(changes) if changes else None

    def members(self) -> list[list[str]]:
        """Each of its lines as an acknowledgement may name it: its name, nodes, devices."""
        return [[line.name, *line.nodes, *line.devices] for line in self.lines]

    def summary(self) -> str:
        """``node37:mlx5_1: 14 of 16 lines worse, median -48.2 % …``"""
        what = "worse" if self.worse else "better"
        change = f", median {self.change:+.1%}" if self.change is not None else ""
        text = (f"{self.subject}: {len(self.lines)} of {self.covered} line(s) {what}{change}, "
                f"evidence z {self.evidence:.1f}")
        if self.environment:
            text += "; that night " + "; ".join(self.environment)
        elif self.kind in SHARED and not self.confirmed:
            text += " (one night: fabric load or a shared change)"
        elif not self.confirmed:
            text += " (one night: confirm on the next)"
        if self.acknowledged:
            text += f"; acknowledged {self.acknowledged}"
        return text


def stouffer(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / math.sqrt(len(values)) if values else 0.0


def pooled_z(distances: Iterable[float], policy: Policy | None = None) -> float:
    """One line's evidence: each night's distance (noise from the centre, worse > 0) as
    the normal z of its Student-t tail probability, at most ``night_cap``, combined over
    the nights (Stouffer): a level is evidence on every night, while one spike beside a
    middling night does not add up to a page."""
    return pooled_zs([tuple(distances)], policy)[0]


def pooled_zs(lines: list[tuple[float, ...]], policy: Policy | None = None) -> list[float]:
    """``pooled_z`` of many lines at once (a 100,000-line run: one array, not 100,000
    calls)."""
    policy = policy or DEFAULT_POLICY
    df = policy.tail_df
    counts = np.array([len(d) for d in lines], dtype=np.int64)
    if not counts.sum():
        return [0.0] * len(lines)
    flat = np.fromiter((x for d in lines for x in d), dtype=np.float64, count=counts.sum())
    scaled = flat * math.sqrt(df / (df - 2))  # a t of unit variance
    equivalent = np.minimum(-special.ndtri(special.stdtr(df, -np.abs(scaled))),
                            policy.night_cap) * np.sign(scaled)
    sums = np.zeros(len(lines))
    np.add.at(sums, np.repeat(np.arange(len(lines)), counts), equivalent)
    return [float(total / math.sqrt(n)) if n else 0.0 for total, n in zip(sums, counts)]


def _causes(line: Evidence, groups: dict[str, set[str]],
            environment: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(kind, subject) of every cause that could explain a move of ``line``."""
    nodes = set(line.nodes)
    return [(PARTITION, f"partition {line.partition}"),
            (GROUP, f"{line.group} on partition {line.partition}"),
            *((NODE, node) for node in line.nodes),
            *((DEVICE, device) for device in line.devices),
            *((LEAF, leaf) for leaf, members in groups.items() if members & nodes),
            *((ENVIRONMENT, change) for change, on in environment.items() if on & nodes)]


def _qualifies(kind: str, moved: int, covered: int, policy: Policy) -> bool:
    if kind in SHARED:
        return moved >= policy.shared_min_lines and moved >= policy.shared_share * covered
    if kind == ENVIRONMENT:
        return moved >= policy.local_min_lines
    return moved >= policy.local_min_lines and moved >= policy.local_share * covered


ORDER = (ENVIRONMENT, DEVICE, NODE, LEAF, GROUP, PARTITION)


def findings(lines: list[Evidence], policy: Policy | None = None,
             groups: dict[str, set[str]] | None = None,
             environment: dict[str, set[str]] | None = None,
             acknowledged: dict[str, str] | None = None) -> list[Finding]:
    """The run's findings, paging ones first. ``groups``: named node sets (leaf
    switches); ``environment``: each fingerprint change that night (``driver 5.14 →
    5.15``) → the nodes it happened on; ``acknowledged``: cause → "by who on date: why"
    (shown with the finding, which then does not page)."""
    environment, groups = environment or {}, groups or {}
    policy = policy or DEFAULT_POLICY
    moved = {i for i, line in enumerate(lines) if line.side != 0}
    covered: dict[tuple[str, str], list[int]] = {}
    for index, line in enumerate(lines):
        for cause in _causes(line, groups, environment):
            covered.setdefault(cause, []).append(index)
    by_cause: dict[tuple[str, str, int], list[int]] = {}
    for i in moved:  # a cause moves its lines one way
        for kind, subject in _causes(lines[i], groups, environment):
            by_cause.setdefault((kind, subject, lines[i].side), []).append(i)
    found: list[Finding] = []
    while moved:
        best, kept = None, {}
        for cause, indices in by_cause.items():
            kind, subject, _ = cause
            explained = [i for i in indices if i in moved]
            total = len(covered[kind, subject])
            if not _qualifies(kind, len(explained), total, policy):
                continue  # it explains fewer lines each round: it never will
            kept[cause] = explained
            key = (len(explained), -ORDER.index(kind), -total)
            if best is None or key > best[0]:
                best = (key, kind, subject, explained, total)
        by_cause = kept
        if best is None:
            break
        _, kind, subject, explained, total = best
        subject = _with_twins(kind, subject, explained, kept, covered)
        if kind in SHARED:  # a line moved far beyond the shared shift has a cause of its own
            explained = _within_shared_shift([lines[i] for i in explained], explained)
        finding = Finding(kind, subject, [lines[i] for i in explained], total,
                          environment=[subject] if kind == ENVIRONMENT else [])
        # evidence over every line of the cause, moved or not: a node whose three
        # noisiest of ten lines moved is no node fault
        finding.evidence = stouffer(lines[i].z for i in covered[kind, best[2]])
        found.append(finding)
        moved -= set(explained)
    # a line alone is a finding once the line rule confirmed it (a level, not one night)
    found += [Finding(LINE, lines[i].name, [lines[i]], 1, evidence=lines[i].z)
              for i in sorted(moved) if lines[i].confirmed]
    critical = policy.critical_z(len(lines))
    for finding in found:
        _decide(finding, critical, environment, policy)
        finding.acknowledged = "; ".join(
            said for cause, said in (acknowledged or {}).items()
            if acknowledges(cause, finding.subject, finding.members()))
        finding.paged = finding.paged and not finding.acknowledged
    return sorted(found, key=lambda f: (not f.paged, -abs(f.evidence)))


def subject_names(subject: str) -> set[str]:
    """What a finding's subject names: itself, each cause it joins (``node1:lo, node2:lo``)
    and the node of each device among them (``node1``)."""
    parts = subject.split(", ")
    return {subject, *parts,
            *(part.split(":", 1)[0] for part in parts if ":" in part and " " not in part)}


def acknowledges(cause: str, subject: str, members: list[list[str]] | None) -> bool:
    """Whether an acknowledgement of ``cause`` mutes the finding of ``subject`` whose lines
    are ``members`` (``Finding.members``): the cause is its subject, a cause the subject
    joins or the node of one (``ack node1`` mutes ``node1:lo, node2:lo``), or it names every
    line of the finding (by name, node or device: its lines are all the known fault's)."""
    if cause in subject_names(subject):
        return True
    return bool(members) and all(cause in line for line in members)


def contains(cause: str, subject: str, members: list[list[str]] | None) -> bool:
    """Whether ``cause`` names the finding or something it contains: a node, device (HCA,
    GPU), leaf or line of it (what `perfguard ack` accepts)."""
    return cause in subject_names(subject) or any(cause in line for line in members or [])


def _with_twins(kind: str, subject: str, explained: list[int],
                kept: dict[tuple[str, str, int], list[int]],
                covered: dict[tuple[str, str], list[int]]) -> str:
    """``subject`` joined by the local causes of its kind that explain and take part in
    exactly the same lines: one osu_latency pair between node1 and node2 cannot tell
    which of the two is slow, so the finding names both (``node1:lo, node2:lo``)."""
    if kind not in (DEVICE, NODE, LEAF):
        return subject
    twins = sorted(other for (other_kind, other, _), others in kept.items()
                   if other_kind == kind and other != subject
                   and sorted(others) == sorted(explained)
                   and covered[kind, other] == covered[kind, subject])
    return ", ".join(sorted([subject, *twins]))


def _within_shared_shift(moved: list[Evidence], indices: list[int]) -> list[int]:
    """Of the lines a shared cause explains, those whose change is at most twice the
    median change: on a night of fabric load (-10 %), a leaf at -37 % stays its own."""
    changes = [line.change for line in moved if line.change is not None]
    if not changes:
        return indices
    median = abs(statistics.median(changes))
    return [i for i, line in zip(indices, moved)
            if line.change is None or abs(line.change) <= 2 * median]


def _decide(finding: Finding, critical: float, environment: dict[str, set[str]],
            policy: Policy) -> None:
    """Confirmation and paging of one finding (worse only pages)."""
    confirmed = sum(line.confirmed for line in finding.lines)
    finding.confirmed = confirmed >= (len(finding.lines) + 1) // 2
    if finding.kind in SHARED:
        nights = statistics.median(line.nights for line in finding.lines)
        finding.confirmed = finding.confirmed and nights >= policy.shared_nights
    nodes = {node for line in finding.lines for node in line.nodes}
    if finding.kind != ENVIRONMENT:
        finding.environment = [change for change, on in environment.items() if on & nodes]
    finding.paged = finding.worse and finding.evidence >= critical and (
        finding.confirmed or bool(finding.environment))
