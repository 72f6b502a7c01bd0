"""Findings: the lines of a run that moved, grouped by the cause they share, and whether
the run pages.

Judged line by line, a nightly of 4,000 lines at 0.5 % false regressions per line carries
about 20 false lines a night, and one bad HCA or one driver update is 14 or 400 lines.
Here the lines that moved tonight are explained by the fewest causes (greedy cover):
a fingerprint change on their nodes that night, a shared shift of a partition or of one
check's metric across it (common mode: fabric load or a shared change), a leaf switch, a
node, one device of a node (HCA, GPU), and what is left one line each. Lines move
together (a node's, a leaf's, the fabric's night), so a finding's evidence is judged
against its cause's own spread (``NightEffects``: the cause's shared night effect against
that effect's history, its lines' residuals combined as independent lines); without the
history for that, the lines' pooled z (Stouffer: each line's worse-signed distance from
its baseline in noise, over the recent nights that agree, combined over its lines).

Each night's distance is read through a Student-t of ``tail_df`` degrees of freedom
scaled to unit variance (the distance times √(df / (df − 2)): √3 at 3; performance noise
has heavy tails, and each baseline's noise is an estimate), mixed for a line whose own
history has far nights with as many far nights as it had
(``far_night_probability``), and turned into the normal z of the same tail probability
before the nights and lines are combined.
Family-wise control: a finding pages only when its evidence passes the Bonferroni bar
for the night, ``z ≥ Φ⁻¹(1 - alpha / m)`` with ``m`` the lines judged, so a night of
noise pages with probability about ``alpha`` however many lines a site runs; and only
when it is confirmed: its lines moved on ``needed`` of the last nights (a level, not one
night; the line rule's regression), or it was at the bar on the run before too, or a
fingerprint change on its nodes that night explains it. A one-night shift of most of a
partition is named, never paged.
``benchmarks/run_quality.py`` measures false pages a month and faults paged within 1, 2
and 3 nights at a 2-node pair, 16 nodes, 300 and 4,000 lines (docs/verdicts.md).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from perfguard.judge.rules import LEVEL_NIGHTS

#: Kinds of cause, most specific first (a tie in lines explained goes to the first).
LINE, DEVICE, NODE, LEAF, GROUP, PARTITION, ENVIRONMENT = (
    "line", "device", "node", "leaf", "group", "partition", "environment")
SHARED = (GROUP, PARTITION)
#: Causes of one place: what a finding at the bar on two runs running confirms.
LOCAL = (LINE, DEVICE, NODE, LEAF)
#: A narrower cause takes a broader one's lines when it explains this share of them.
NARROWER_SHARE = 0.8
#: A node-local line alone (Himeno, a GPU copy) whose own nights, its node's left in,
#: hold as many far nights as its nights less its node's is read in them where less its
#: node's night it spreads this many times as wide: its node's night, read from a few
#: noisy fabric lines, then adds more noise than it takes away (run_quality, 16 nodes:
#: the slow Himeno node within 2 nights 87 / 83 / 88 → 93 / 83 / 90 % at seeds 1-3; at a
#: margin of 1, without the far nights' condition, its own spikes read as far nights cost
#: the 300-line site's Himeno 2 trials in 60 at seed 2). Two spreads of 29 nights of the
#: same t(4) noise differ by 1.2 times one time in four, by 1.5 times one in twelve: a
#: narrower margin picks the smaller of two estimates of one spread, and reads its
#: nights too far out. At 1.5 a Himeno node whose nights spread 3.07 % against 4.12 %
#: less its node's (1.34 times) read its fault's two nights 4.47 less its node's, 4.94
#: in its own, against the bar 4.60 on its second night (16 nodes, seed 1): 1.3 pages it.
#: Chance gives that ratio about one time in six: on draws of one spread, a noise night
#: read beyond 4 of the spread chosen 85 times in 10^4 against 78 at 1.5; run_quality's
#: false pages and the real sets' stayed the same (benchmarks/results/verdicts.md).
OWN_NIGHTS_MARGIN = 1.3
#: Sweeps of the nodes' night effects (a pair line's partner's effect is taken off
#: before its node's is estimated again: median polish).
NODE_SWEEPS = 3


@dataclass(frozen=True)
class Policy:
    """The family-wise control and what makes a cause (verdict_rules.yaml ``findings:``)."""
    #: Chance that a night of noise pages, over all its lines (Bonferroni).
    alpha: float = 0.0001
    #: Degrees of freedom of the Student-t each night's distance is read through.
    tail_df: float = 3.0
    #: The most one night of one line counts as (in normal z): a spike is one night.
    night_cap: float = 5.0
    #: A shared cause (partition, a check's metric across it) covers this share of its
    #: lines moved the same way tonight, and at least ``shared_min_lines`` of them; it
    #: pages when its lines moved on ``shared_nights`` nights running (other jobs' traffic
    #: is a night or two) or a fingerprint change explains it. A fingerprint change is
    #: judged on one measurement alone where as many of its lines moved, and that share.
    shared_share: float = 0.5
    shared_min_lines: int = 8
    shared_nights: int = 3
    #: A local cause (node, device, leaf) explains at least this many moved lines, and
    #: this share of the lines it takes part in.
    local_min_lines: int = 2
    local_share: float = 0.3
    #: Nights of history the lines must share before their night effects (node, leaf,
    #: partition) are estimated; with fewer a cause's lines are taken as independent.
    effect_nights: int = 8
    #: Nights agree with tonight (a cause's shared effect, a line's residual) within this
    #: many of their own noise (the line rule's ``agree``).
    agree: float = 4.0
    #: A night this many of its noise off (the line rule's ``k``) is beyond: beyond on
    #: tonight's side, it agrees within ``agree`` noise times tonight's level (a 3x
    #: latency: 3), as the line rule's nights do.
    beyond: float = 1.3
    #: A night this many of its noise off is *far*. A line (its own nights, its
    #: residual, read alone) whose history has more far nights than the Student-t gives
    #: reads each night through a mixture: the t, and at the share of far nights its
    #: history has beyond the t's, a tail falling as the ``far_tail`` power of the
    #: distance (``far_night_probability``); 0 turns it off; nothing is learnt from
    #: fewer than ``effect_nights`` history nights. A node's, leaf's or the fabric's
    #: effect keeps the t: a median of many lines, its far nights are what findings
    #: page (a congested leaf; read so, run_quality's leaf paged within 2 nights in
    #: 85-90 % of trials, not 95-100 %), and no page of the real nights came from one.
    far: float = 6.0
    far_tail: float = 2.0
    #: A line (its own nights, its residual) whose history lay at least as far on
    #: tonight's side more often than the model says (binomially, at this level) reads
    #: that night as likely as its history says (``own_tail``); 0: never. A busy-polling
    #: put of 0.15 us on a shared host lay 1.3-10 noise worse on 9 of its first 28
    #: nights; the t reads a night 3 noise worse as 0.7 %, and a spike beside one paged
    #: (the sixth real set).
    own_tail: float = 0.01
    #: A history of fewer nights than this (the line rule's default window: a baseline
    #: not yet full; fixed, whatever a site sets its rules' ``window`` to) is young: it
    #: has seldom seen its line's and host's slow states. Its far nights are learnt with
    #: the nights it lacks taken at the far rate of all the run's lines (their residuals'
    #: where the night effects read them: ``far_shares``), and a finding judged on it says
    #: so. Measured on the
    #: eight real sets, in the order recorded and in random orders: 25 of 39 false pages
    #: came on the first 15 judged nights (a history of 8-22), 3.7 % of those nights
    #: against 0.9 % of the later ones. 0: no history is young.
    young_nights: int = 30

    def critical_z(self, lines: int) -> float:
        """The evidence a finding needs to page on a night of ``lines`` judged lines."""
        return statistics.NormalDist().inv_cdf(1 - self.alpha / max(lines, 1))


DEFAULT_POLICY = Policy()


#: What a site sets of the policy (verdict_rules.yaml ``findings:``, its schema says the
#: same); the rest of Policy is the model, fixed here with the measurement behind each.
SETTINGS = ("alpha",)


def policy_of(rules_data: dict) -> Policy:
    """The policy of a verdict rules file's ``findings:`` (its ``SETTINGS``), the defaults
    otherwise: one reading for the verdict and benchmarks/run_quality.py."""
    given = rules_data.get("findings") or {}
    return dataclasses.replace(DEFAULT_POLICY, **{k: v for k, v in given.items()
                                                  if k in SETTINGS})


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
    #: The line's worse-signed relative change against its baseline's centre on each
    #: night it has, oldest first (its baseline's nights, then its ``recent`` ones), and
    #: each night's key (the run's start time: orderable, one value for all lines of a
    #: run): what ``NightEffects`` reads the nights that moved lines together from.
    moves: tuple[float, ...] = ()
    nights_at: tuple = ()
    recent: int = 0
    #: Its history's share of far nights beyond the t's (``far_shares``): its own nights
    #: are read with them.
    far: float = 0.0
    #: Its nodes in the run judged before tonight's (None or none: it did not run there,
    #: or not known): a pair line Slurm gave another partner tonight is new to its nodes'
    #: finding (``_stayed``).
    nodes_before: tuple[str, ...] | None = None

    @property
    def history_nights(self) -> int:
        """The history nights it was judged against (its baseline's; 0: none said)."""
        return len(self.moves) - self.recent if self.moves else 0


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
    #: A line alone: the share of far nights its evidence was read with (its residual's
    #: where the night effects judged it, or its own nights' where a node-local line is
    #: read in them, else its own: ``NightEffects.far_share``).
    far: float = 0.0
    #: Where its nodes share one host (one boot id) with each other or other nodes: a node
    #: or device finding there cannot tell the node from the host, and says so.
    host_shared_with: str = ""
    #: Fingerprint changes on its nodes in the runs just before tonight (``run 41 (one run
    #: before): ucx 1.16 → 1.17``, ``run_findings.name_changes_before``): a level
    #: confirmed on its second night after an update names it, which only the update's
    #: own night did. The words only.
    changed_before: list[str] = field(default_factory=list)
    #: The changes of the runs just before tonight under most of its lines, where no
    #: change of tonight explains it (``_changes_under``): a shared cause is confirmed on
    #: the nights since (``_decide``).
    since_change: list[str] = field(default_factory=list)
    #: ``judged on a young history (12 of 30 nights)`` where its lines' longest history
    #: is shorter than ``Policy.young_nights``.
    young: str = ""
    #: How its evidence was read, for ``verdict --explain``: each test by what it reads
    #: (``NightEffects.tests``; the evidence is the largest of a worse finding's), and the
    #: lines it was taken over (moved or not) with each one's residual z where the night
    #: effects read one.
    tests: dict[str, float] = field(default_factory=dict)
    judged_on: list[tuple[Evidence, float | None]] = field(default_factory=list)
    #: Where the run before had a finding of the same subject at its bar: which run, its
    #: evidence and bar (``at_the_bar``); a worse local finding is confirmed by it (and
    #: pages where at the bar tonight too).
    again: str = ""
    #: Why it pages or not, in words (``_decide``).
    decided: str = ""
    #: The night effects its evidence was read with, and its judged lines' rows there:
    #: what ``taken_off`` shows (``verdict --explain``), read only when asked.
    night_effects: NightEffects | None = field(default=None, repr=False, compare=False)
    judged_rows: list[int] = field(default_factory=list, repr=False)

    @property
    def worse(self) -> bool:
        return statistics.fmean(line.side for line in self.lines) < 0

    def taken_off(self) -> tuple[dict[str, NightEffect], list[TakenOff | None]]:
        """The night effects taken off its judged lines, and each line's last night
        taken apart (``NightEffects.taken_off``); nothing where none were read."""
        if self.night_effects is None:
            return {}, [None] * len(self.judged_on)
        return self.night_effects.taken_off(self.kind, self.judged_rows)

    @property
    def change(self) -> float | None:
        """The median of how far its lines moved, each as a share of its own baseline and
        signed by its side (negative: worse): a node's latencies 30 % up and bandwidths
        30 % down are -30 %, where their changes' own signs gave a median near 0 %."""
        changes = [line.side * abs(line.change) for line in self.lines
                   if line.change is not None]
        return statistics.median(changes) if changes else None

    @property
    def history_nights(self) -> int:
        """The most history nights any of its lines was judged against (0: none said)."""
        return max((line.history_nights for line in self.lines), default=0)

    def names(self) -> set[str]:
        """What it names: its subject's names (``subject_names``) and, for a line alone,
        the nodes and devices it ran through (its name and summary say them): a pair line
        cannot tell which of its two nodes or HCAs is slow, as twins cannot
        (``node1:mlx5_0, node2:mlx5_0``)."""
        names = subject_names(self.subject)
        if self.kind == LINE:
            names |= {*self.lines[0].nodes, *self.lines[0].devices}
        return names

    def members(self) -> list[list[str]]:
        """Each of its lines as an acknowledgement may name it: its name, nodes, devices."""
        return [[line.name, *line.nodes, *line.devices] for line in self.lines]

    def explained_by(self, text: str) -> bool:
        """Whether `verdict --explain TEXT` shows it (``explains``)."""
        return explains(text, self.kind, self.subject, self.members())

    def summary(self) -> str:
        """``node37:mlx5_1: 14 of 16 line(s) worse by a median 48.2%, …``"""
        what = "worse" if self.worse else "better"
        change = f" by a median {abs(self.change):.1%}" if self.change is not None else ""
        text = (f"{self.subject}: {len(self.lines)} of {self.covered} line(s) {what}{change}, "
                f"evidence z {self.evidence:.1f}")
        if self.environment:
            text += "; that night " + "; ".join(self.environment)
        elif self.kind in SHARED and not self.confirmed:
            text += " (one night: fabric load or a shared change)"
        elif not self.confirmed:
            text += " (one night: confirm on the next)"
        elif self.again:
            text += f"; at the bar on the run before too ({self.again})"
        if self.changed_before:
            text += "; on its nodes in " + "; ".join(self.changed_before)
        if self.far:
            text += (f"; read with its far nights (its history far worse than its baseline on "
                     f"about {self.far:.0%} of nights)")
        if self.kind == LINE and self.lines[0].devices:
            text += "; through " + ", ".join(self.lines[0].devices)
        if self.host_shared_with:
            text += "; " + self.host_shared_with
        if self.young:
            text += "; " + self.young
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


def pooled_zs(lines: list[tuple[float, ...]], policy: Policy | None = None,
              far_shares: np.ndarray | None = None,
              histories: np.ndarray | None = None) -> list[float]:
    """``pooled_z`` of many lines at once (a 100,000-line run: one array, not 100,000
    calls); ``far_shares``: each line's share of far nights beyond the t's
    (``far_night_probability``), none by default; ``histories``: each line's history
    nights in its noise, worse > 0 (a row each, NaN-padded: ``history_matrix``), read
    by ``own_tail``."""
    counts = np.array([len(d) for d in lines], dtype=np.int64)
    if not counts.sum():
        return [0.0] * len(lines)
    rows, equivalent = _night_equivalents(lines, counts, policy or DEFAULT_POLICY,
                                          far_shares, histories)
    sums = np.zeros(len(lines))
    np.add.at(sums, rows, equivalent)
    return [float(total / math.sqrt(n)) if n else 0.0 for total, n in zip(sums, counts)]


def night_zs(lines: list[tuple[float, ...]], policy: Policy | None = None,
             far_shares: np.ndarray | None = None,
             histories: np.ndarray | None = None) -> list[list[float]]:
    """Each night's z that ``pooled_zs`` combines, line by line (``verdict --explain``)."""
    counts = np.array([len(d) for d in lines], dtype=np.int64)
    if not counts.sum():
        return [[] for _ in lines]
    _, equivalent = _night_equivalents(lines, counts, policy or DEFAULT_POLICY, far_shares,
                                       histories)
    return [part.tolist() for part in np.split(equivalent, np.cumsum(counts)[:-1])]


def _night_equivalents(lines: list[tuple[float, ...]], counts: np.ndarray, policy: Policy,
                       far_shares: np.ndarray | None, histories: np.ndarray | None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Every night of ``lines`` flat, with its line's row: its chance on its side
    (``night_chance``) as the normal z of that chance, at most ``night_cap``."""
    flat = np.fromiter((x for d in lines for x in d), dtype=np.float64, count=counts.sum())
    rows = np.repeat(np.arange(len(lines)), counts)
    shares = (np.zeros(len(flat)) if far_shares is None
              else np.asarray(far_shares, dtype=np.float64)[rows])
    tail = night_chance(flat, shares, None if histories is None else histories[rows], policy)
    return rows, np.minimum(-special.ndtri(tail), policy.night_cap) * np.sign(flat)


def t_chance(distance: np.ndarray | float, policy: Policy) -> np.ndarray:
    """The chance of a night at least ``distance`` noise off on one side, read through
    the Student-t of ``tail_df`` degrees of freedom scaled to unit variance."""
    df = policy.tail_df
    return special.stdtr(df, -np.asarray(distance) * math.sqrt(df / (df - 2)))


def far_night_probability(distance: np.ndarray, share: np.ndarray, policy: Policy
                          ) -> np.ndarray:
    """The chance of a night at least ``distance`` noise off on one side: the Student-t
    of unit variance, mixed with ``share`` of far nights whose tail beyond ``far`` noise
    falls as the ``far_tail`` power of the distance.

    Real lines are far more often than any t says (benchmarks/real_tails.py: beyond 6
    noise on 5-9 % of the embedded cluster's nights, the t(3) 0.19 %; a line's residual
    after its node's night 40, 130, 175 noise off with nothing wrong). Read through the
    t alone each such night is z 4-5 and a handful of them on one node's lines paged it
    (the real nights' false pages). A row whose own history has far nights is read
    with them: its far night tonight is as likely as its history says. The share is of
    far worse nights (``far_shares``), read as both sides' share, half on each side:
    read whole on the worse side it over-read the real sets (``far_shares``)."""
    body = t_chance(distance, policy)
    if not policy.far:
        return body
    beyond = 0.5 * np.minimum(1.0, (policy.far / np.maximum(distance, 1e-12)) ** policy.far_tail)
    return (1 - share) * body + share * beyond


def night_chance(distance: np.ndarray, shares: np.ndarray, history: np.ndarray | None,
                 policy: Policy) -> np.ndarray:
    """Each night's chance on its side (``distance``: in noise, signed): the t mixed with
    its line's far nights (``shares``), or its line's own tail where that is likelier
    (``history``: a row per night, as ``own_tail`` reads it; None: not read)."""
    tail = far_night_probability(np.abs(distance), shares, policy)
    if history is None or not policy.own_tail:
        return tail
    return np.maximum(tail, own_tail(distance, history, tail, policy))


def own_tail(distance: np.ndarray, history: np.ndarray, model: np.ndarray, policy: Policy
             ) -> np.ndarray:
    """Each night's chance as its line's own history gives it: the share of the history
    nights (``history``: a row per night, in noise, worse > 0, NaN: none) at least as far
    on its side, where that many is unlikely under the ``model``'s chance (binomially,
    below ``own_tail``); 0 elsewhere, and for a history under ``effect_nights``.

    The t and the far nights read a line's tail from far out; a real line's shoulders can
    be heavier: the sixth real set's polling put latency lay 1.3-10 noise worse on 9 of
    its first 28 nights, where the t takes a night 3 noise worse for 0.7 %, so its
    spikes beside such a night read as levels and paged (benchmarks/real_tails.py). At
    most one half, as the model's chance on one side: a history off its baseline's
    centre (a residual) must not turn a worse night into evidence of better."""
    seen = ~np.isnan(history)
    nights = seen.sum(axis=1)
    side = np.sign(distance)[:, None]
    as_far = (np.where(seen, history * side, -np.inf) >= np.abs(distance)[:, None]).sum(axis=1)
    with np.errstate(invalid="ignore"):  # a history of no nights: not learnt from
        unlikely = special.bdtrc(np.maximum(as_far - 1, 0), nights, model) < policy.own_tail
    learnt = (nights >= policy.effect_nights) & (as_far > 0) & unlikely
    return np.where(learnt, np.minimum(as_far / (nights + 1.0), 0.5), 0.0)


def history_matrix(histories: list[tuple[float, ...]]) -> np.ndarray:
    """Histories of any length as one NaN-padded matrix (a row each), ``pooled_zs``'s."""
    width = max((len(h) for h in histories), default=0)
    matrix = np.full((len(histories), width), np.nan)
    for row, history in enumerate(histories):
        matrix[row, :len(history)] = history
    return matrix


def without_held_levels(history: np.ndarray, policy: Policy) -> np.ndarray:
    """A history matrix (a row each, nights in their noise, worse > 0, NaN: none) with
    the nights of each level it held (``LEVEL_NIGHTS`` or more in a row beyond ``far`` on
    one side, where its other nights make such a run unlikely: ``_is_level``) taken out
    (NaN). A tail is nights scattered far out; a history whose host load moved every line
    3x for its first 3 nights has one change of level, and read as a third of far nights
    it made a -50 % node pair a night like any other (issue 67: paged within 2 nights in
    0-5 % of run_quality's trials, with the level taken out 95-100 %)."""
    if not policy.far or history.shape[1] < LEVEL_NIGHTS:
        return history
    side = np.where(np.isnan(history), 0, np.where(history > policy.far, 1,
                                                   np.where(history < -policy.far, -1, 0)))
    held = np.zeros(history.shape, dtype=bool)
    for row in np.flatnonzero((side != 0).sum(axis=1) >= LEVEL_NIGHTS):
        runs = _runs(side[row])
        in_runs = np.zeros(len(side[row]), dtype=bool)
        for start, end in runs:
            in_runs[start:end] = True
        for start, end in runs:
            held[row, start:end] = _is_level(side[row], ~np.isnan(history[row]), in_runs,
                                             start, end, policy)
    return np.where(held, np.nan, history)


def _runs(sides: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of ``LEVEL_NIGHTS`` or more nights in a row far out on one
    side (``sides``: 1 worse, -1 better, 0 neither or not run)."""
    runs, start = [], 0
    for index in range(1, len(sides) + 1):
        if index == len(sides) or sides[index] != sides[start]:
            if sides[start] and index - start >= LEVEL_NIGHTS:
                runs.append((start, index))
            start = index
    return runs


def _is_level(sides: np.ndarray, seen: np.ndarray, in_runs: np.ndarray, start: int,
              end: int, policy: Policy) -> bool:
    """Whether a run of far nights on one side (``sides[start:end]``; ``seen``: the nights
    measured) is a level the line held, not its tail: at the far rate on that side of its
    nights outside every such run (``in_runs``: a host loaded twice held two levels), a
    run that long is expected fewer than ``own_tail`` times in its nights (the expected
    count of runs, a bound on the chance of one); ``own_tail`` 0: every run is a level.
    The busy real set's inter-node osu_latency lay far worse on 8 of its first 17
    nights, 3 of them in a row (nights 6-8: 150-198 us against 5-10 us); taken out as a
    level, the line read as if it had 5 far nights, and its 238 us on night 18 paged
    (issue 67's busy set: 3 false pages in 50 nights, 0 before the held levels came; 1
    so)."""
    outside = seen & ~in_runs
    rate = float((sides[outside] == sides[start]).sum() / max(outside.sum(), 1))
    length, nights = end - start, int(seen.sum())
    expected = rate ** length * (1 + (nights - length) * (1 - rate))
    return expected < policy.own_tail or not policy.own_tail


def far_rate(standard: np.ndarray, policy: Policy) -> float:
    """The share of far worse nights (beyond ``far`` of their noise, worse > 0) of all
    rows' nights (``standard``: in their noise; NaN: not run)."""
    seen = ~np.isnan(standard)
    return float(_far_worse(standard, policy).sum() / max(seen.sum(), 1))


def _far_worse(standard: np.ndarray, policy: Policy) -> np.ndarray:
    """Which nights lie beyond ``far`` of their noise on the worse side (NaN: none, as
    any comparison with it is false).

    Only a worse night pages, and a line's far nights come again on their own side: on
    the nine recorded real sets (as benchmarks/real_tails.py judges them) a night lay 6
    noise worse after a baseline with far nights only on the better side 0.2 % of 620
    times, after none 0.8 % of 3,576, after far worse ones only 10.0 % of 2,400. Counted on
    both sides, a line with one far better night read two nights of a Himeno node 30 %
    slower as its own kind of night (run_quality, 16 nodes, seed 1: paged within 2
    nights in 77 % of 60 trials; 87 % so)."""
    return standard > policy.far


def far_shares(standard: np.ndarray, policy: Policy, lengths: np.ndarray | None = None,
               held_out: bool = False, pooled: float | None = None) -> np.ndarray:
    """Each row's share of far worse nights (``_far_worse``) over the nights it has
    (``standard``: in its noise, worse > 0; NaN: not run) beyond the share the t gives:
    0 for a row whose history is as the t says, or that has fewer than
    ``effect_nights``. A young row (a history of fewer than ``young_nights``: its own
    length, ``lengths``, where the matrix leaves out nights of other rows' recent ones;
    else the nights it has) counts the nights it lacks at the far rate of all rows'
    nights: its first weeks have seldom seen its slow states, which the run's lines
    together have (on the real sets it took 8 false pages to 5, the faults paged as
    before; docs/verdicts.md; ``pooled``: that rate where ``standard`` is some of the
    rows). The nights of a held level never count (``without_held_levels``;
    ``held_out``: the caller took them out already)."""
    if not policy.far:
        return np.zeros(len(standard))
    # the worse side's far nights are read as the share of both sides' (half of it on
    # each: far_night_probability), less the t's on both: counted twice, as a share of
    # the worse side alone, they over-read the real sets (13.5 % a night against 10.0 %
    # seen) and the real sets' driver faults paged later (benchmarks/results/verdicts.md)
    expected = 2 * t_chance(policy.far, policy)
    if not held_out:
        standard = without_held_levels(standard, policy)
    seen = ~np.isnan(standard)
    counts = seen.sum(axis=1)
    far = _far_worse(standard, policy).sum(axis=1)
    pooled = far_rate(standard, policy) if pooled is None else pooled
    lacking = np.maximum(policy.young_nights - (counts if lengths is None else lengths), 0)
    share = (far + lacking * pooled) / np.maximum(counts + lacking, 1) - expected
    return np.where(counts >= policy.effect_nights, np.clip(share, 0.0, 1.0), 0.0)


def far_shares_of(histories: list[tuple[float, ...]], policy: Policy) -> np.ndarray:
    """``far_shares`` of lines of histories of any length (each night in its noise), as
    one NaN-padded matrix."""
    return far_shares(history_matrix(histories), policy)


def read_lines(distances: list[tuple[float, ...]], histories: list[tuple[float, ...]],
               policy: Policy) -> tuple[np.ndarray, list[float]]:
    """Each line's far share and pooled z, its recent nights (``distances``) read with its
    far nights and its own tail, both learnt from its history's nights (in its noise,
    worse > 0): what the verdict and benchmarks/run_quality.py hand the findings."""
    matrix = without_held_levels(history_matrix(histories), policy)
    shares = far_shares(matrix, policy, held_out=True)
    return shares, pooled_zs(distances, policy, shares, matrix)


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
             acknowledged: dict[str, str] | None = None,
             before: dict[str, set[str]] | None = None,
             bar_before: dict[str, str] | None = None) -> list[Finding]:
    """The run's findings, paging ones first. ``groups``: named node sets (leaf
    switches); ``environment``: each fingerprint change that night (``driver 5.14 →
    5.15``) → the nodes it happened on; ``acknowledged``: cause → "by who on date: why"
    (shown with the finding, which then does not page); ``before``: the fingerprint
    changes of the runs just before tonight (those of the lines' recent nights), each →
    the nodes it happened on: a shared cause most of whose lines run on them is confirmed
    on the nights since, not only after ``shared_nights``; ``bar_before``: the subjects of
    the run before's findings at its bar (``at_the_bar``)."""
    environment, groups, before = environment or {}, groups or {}, before or {}
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
    effects = NightEffects(lines, groups, policy)
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
            # the cause whose lines moved furthest in all: the faulty HCA, not the partner
            # its lines met tonight (a pair Slurm changed) nor a neighbour whose own lines
            # had an ordinary bad night beside the faulty ones
            strength = round(sum(abs(lines[i].z) for i in explained), 6)
            key = (strength, -ORDER.index(kind), -total)
            if best is None or key > best[0]:
                best = (key, kind, subject, explained, total)
        by_cause = kept
        if best is None:
            break
        _, kind, subject, explained, total = best
        subject = _with_twins(kind, subject, explained, kept, covered)
        if kind in (*SHARED, NODE, LEAF):
            # a line moved far beyond the shift its node, leaf or partition shares has a
            # cause of its own (an HCA's lines on a node's bad night)
            within = _within_shared_shift([lines[i] for i in explained], explained)
            if len(within) < len(explained):  # a narrower cause may explain what is left
                kind, subject, within = _narrowest(kind, subject, within, kept, covered)
                total = len(covered[kind, subject.split(", ")[0]])
            explained = within
        if kind in (NODE, DEVICE, LEAF) and len(explained) < policy.local_min_lines:
            # one line left of a node's: its own fault (a slow Himeno node), judged alone;
            # as its node's, on the node's five lines, it paged within 2 nights in 50 %
            # of run_quality's trials at 16 nodes
            found += [_alone(lines, i, effects) for i in explained if lines[i].confirmed]
            moved -= set(explained)
            continue
        judged = covered[kind, subject.split(", ")[0]]  # twins take part in the same lines
        if kind in (*SHARED, LEAF):
            kind, subject, judged = _node_pair(kind, subject, explained, kept, covered,
                                               judged)
            total = len(judged)
        elif kind == NODE and ", " not in subject:
            subject, explained, judged = _with_slow_partner(subject, explained, kept,
                                                            covered, lines, effects.shared)
            total = len(judged)
        finding = Finding(kind, subject, [lines[i] for i in explained], total,
                          environment=[subject] if kind == ENVIRONMENT else [])
        # evidence over every line of the cause, moved or not: a node whose three
        # noisiest of ten lines moved is no node fault; lines that move together on
        # healthy nights (one node, leaf or fabric under them) count as what they are
        _weigh(finding, effects, subject, _judged_lines(kind, judged, explained, lines,
                                                        policy))
        found.append(finding)
        moved -= set(explained)
    # a line alone is a finding once the line rule confirmed it (a level, not one night)
    found += [_alone(lines, i, effects) for i in sorted(moved) if lines[i].confirmed]
    critical = policy.critical_z(len(lines))
    for finding in found:
        _decide(finding, critical, environment, policy, before, bar_before)
    found += _levels_of_their_own(found, lines, effects, critical, environment, policy,
                                  before, bar_before)
    for finding in found:
        finding.young = young_history(finding.history_nights, policy)
        finding.acknowledged = "; ".join(
            said for cause, said in (acknowledged or {}).items()
            if acknowledges(cause, finding.subject, finding.members()))
        finding.paged = finding.paged and not finding.acknowledged
    return sorted(found, key=lambda f: (not f.paged, -abs(f.evidence)))


def at_the_bar(found: Iterable[tuple[str, float, float, str]], run: str) -> dict[str, str]:
    """Of one run's findings (subject, evidence, its bar, the ack that muted it), each at
    the bar → what ``Finding.again`` says of it tonight (``run 41: evidence z 4.47 ≥ its
    bar 3.99``). Only a worse finding's evidence is positive. One an ack muted is left
    out: the ack cleared, its fault fixed, a night's blip there would page at once."""
    return {subject: f"{run}: evidence z {evidence:.2f} ≥ its bar {critical:.2f}"
            for subject, evidence, critical, muted in found
            if evidence >= critical and not muted}


def young_history(nights: int, policy: Policy) -> str:
    """What a finding says of a history shorter than ``Policy.young_nights`` (nothing of
    a full one, or of lines that said none)."""
    if 0 < nights < policy.young_nights:
        return f"judged on a young history ({nights} of {policy.young_nights} nights)"
    return ""


def _alone(lines: list[Evidence], index: int, effects: NightEffects) -> Finding:
    """The finding of one line alone, with the far nights its evidence was read with."""
    line = lines[index]
    return _weigh(Finding(LINE, line.name, [line], 1, far=effects.far_share(index)),
                  effects, line.name, [index])


def _weigh(finding: Finding, effects: NightEffects, subject: str, judged: list[int]
           ) -> Finding:
    """A finding's evidence from its tests over the ``judged`` lines, kept with them."""
    finding.tests = effects.tests(finding.kind, subject, judged)
    finding.evidence = (max if finding.worse else min)(finding.tests.values())
    finding.judged_on = list(zip((effects.lines[i] for i in judged),
                                 effects.residuals(finding.kind, judged) or [None] * len(judged)))
    finding.night_effects, finding.judged_rows = effects, list(judged)
    return finding


def _levels_of_their_own(found: list[Finding], lines: list[Evidence],
                         effects: NightEffects, critical: float,
                         environment: dict[str, set[str]], policy: Policy,
                         before: dict[str, set[str]], bar_before: dict[str, str] | None
                         ) -> list[Finding]:
    """The confirmed lines (a level, by the line rule) of the findings that do not page,
    moved unlike the finding's others (beyond twice the median change of the others:
    ``_beyond_the_others``) or the finding's only level, each taken out as a finding of
    its own where it pages alone: a 3x latency (6 of its noise, confirmed) grouped with
    two lines of its HCA a percent worse made a device finding that was not confirmed,
    and was never paged; a slow Himeno line (-31 %, a level) beside one night of a
    bandwidth line of its node (-25 %, CV 4 %) made its node's finding, evidence 2.92,
    and was never paged that night (run_quality, 16 nodes, seed 2, trial 54). A line
    that moved like its finding's other levels is its finding's (a pair's lines 5 %
    worse are the pair's)."""
    index = {id(line): i for i, line in enumerate(lines)}
    alone: list[Finding] = []
    for finding in found:
        if finding.paged or finding.kind == LINE or len(finding.lines) < 2:
            continue  # a finding of one line is that line's
        levels = [line for line in finding.lines if line.confirmed]
        for line in [line for line in levels if line.side < 0 and (
                len(levels) == 1 or _beyond_the_others(line, finding.lines))]:
            own = _alone(lines, index[id(line)], effects)
            _decide(own, critical, environment, policy, before, bar_before)
            if own.paged and len(finding.lines) > 1:
                finding.lines.remove(line)
                alone.append(own)
    return alone


def _beyond_the_others(line: Evidence, lines: list[Evidence]) -> bool:
    """Whether ``line`` moved more than twice the median of the other ``lines`` (a
    finding's): of two lines the median of both is their mean, which neither is twice
    of; a slow Himeno line (-30 %) beside one noisy line of its node (-14 %) stayed a
    node finding on the node's five lines and was never paged (run_quality, 16 nodes:
    within 2 nights in 65 % of trials). Or more than twice their median in noise (its
    ``z``): the same Himeno line (z 5.8) beside a bandwidth line of CV 19 % that read -18 %
    (z 0.3) is not twice that line's change, and stayed in its node's finding (16 nodes,
    within 2 nights 75 / 75 / 85 % at seeds 1-3; 80 / 85 / 90 % with this)."""
    others = [abs(other.change) for other in lines
              if other is not line and other.change is not None]
    noise = [abs(other.z) for other in lines if other is not line]
    return line.change is not None and bool(others) and (
        abs(line.change) > 2 * statistics.median(others)
        or abs(line.z) > 2 * statistics.median(noise))


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


def explains(text: str, kind: str, subject: str, members: list[list[str]] | None) -> bool:
    """Whether `verdict --explain TEXT` shows a finding: ``text`` names it or a node,
    device, leaf or line of it (``contains``: as `perfguard ack` takes it), or, a line
    alone, is part of its name, as --explain chooses the lines it shows (`--explain
    osu_bibw` showed the osu_bibw curve's decision, not the finding of it that paged the
    run, nor its evidence and bar)."""
    return contains(text, subject, members) or (kind == LINE and text in subject)


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


def _judged_lines(kind: str, covered: list[int], explained: list[int],
                  lines: list[Evidence], policy: Policy) -> list[int]:
    """The lines a cause's evidence is taken over: every line it covers, moved or not;
    for a fingerprint change, those of the measurements (groups) it moved as a shared
    cause moves lines (``shared_min_lines`` of their lines or more, and a share
    ``shared_share``): a driver that slowed small messages on 160 nodes is judged on the
    small-message lines, not diluted by the bandwidth lines of every node it was
    installed on. A measurement of a few lines is no such sample: kept because they
    moved, its lines were the night's moved lines themselves, and their evidence the
    night's noise gathered under a change's name (the embedded cluster's groups hold
    1-3 lines each: 8 of 45 updates that changed nothing paged in
    benchmarks/real_nights.py; none judged on every line of their nodes). For a device
    (an HCA, a GPU), those of the measurements two of whose lines or more it moved, and
    that share: a PCIe link at x8 halves the 4 MiB bandwidth lines both ways through the
    HCA (4 of its 10 lines) and leaves its latency and 64 KiB lines alone; over all 10
    its evidence was diluted by √10/√4 (4,000 lines: paged within 2 nights in 80 % of
    trials)."""
    if kind not in (ENVIRONMENT, DEVICE):
        return covered
    least = 2 if kind == DEVICE else policy.shared_min_lines
    by_group: dict[str, list[int]] = {}
    for i in covered:
        by_group.setdefault(lines[i].group, []).append(i)
    moved = set(explained)
    kept = [i for members in by_group.values()
            if len(moved.intersection(members)) >= max(least,
                                                        policy.shared_share * len(members))
            for i in members]
    return kept or covered


def _narrowest(kind: str, subject: str, explained: list[int],
              kept: dict[tuple[str, str, int], list[int]],
              covered: dict[tuple[str, str], list[int]]) -> tuple[str, str, list[int]]:
    """The most specific cause (a device before its node, a leaf before the partition)
    that explains ``NARROWER_SHARE`` of ``explained`` or more (the most of it, then the
    fewest lines covered), with those lines; else ``kind`` and ``subject`` themselves."""
    wanted = set(explained)
    narrower = [(-len(wanted.intersection(indices)), len(covered[other_kind, other]),
                 other_kind, other, indices)
                for (other_kind, other, _), indices in kept.items()
                if ORDER.index(other_kind) < ORDER.index(kind)
                and len(wanted.intersection(indices)) >= NARROWER_SHARE * len(wanted)]
    if not narrower:
        return kind, subject, explained
    *_, kind, subject, indices = min(narrower, key=lambda found: found[:4])
    return (kind, _with_twins(kind, subject, indices, kept, covered),
            sorted(wanted.intersection(indices)))


def _node_pair(kind: str, subject: str, explained: list[int],
               kept: dict[tuple[str, str, int], list[int]],
               covered: dict[tuple[str, str], list[int]], judged: list[int]
               ) -> tuple[str, str, list[int]]:
    """Two nodes whose lines are ``NARROWER_SHARE`` or more of the lines a leaf or a
    shared cause explains, as the cause instead (``node13, node14``), judged on every line
    through either: a slow pair of one leaf moved 8 of its 27 lines, which as the leaf's
    were judged on all 27 and paged within 2 nights in 50 % of run_quality's trials at 16
    nodes (issue 67). Else the cause as it was."""
    wanted = set(explained)
    nodes = sorted({other for other_kind, other, _ in kept if other_kind == NODE})
    reach = {node: wanted.intersection(covered[NODE, node]) for node in nodes}
    best = max(((len(reach[a] | reach[b]), a, b) for a in nodes for b in nodes if a < b
                if len(reach[a] | reach[b]) >= NARROWER_SHARE * len(wanted)),
               default=None)
    if best is None:
        return kind, subject, judged
    _, a, b = best
    return NODE, f"{a}, {b}", sorted(set(covered[NODE, a]) | set(covered[NODE, b]))


def _with_slow_partner(subject: str, explained: list[int],
                       kept: dict[tuple[str, str, int], list[int]],
                       covered: dict[tuple[str, str], list[int]], lines: list[Evidence],
                       shared: dict[tuple[str, str], float]) -> tuple[str, list[int], list[int]]:
    """A node finding joined by a node it shares moved lines with, where half or more of
    that node's own lines judged tonight (those not through ``subject``) moved the same
    way and its shared effect adds to the subject's (the two combined read more than the
    subject alone): both are slow (``node15, node16``), judged on every line through
    either. The lines between them hold both nodes' nights, and the night effects split
    each such move between the two: with node16's other lines missing, its effect read
    +52.9 % and then +25.3 %, two nights that do not agree, and a pair at half speed read
    4.16 and 4.34 as two nodes against the bar 4.55 (run_quality, 16 nodes, 10 % of
    line-nights missing, a 10-night history, seed 1, trial 4); combined, 6.01. A healthy
    partner's own lines do not move. Its effect alone was not enough: a neighbour's
    ordinary night (z 2.50) took a node's 4.85 over the bar 4.97 (300 lines, seed 2,
    night 84). Returned: the subject, its moved lines and the lines it is judged on."""
    side = lines[explained[0]].side
    alone = shared.get((NODE, subject))
    best = None
    for (kind, other, other_side), moved in kept.items():
        if kind != NODE or other == subject or other_side != side or alone is None \
                or (NODE, other) not in shared \
                or not any(other in lines[i].nodes for i in explained):
            continue
        own = [i for i in covered[NODE, other] if subject not in lines[i].nodes
               and lines[i].moves]
        if not own or 2 * len(set(own) & set(moved)) < len(own):
            continue  # its own lines did not move: its effect is the subject's lines'
        both = stouffer([alone, shared[NODE, other]])
        if side * both < side * alone and (best is None or side * both < side * best[0]):
            best = (both, other, moved)
    if best is None:
        return subject, explained, covered[NODE, subject]
    _, other, moved = best
    return (", ".join(sorted([subject, other])), sorted(set(explained) | set(moved)),
            sorted(set(covered[NODE, subject]) | set(covered[NODE, other])))


def _within_shared_shift(moved: list[Evidence], indices: list[int]) -> list[int]:
    """Of the lines a shared cause (a partition, a check's metric, a leaf, a node)
    explains, those whose change is at most twice the median change and at least half
    of it: on a night of fabric load (-10 %), a leaf at -37 % stays its own; an HCA at
    half bandwidth on its node's ordinary bad night is the HCA's six lines, not the
    node's ten, and a congested leaf on a noisy night is the leaf, not the partition."""
    changes = [abs(line.change) for line in moved if line.change is not None]
    if not changes:
        return indices
    median = statistics.median(changes)  # of sizes: latency up and bandwidth down alike
    kept = [i for i, line in zip(indices, moved)
            if line.change is None or median / 2 <= abs(line.change) <= 2 * median]
    return kept or indices


def _decide(finding: Finding, critical: float, environment: dict[str, set[str]],
            policy: Policy, before: dict[str, set[str]] | None = None,
            bar_before: dict[str, str] | None = None) -> None:
    """Confirmation and paging of one finding (worse only pages). A local one (a node,
    device, leaf or line) is confirmed when half its lines hold a level (a node's or
    device's also when, of the lines Slurm did not bring to its nodes that night, one
    does and half do: ``_stayed``), or when the run before had it at the bar too
    (``bar_before``): what "one night: confirm on the next" promises. A node pair's 3
    lines at the bar on two nights (z 4.47 then 6.16 against 3.99) with one line a level,
    its latency's two nights +100 % and +118 %, was never paged (run_quality, 2 nodes,
    history 3 nights 3x worse first: 88 → 93 % within 2 nights at seed 2; no false page
    more at any size, seed or flag). A shared cause is
    confirmed over ``shared_nights`` nights (other jobs' traffic is a night or two), or
    over the nights since a change on its nodes in the runs before (``before``): a
    driver's +0.3 µs on every small latency of 4,000 lines read z 96.6 as one
    measurement's finding on the night after the update, and waited for a third night
    (run_quality, 4,000 lines: paged within 2 nights in 90 % of trials)."""
    confirmed = sum(line.confirmed for line in finding.lines)
    held, stayed = _stayed(finding)
    finding.confirmed = (confirmed >= (len(finding.lines) + 1) // 2
                         or held > 0 and held >= (stayed + 1) // 2)
    if finding.kind in LOCAL and finding.worse:
        finding.again = (bar_before or {}).get(finding.subject, "")
        finding.confirmed = finding.confirmed or bool(finding.again)
    nodes = {node for line in finding.lines for node in line.nodes}
    if finding.kind != ENVIRONMENT:
        finding.environment = [change for change, on in environment.items() if on & nodes]
        if not finding.environment:
            finding.since_change = _changes_under(finding.lines, before or {})
    if finding.kind in SHARED:
        finding.confirmed = finding.confirmed and (
            _shared_nights(finding) >= policy.shared_nights or bool(finding.since_change))
    finding.paged = finding.worse and finding.evidence >= critical and (
        finding.confirmed or bool(finding.environment))
    finding.decided = decision_words(finding, confirmed, critical, policy, (held, stayed))


def _stayed(finding: Finding) -> tuple[int, int]:
    """How many of a node's or device's lines held a level, of how many Slurm did not
    bring to its nodes that night (brought: a subject's node is among its nodes tonight
    and was not in the run judged before, a pair line given another partner). Such a
    line has one night through the cause, neither a level of it nor a night against it;
    a line that kept the subject's node and changed its partner ran through the cause
    both nights, and counts (one that gained another node of a pair's or twins' subject
    is brought: it did not run through all of them both nights). A PCIe link at x8 on
    16 nodes (seed 1, trials 40 and 52) read 5.40 and 6.63 on its second night against
    the bars 4.59 and 4.60, with one line a level and two that Slurm had brought to its
    node that night: not confirmed, 1 of 3. Only a node's or device's (another's: 0 of
    0, confirming nothing): a leaf's nodes are not in its name, and a line alone is its
    one line."""
    if finding.kind not in (DEVICE, NODE):
        return 0, 0
    subject = subject_names(finding.subject)
    stayed = [line for line in finding.lines if not line.nodes_before
              or not (set(line.nodes) - set(line.nodes_before)) & subject]
    return sum(line.confirmed for line in stayed), len(stayed)


def _changes_under(lines: list[Evidence], before: dict[str, set[str]]) -> list[str]:
    """The changes of ``before`` (each → its nodes) under most of ``lines``: one node's
    kernel update under a partition-wide finding of 160 nodes explains none of it."""
    return [change for change, on in before.items()
            if 2 * sum(bool(on.intersection(line.nodes)) for line in lines) > len(lines)]


def _shared_nights(finding: Finding) -> float:
    """The nights a shared cause's lines held it (their median)."""
    return statistics.median(line.nights for line in finding.lines)


def decision_words(finding: Finding, confirmed: int, critical: float, policy: Policy,
                   stayed: tuple[int, int]) -> str:
    """Why a finding pages or not, each condition with its numbers (``_decide``'s;
    ``stayed``: ``_stayed``'s count)."""
    held = (f"{confirmed} of its {len(finding.lines)} moved line(s) held a level by the line "
            f"rule (half needed)")
    if finding.kind in (DEVICE, NODE) and stayed[1] < len(finding.lines):
        held += f", {stayed[0]} of the {stayed[1]} Slurm did not bring to its nodes that night"
    if finding.again:
        held = f"at the bar on the run before too ({finding.again}); {held}"
    elif finding.kind in LOCAL and not finding.confirmed:
        held += "; nor at the bar on the run before"
    if finding.kind in SHARED:
        held += (f", since {'; '.join(finding.since_change)} in the runs before"
                 if finding.since_change and _shared_nights(finding) < policy.shared_nights
                 else f", over {policy.shared_nights} nights for a shared cause")
    conditions = [
        (finding.worse, "worse" if finding.worse else "better (only worse pages)"),
        (finding.evidence >= critical,
         f"evidence z {finding.evidence:.2f} {'≥' if finding.evidence >= critical else '<'} "
         f"the bar {critical:.2f}"),
        (finding.confirmed or bool(finding.environment),
         f"confirmed: {held}" if finding.confirmed
         else f"a fingerprint change on its nodes that night ({'; '.join(finding.environment)})"
         if finding.environment else f"not confirmed: {held}")]
    verdict = "pages" if all(ok for ok, _ in conditions) else "does not page"
    return f"{verdict}: " + "; ".join(words for _, words in conditions)


#: How a node's effect was not read as its own (``NightEffect.how``).
READ_AGAIN = "read again from the node's lines outside this finding, no z of its own"
NOT_SWEPT = "not estimated (the node has one line here): nothing taken off"


@dataclass(frozen=True)
class NightEffect:
    """One night effect taken off a finding's lines (``NightEffects.taken_off``): on each
    of the run's recent nights (relative, worse > 0), the spread of its history nights, and
    its z: its recent nights that agree with its last, each in that spread, combined (as
    its shared effect's test reads it); ``how``: where it was not read so."""
    values: tuple[float, ...]
    noise: float
    z: float | None
    how: str = ""


@dataclass(frozen=True)
class TakenOff:
    """One judged line's latest recent night taken apart (``NightEffects.taken_off``):
    its move against its baseline (relative, worse > 0), each night effect taken off it
    (its partition's, leaves', nodes'), what is left, and the noise that is read in (its
    history nights' spread of what is left), widened ``load`` times on a night of fabric
    load where it is read alone; or, ``own_nights``, read in its own nights, nothing
    taken off (a node-local line whose node's nights spread wider: ``_steadier_alone``).
    ``night``: which of the run's recent nights that is (the last: tonight); ``nights``:
    what is left on each of its recent nights in that noise, what its residual z reads
    (the nights that agree with its latest, through the t, combined)."""
    move: float
    parts: tuple[tuple[str, float], ...]
    left: float
    noise: float
    load: float = 1.0
    own_nights: bool = False
    night: tuple[int, int] = (1, 1)
    nights: tuple[float, ...] = ()
    zs: tuple[float | None, ...] = ()

    def render(self) -> str:
        """``tonight worse by +52.0 % = partition gpu +0.4 + node1 +25.3 + node2 +24.9 +
        left +1.4 (0.48 of its noise 2.9 %); its recent nights in that noise: 0.31, 0.48;
        z of those that agree with its latest (t, far nights, capped): 0.33, 0.51,
        combined 0.60``: every number checkable by hand."""
        when = ("tonight" if self.night[0] == self.night[1]
                else f"its latest night (the run's recent night {self.night[0]} of "
                     f"{self.night[1]})")
        load = f" times the fabric's load {self.load:.2f}" if self.load > 1 else ""
        taken = " + ".join([*(f"{name} {signed_percent(value)}" for name, value in self.parts),
                            f"left {signed_percent(self.left)}"])
        head = (f"{when} worse by {signed_percent(self.move)} %, read in its own nights "
                f"(nothing taken off; " if self.own_nights
                else f"{when} worse by {signed_percent(self.move)} % = {taken} (")
        agree = [z for z in self.zs if z is not None]
        combined = sum(agree) / math.sqrt(len(agree)) if agree else 0.0
        return (head + f"{self.left / (self.noise * self.load):.2f} of its noise "
                f"{signed_percent(self.noise, '.1f')} %{load}); its recent nights in that "
                f"noise: " + ", ".join(f"{value:.2f}" for value in self.nights)
                + "; z of those that agree with its latest (t, far nights, capped): "
                + ", ".join("-" if z is None else f"{z:.2f}" for z in self.zs)
                + f", combined {combined:.2f}")


def signed_percent(share: float, spec: str = "+.1f") -> str:
    """A relative change in percent, never ``-0.0``."""
    value = share * 100
    return format(0.0 if round(value, 1) == 0 else value, spec)


#: Rows read (``NightEffects._read``): their residuals as a cause's test reads them, as a
#: line alone reads them, and their far shares.
Reading = tuple[np.ndarray, np.ndarray, np.ndarray]


class NightEffects:
    """What moved a run's lines together, night by night, from their stored history.

    Lines are not independent: every line through a node moves with the node's night (a
    busy neighbour, a warm rack, OS jitter), every line through a leaf switch with the
    leaf's, every inter-node line of a partition with the fabric's. Added up as if
    independent, one node's ordinary bad night is ten lines' worth of evidence and pages
    (benchmarks/run_quality.py: 1.2 false pages a month at 300 lines, 4.5 at 4,000).

    So each night (a key of ``Evidence.nights_at``) the lines' worse-signed relative
    changes are taken apart, medians all (one line's spike moves none): the partition's
    fabric effect (its inter-node lines), each leaf's (its inter-node lines, less the
    fabric's), each node's (its lines, less fabric and leaves), and what is left of each
    line, its residual. Each effect's and each line's residual's own spread is taken
    from the history nights (no line's recent ones): a cause is judged against that,

    - its shared effect (a node, a leaf, a partition) against the spread of that same
      effect on the nights before: a leaf whose lines all lost 30 % is 20 of its own σ,
      a node's ordinary 2 % night is one;
    - its lines' residuals (what the node, leaf and fabric effects do not explain),
      combined as independent lines (Stouffer): an HCA at half bandwidth moves 6 of its
      node's 25 lines, leaving the node's median (its effect) where it was; a device's
      with its nodes' effects read from their other lines where those are as many and
      its history is not young (``residuals``, ``_without``).

    The larger of the two is the cause's evidence (a bound of two tests: the page's bar
    barely moves). Each night counts as a line's night does (Student-t of ``tail_df``,
    at most ``night_cap``; a residual, and a line read alone, mixed with the far nights
    of its residual's history, ``Policy.far``; a shared effect with the t alone); the
    recent nights that agree with tonight's within
    ``agree`` of their noise (a night beyond on tonight's side: within that times
    tonight's level, 1 + its relative move, for a line and a shared effect alike) are
    combined (Stouffer), as the line rule's are. The nodes
    of a line are tonight's on every night (the history keeps values, not the pairs
    Slurm picked: a line whose partner changed is taken as through the same nodes, which
    understates how its nights moved with the nodes it had). With fewer than
    ``effect_nights`` history nights in common the lines are taken as independent (the
    Stouffer of their ``z``).
    """

    def __init__(self, lines: list[Evidence], groups: dict[str, set[str]], policy: Policy):
        self.lines, self.policy = lines, policy
        keys = sorted({key for line in lines for key in line.nights_at})
        recent = {key for line in lines if line.recent
                  for key in line.nights_at[-line.recent:]}
        self.history = np.array([key not in recent for key in keys], dtype=bool)
        self.usable = int(self.history.sum()) >= policy.effect_nights and bool(recent)
        self.shared: dict[tuple[str, str], np.ndarray] = {}
        #: The rows each partition's and leaf's effect was taken from, and the effect
        #: itself each night (relative, worse > 0): what ``taken_off`` shows.
        self.rows: dict[tuple[str, str], set[int]] = {}
        self.effect: dict[tuple[str, str], np.ndarray] = {}
        if not self.usable:
            return
        self.recent_at = np.flatnonzero(~self.history)
        place = {key: column for column, key in enumerate(keys)}
        moves = np.full((len(lines), len(keys)), np.nan)
        # each line's own recent nights: a line that missed a night has them further
        # back, and the run's recent nights are every line's together; read as its own,
        # a line's history nights just before tonight's joined its evidence and left its
        # history (run_quality, 4,000 lines with a tenth of line-nights missing:
        # 1.02-1.38 false pages a month, every one a line alone)
        own = np.zeros(moves.shape, dtype=bool)
        for row, line in enumerate(lines):
            if line.moves:
                moves[row, [place[key] for key in line.nights_at]] = line.moves
                if line.recent:
                    own[row, [place[key] for key in line.nights_at[-line.recent:]]] = True
        self.standard = moves[:, self.history] / self._noise(moves)[:, None]
        self._take_apart(moves, groups, own)

    def _take_apart(self, moves: np.ndarray, groups: dict[str, set[str]], own: np.ndarray
                    ) -> None:
        """The fabric, leaf and node effects of each night, each in its own noise, and
        each line's residual in its own: its history every night it has but its ``own``
        recent ones."""
        lines = self.lines
        #: Whether each line runs between nodes (the fabric's, its leaves'); else it is
        #: node-local (Himeno, a GPU's copy, an intra-node pair).
        self._inter = inter = np.array([len(set(line.nodes)) > 1 for line in lines])
        left = moves.copy()
        load = np.ones(moves.shape)
        through = {leaf: inter & np.array([bool(members & set(line.nodes)) for line in lines])
                   for leaf, members in sorted(groups.items())}  # each leaf's lines
        within = [inter & np.array([set(line.nodes) <= members for line in lines])
                  for _, members in sorted(groups.items())]  # those between its nodes
        for partition in sorted({line.partition for line in lines}):
            rows = inter & np.array([line.partition == partition for line in lines])
            leaves = _leaves_median([rows & leaf for leaf in within], left)
            if leaves is None:  # fewer than two leaves with lines of their own
                leaves = _leaves_median([rows & leaf for leaf in through.values()], left)
            effect = self._remove((PARTITION, f"partition {partition}"), rows, left, leaves)
            load[rows] = np.abs(effect / self._noise(effect[None, :])[0]) / self.policy.agree
        for leaf, rows in through.items():
            self._remove((LEAF, leaf), rows, left)
        self._before_nodes = left.copy()
        self._own, self._load, self._moves = own, load, moves
        self._remove_nodes(left)
        self.residual, self.alone, self.shares = self._read(left, np.arange(len(lines)))
        self._left_out: dict[tuple[tuple[int, ...], bool], Reading] = {}
        #: The nodes' effects each ``_without`` reading took off, and the node-local
        #: lines read in their own nights (``_steadier_alone``): what ``taken_off`` shows.
        self._effects_read: dict[tuple[tuple[int, ...], bool], tuple[np.ndarray, set[int]]] = {}
        self._in_own_nights: set[int] = set()

    def _read(self, left: np.ndarray, rows: np.ndarray, pooled: float | None = None
              ) -> Reading:
        """Rows ``rows``' residuals (``left``: what the fabric, leaf and node effects
        leave of their moves, a row each), each in its own noise (its history every night
        it has but its own recent ones), pooled over the recent nights that agree: as a
        cause's residuals read them, as a line alone reads them (less the fabric's load),
        and each row's far share (a young row's lacking nights at ``pooled``, the run's
        far rate, where ``rows`` are some of its lines)."""
        residual_nights, alone_nights, levels, shares, past = self._read_parts(left, rows,
                                                                               pooled)
        residual = np.array(self._pooled_rows(residual_nights, levels, shares, past))
        alone = np.array(self._pooled_rows(alone_nights, levels, shares, past))
        unmeasured = np.array([not self.lines[row].moves for row in rows], dtype=bool)
        alone[unmeasured] = np.nan
        residual[unmeasured] = np.nan
        return residual, alone, shares

    def _read_parts(self, left: np.ndarray, rows: np.ndarray, pooled: float | None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """What ``_read`` pools: the rows' recent nights in their noise (as a cause's
        residuals read them, and as a line alone, less the fabric's load), each row's
        level tonight, its far share and its history nights in its noise."""
        own = self._own[rows]
        standard = left / _noise_of(np.where(own, np.nan, left))[:, None]

        def recent(matrix: np.ndarray) -> np.ndarray:
            return np.where(own, matrix, np.nan)[:, self.recent_at]

        tonight = recent(self._moves[rows])
        seen = ~np.isnan(tonight)
        last = np.where(seen.any(axis=1), tonight[np.arange(len(tonight)),
                        seen.shape[1] - 1 - np.argmax(seen[:, ::-1], axis=1)], 0.0)
        lengths = np.array([self.lines[row].history_nights for row in rows])
        past = without_held_levels(np.where(own, np.nan, standard), self.policy)
        if pooled is None:  # all the run's lines: the rate a part of them is read at
            self._far_rate = pooled = far_rate(past, self.policy)
        shares = far_shares(past, self.policy, lengths, held_out=True, pooled=pooled)
        # fabric load moves each line by its own share of the fabric's shift (-10 % here,
        # -15 % there): on a night the fabric moved beyond ``agree`` of its own spread, a
        # line alone is read in a spread grown in proportion (such nights paged steady
        # lines 6 of their quiet-night residual spread off: run_quality.py, 4,000 lines,
        # seed 1, nights 63 and 67); a device's or node's lines keep theirs (their cause
        # is judged on several lines: an HCA's night on such a night still pages)
        return (recent(standard), recent(standard / np.maximum(self._load[rows], 1.0)),
                1.0 + np.abs(last), shares, past)

    def _without(self, rows: list[int], precise: bool = True) -> Reading:
        """``_read`` of ``rows`` (a device's lines, or one line alone) with their nodes'
        effects taken from the nodes' other lines (``_node_effects_without``, where those
        are as many): a cause is tested against the nights its own lines did not make. A
        PCIe link at x8 halved 3 of its node's 6 lines on a night Slurm gave a pair line
        that node: their biweight took part of the -50 % as the node's night, and on the
        second night its residuals read 2.2-3.4, evidence 4.50 against the bar 4.60
        (run_quality, 16 nodes, seed 1: paged within 2 nights in 78 % of 60 trials). A
        slow Himeno line alone the same: of its node's 4 lines, worse by 24 % (a latency
        of CV 20 %), 1 %, 31 % (the Himeno) and 1 %, the biweight read 14.4 % as the
        node's night, and the Himeno's residual read 3.50 over two nights (its own nights
        5.27; seed 2, trial 39). Their spread over the history nights is taken the same
        way, so a node read from fewer lines is read in the wider spread that gives.
        ``precise``: the others weighted by their precision (``_node_effects_without``);
        not (a line alone): a node-local line is read in its own nights where those hold
        fewer far nights, or spread much less (``_steadier_alone``)."""
        key = (tuple(rows), precise)
        if key not in self._left_out:
            effects, read_again = self._node_effects_without(set(rows), precise)
            left = np.vstack([self._node_free(row, effects) for row in rows])
            read = self._read(left, np.array(rows), self._far_rate)
            if not precise and len(rows) == 1:
                read = self._steadier_alone(rows[0], left, read)
            self._left_out[key], self._effects_read[key] = read, (effects, read_again)
        return self._left_out[key]

    def _steadier_alone(self, row: int, left: np.ndarray, read: Reading) -> Reading:
        """A line alone's reading less its node's nights (``left``, ``read``), or in its
        own nights where it is node-local and those hold fewer far nights, or as many and
        spread ``OWN_NIGHTS_MARGIN`` times less over its history. A far night of its
        nights less its node's that its own nights do not hold is its node's night misread
        from the node's other lines: a slow Himeno node's history less its node's nights
        spread 1.4 % against its own 2.6 %, with one night 8.4 of that out, and its fault
        read 4.20 against the bar 4.59 on its second night (run_quality, 16 nodes, seed 2,
        trial 47; its own nights, none far: 5.06). Less its node's nights read from a few
        noisy fabric lines, the same fault's history spread 3.1 % a night where its own
        nights spread 1.4 %, and it read 3.26 against 4.60 (seed 1, trial 1). On a busy
        host the node's nights are what makes an intra-node latency spike: its own
        nights spread 7.4 % against 20.7 % less its node's, but held the far nights, and
        read so the driver's +151 % on it did not page within 3 nights (the sixth real
        set, its second driver trial)."""
        if self._inter[row]:
            return read
        moves = self._moves[[row]]
        history = ~self._own[[row]]
        own_spread, left_spread = (_noise_of(np.where(history, matrix, np.nan))[0]
                                   for matrix in (moves, left))
        own = self._read(moves, np.array([row]), self._far_rate)
        fewer_far, as_many = own[2][0] < read[2][0], own[2][0] == read[2][0]
        steadier = OWN_NIGHTS_MARGIN * own_spread < left_spread
        if fewer_far or (as_many and steadier):
            self._in_own_nights.add(row)
            return own
        return read

    def _node_effects_without(self, out: set[int], precise: bool = True
                              ) -> tuple[np.ndarray, set[int]]:
        """The nodes' effects with those of the nodes of rows ``out`` read again from
        their other rows (``NODE_SWEEPS`` times: a pair line holds its partner's night),
        each row weighted by its precision but no more than a typical row of its node's
        (``_weighted_biweights``): of a node's Himeno (1 %) and one latency line (20 %)
        left, the Himeno; of 25 lines of 2-3 % left, each alike. Not ``precise``: each
        row weighted alike, at its node's typical spread: a line alone so (weighted by
        precision, the sixth real set's driver paged within 3 nights in 2 of its 3
        trials, not 3; benchmarks/results/verdicts.md, 2026-11-30). A node whose other
        rows are fewer than two, or than half the rows of ``out`` (the device's judged
        lines, through its partners too), keeps its effect, and so does each night none
        of them ran: read from the few lines left, the embedded cluster's one device a
        node (`lo`) paged ordinary busy nights (3 false pages more on the real nights'
        sets). Two other rows however many the device's were too few: node1's night read
        from its 4 intra-node lines against 12 of `lo` paged `node2:lo` on a busy night
        (the sixth real set in a random order: 2 false pages, not 1). Half as many are
        enough: kept wherever the device's rows were most of its node's, a PCIe link at
        x8 on a night Slurm gave two more pair lines its node (4 of its 6 rows) left the
        node's -50 % in the node's effect and its residuals read -1.24 on the second
        night (run_quality, 16 nodes, seed 1, trial 14); read from the node's latency and
        Himeno rows they read 7.16. Returned with the nodes read again."""
        touched = sorted({self._node_number[node] for row in out
                          for node in self.lines[row].nodes})
        read_again = {}  # node → its other rows and their spreads, at least its typical row's
        for index in touched:
            others = [row for row in self._rows_of[index] if row not in out]
            if len(others) < max(2, len(out) / 2):
                continue  # too few lines beside the device's (a node of one is never swept)
            spread = self._noise(self._before_nodes[self._rows_of[index]])
            own = dict(zip(self._rows_of[index], spread))
            typical = float(np.median(spread))
            read_again[index] = (others, np.maximum([own[row] for row in others], typical)
                                 if precise else np.full(len(others), typical))
        effects = self._node_effects.copy()
        for _ in range(NODE_SWEEPS):
            for index, (others, noise) in read_again.items():
                found = _weighted_biweights(
                    np.vstack([self._node_free(row, effects, index) for row in others]).T,
                    noise)
                # a night none of the others ran: the node's night as it was read
                effects[index] = np.where(np.isnan(found), self._node_effects[index], found)
        return effects, set(read_again)

    def _node_free(self, row: int, effects: np.ndarray, but: int = -1) -> np.ndarray:
        """Row ``row``'s moves less the fabric's, its leaves' and its nodes' ``effects``
        (all but node ``but``'s)."""
        mine = {self._node_number[node] for node in self.lines[row].nodes} - {but}
        return self._before_nodes[row] - sum((effects[index] for index in mine),
                                             np.zeros(effects.shape[1]))

    def _remove(self, cause: tuple[str, str], rows: np.ndarray, left: np.ndarray,
                effect: np.ndarray | None = None) -> np.ndarray:
        """The nightly median of ``rows``' moves (what is ``left`` of them) as ``cause``'s
        effect, in its history's noise; taken off those rows and returned."""
        if rows.sum() < 2:
            return np.zeros(left.shape[1])
        if effect is None:
            effect = _biweights(left[rows].T)  # a night none of its lines ran: NaN
        # a night one of its lines ran is that line's night, not the cause's: none taken
        # (a 2-node site's one judged line read 0 less the fabric's effect: its own), and
        # its spread is of the nights it was read on
        read = ~np.isnan(effect) & ((~np.isnan(left[rows])).sum(axis=0) >= 2)
        effect = np.where(read, effect, 0.0)
        left[rows] -= effect
        shared = effect / self._noise(np.where(read, effect, np.nan)[None, :])[0]
        self.shared[cause] = self._pooled_rows(shared[None, self.recent_at],
                                               _levels(effect[None, self.recent_at]),
                                               deeper=cause[0] == LEAF)[0]
        self.rows[cause] = set(np.flatnonzero(rows).tolist())
        self.effect[cause] = effect
        return effect

    def _remove_nodes(self, left: np.ndarray) -> None:
        """Each node's nightly biweight of its lines' moves (what is ``left`` of them) as
        its effect, taken off its lines, ``NODE_SWEEPS`` times (a pair line holds its
        partner's night too: median polish). Nodes that share no line are swept at once
        (one batch of biweights per colour of the graph of nodes sharing lines: a site of
        160 nodes is a handful of batches, not 480 calls); each node's effect in its
        history's noise is its shared evidence."""
        nodes = sorted({node for line in self.lines for node in line.nodes})
        number = {node: index for index, node in enumerate(nodes)}
        rows_of: list[list[int]] = [[] for _ in nodes]
        neighbours: list[set[int]] = [set() for _ in nodes]
        for row, line in enumerate(self.lines):
            mine = sorted({number[node] for node in line.nodes})
            for index in mine:
                rows_of[index].append(row)
                neighbours[index].update(mine)
        swept = [index for index in range(len(nodes)) if len(rows_of[index]) >= 2]
        colours: list[list[int]] = []
        colour_of: dict[int, int] = {}
        for index in swept:  # greedy colouring: a colour's nodes share no line
            taken = {colour_of[other] for other in neighbours[index] if other in colour_of}
            colour = next(c for c in range(len(colours) + 1) if c not in taken)
            if colour == len(colours):
                colours.append([])
            colours[colour].append(index)
            colour_of[index] = colour
        effects = np.zeros((len(nodes), left.shape[1]))
        padded = np.vstack([left, np.full((1, left.shape[1]), np.nan)])  # row -1: none
        for _ in range(NODE_SWEEPS):
            for members in colours:
                width = max(len(rows_of[index]) for index in members)
                take = np.full((len(members), width), len(left))
                for place, index in enumerate(members):
                    take[place, :len(rows_of[index])] = rows_of[index]
                rows = np.concatenate([rows_of[index] for index in members])
                counts = [len(rows_of[index]) for index in members]
                padded[rows] += np.repeat(effects[members], counts, axis=0)
                gathered = padded[take].transpose(0, 2, 1).reshape(-1, width)
                found = _biweights(gathered).reshape(len(members), left.shape[1])
                # a night of one line is that line's night, not its node's: none taken
                ran = (~np.isnan(gathered)).sum(axis=1).reshape(found.shape)
                found = np.where(np.isnan(found) | (ran < 2), 0.0, found)
                effects[members] = found
                padded[rows] -= np.repeat(found, counts, axis=0)
        left[:] = padded[:-1]
        self._node_number, self._rows_of, self._node_effects = number, rows_of, effects
        if swept:
            standard = effects[swept] / self._noise(effects[swept])[:, None]
            for index, z in zip(swept, self._pooled_rows(
                    standard[:, self.recent_at], _levels(effects[swept][:, self.recent_at]))):
                self.shared[NODE, nodes[index]] = z

    def _noise(self, moves: np.ndarray) -> np.ndarray:
        """Each row's spread over the history nights: the standard deviation of the
        values within 3.5 MAD-σ of the median, as a line's baseline takes it; at least
        0.1 % (a flat history is not noise-free)."""
        return _noise_of(moves[:, self.history])

    def _mature(self, covered: list[int]) -> bool:
        """Whether the longest history among ``covered`` is not young: their nodes'
        nights read from their other lines need the nights that weigh those
        (``residuals``)."""
        return max((self.lines[i].history_nights for i in covered),
                   default=0) >= self.policy.young_nights

    def far_share(self, index: int) -> float:
        """The far nights line ``index`` alone is read with: its residual's (as
        ``residuals`` reads a line alone) where the effects are usable and it has moves,
        else its own (``Evidence.far``)."""
        if not self.usable or np.isnan(self.alone[index]):  # NaN: no moves
            return self.lines[index].far
        if self._mature([index]):
            return float(self._without([index], precise=False)[2][0])
        return float(self.shares[index])

    def residuals(self, kind: str, covered: list[int]) -> list[float] | None:
        """What each line of ``covered`` counts in a cause's residuals' test: its residual
        z as a cause of ``kind`` reads it (a device's lines with their nodes' effects from
        the nodes' other lines, ``_without``, once their history is not young: read from
        part of its lines, a node's night needs the nights that weigh them, and on 8
        nights node3's HCA took 6.1 of its neighbour pair's fault on night 1 and paged,
        run_quality's 4,000 lines, where the whole node read 4.9; a line alone so too,
        its nodes' nights read from their other lines alike, and less the fabric's
        load), its own z where it has no residual (a curve); None without night
        effects."""
        if not self.usable:
            return None
        alone = kind == LINE  # less the fabric's load
        values = (self._without(covered, precise=not alone)[1 if alone else 0]
                  if kind in (DEVICE, LINE) and self._mature(covered)
                  else self.alone[covered] if alone else self.residual[covered])
        return [self.lines[i].z if math.isnan(value) else float(value)
                for i, value in zip(covered, values)]

    def tests(self, kind: str, subject: str, covered: list[int]) -> dict[str, float]:
        """Each test of a cause's evidence by what it reads (see the class): its lines'
        residuals combined (``residuals``; a line alone: less the fabric's load too), its
        shared effect against that effect's own history, a partition's or leaf's effect
        taken mostly from its own lines (``_enclosing``), and its lines' own nights
        combined as much as they moved together on history nights (their design
        effect); without a common history of ``effect_nights``, its lines' own nights
        combined as independent."""
        independent = stouffer(self.lines[i].z for i in covered)
        if not self.usable:
            return {f"its {len(covered)} line(s)' own nights, combined as independent (no "
                    f"common history of {self.policy.effect_nights} nights)": independent}
        tests = {f"its {len(covered)} line(s)' residuals (less the partition's, leaves' and "
                 f"nodes' nights; a whole curve: its own z), combined":
                 stouffer(self.residuals(kind, covered) or [])}
        shared = [float(self.shared[kind, one]) for one in subject.split(", ")
                  if (kind, one) in self.shared]
        if shared:  # twins, or a pair of nodes: their effects combined
            tests[f"{subject}'s shared effect against its own history"
                  + (f" ({len(shared)} combined)" if len(shared) > 1 else "")] = stouffer(shared)
        if kind in (DEVICE, NODE, LEAF):  # a fingerprint change on every node is no fabric
            tests.update(self._enclosing(covered))
        if kind == DEVICE:
            tests.update(self._nodes_read_from(subject))
        if kind == ENVIRONMENT:  # what moved every line of its nodes alike
            deff = self._design_effect(covered)
            tests[f"its lines' own nights (z {independent:.2f}) over √{deff:.2f}, how much "
                  f"more they moved together than alone on history nights"] = (
                independent / math.sqrt(deff))
        return tests

    def taken_off(self, kind: str, covered: list[int]
                  ) -> tuple[dict[str, NightEffect], list[TakenOff | None]]:
        """What ``verdict --explain`` shows of the night effects a cause's residuals were
        read less: each effect on its lines (their partitions', leaves' and nodes', as the
        residuals of a cause of ``kind`` took them: ``residuals``) by name
        (``NightEffect``), and each line's latest night taken apart (``TakenOff``; None:
        no nightly moves, a whole curve). Without night effects, nothing: the lines were
        combined as they are."""
        if not self.usable:
            return {}, [None] * len(covered)
        again = kind in (DEVICE, LINE) and self._mature(covered)
        nodes, read_again = self._node_effects, set()
        if again:
            self._without(covered, precise=kind != LINE)  # read and kept once
            nodes, read_again = self._effects_read[tuple(covered), kind != LINE]
        shown: dict[str, NightEffect] = {}
        parts_of = []
        for row in covered:
            line = self.lines[row]
            causes = [cause for cause, rows in self.rows.items() if row in rows]
            causes += [(NODE, node) for node in sorted(set(line.nodes), key=line.nodes.index)]
            parts = []
            for cause in causes:
                index = self._node_number[cause[1]] if cause[0] == NODE else -1
                effect = nodes[index] if cause[0] == NODE else self.effect[cause]
                parts.append((cause[1], effect))
                if cause[1] not in shown:
                    shown[cause[1]] = self._effect_shown(cause, effect, index in read_again)
            parts_of.append(parts)
        return shown, [self._line_taken_apart(row, parts, kind)
                       for row, parts in zip(covered, parts_of)]

    def _effect_shown(self, cause: tuple[str, str], effect: np.ndarray, read_again: bool
                      ) -> NightEffect:
        """One effect as ``taken_off`` shows it: its recent nights, its history's spread
        and its z (a node swept from its lines; one read again from its lines outside the
        finding has no z of its own, one of a single line none at all)."""
        values = tuple(effect[self.recent_at].tolist())
        noise = float(self._noise(effect[None, :])[0])
        if cause[0] == NODE and cause not in self.shared:
            return NightEffect(values, noise, None, NOT_SWEPT)
        if read_again:
            return NightEffect(values, noise, None, READ_AGAIN)
        return NightEffect(values, noise, float(self.shared[cause]))

    def _line_taken_apart(self, row: int, parts: list[tuple[str, np.ndarray]], kind: str
                          ) -> TakenOff | None:
        """Row ``row``'s latest recent night: its move, ``parts`` taken off it, what is
        left in the noise of what is left on its history nights, the fabric's load that
        night where it is read alone, and on each of its recent nights what is left in
        that noise and the z that night counts (None: it does not agree with the latest),
        as ``_read`` reads them."""
        seen = np.flatnonzero(self._own[row] & ~np.isnan(self._moves[row]))
        if not len(seen):
            return None
        night = int(seen[-1])
        mine = np.searchsorted(self.recent_at, seen)  # its nights among the run's recent
        position = (int(mine[-1]) + 1, len(self.recent_at))
        own_nights = row in self._in_own_nights and kind == LINE
        if own_nights:
            parts = []
        left = self._moves[row] - sum((effect for _, effect in parts),
                                      np.zeros(self._moves.shape[1]))
        residual, alone, levels, shares, past = self._read_parts(
            left[None, :], np.array([row]), self._far_rate)
        read = alone if kind == LINE else residual
        zs = self._pooled_rows(read, levels, shares, past, each=True)[0]
        noise = float(_noise_of(np.where(self._own[[row]], np.nan, left[None, :]))[0])
        load = float(max(self._load[row, night], 1.0)) if kind == LINE else 1.0
        return TakenOff(float(self._moves[row, night]),
                        tuple((name, float(effect[night])) for name, effect in parts),
                        float(left[night]), noise, load, own_nights, position,
                        tuple(float(read[0, k]) for k in mine), tuple(zs[k] for k in mine))

    def _enclosing(self, covered: list[int]) -> dict[str, float]:
        """The shared effects (a partition's, a leaf's) taken mostly from ``covered``'s own
        lines (``NARROWER_SHARE`` of their rows or more): there the effect is the cause's
        own, not one beside it. A 2-node site's partition is its one pair: its fabric
        effect took the pair's -50 % off its own lines, and their residuals read as noise
        (run_quality, 2 nodes: paged within 2 nights in 0 % of trials). A local cause's
        only (a device, a node, a leaf): an update on every node covers the fabric's lines
        too, and read as the fabric's night, ordinary busy nights paged as updates that
        changed nothing (two of the real sets, 1 of 9 each)."""
        mine = set(covered)
        return {f"{cause[1]}'s effect, taken mostly from these lines": float(
                    self.shared[cause]) for cause, rows in self.rows.items()
                if len(rows & mine) >= NARROWER_SHARE * len(rows)}

    def _nodes_read_from(self, subject: str) -> dict[str, float]:
        """The shared effects of a device's nodes (``subject``: one, or twins) whose night
        was read mostly from the device's lines (``NARROWER_SHARE`` of the node's lines
        judged tonight, or more): there the node's night is the device's, and its
        residuals are what is left once it is taken off. A slow pair on a 16-node site
        whose Himeno lines missed the night: node6's lines that ran were the three of
        node6:mlx5_0, its effect read 6.31, the device's residuals -0.41 against the bar
        4.57, and no finding paged (run_quality, 16 nodes, 10 % of line-nights missing, a
        10-night history: paged within 2 nights in 65 % of trials, seed 1). Twins' nodes'
        effects combined."""
        devices = set(subject.split(", "))
        nodes = []
        for node in sorted({device.split(":")[0] for device in devices}):
            index = self._node_number.get(node)
            if (NODE, node) not in self.shared or index is None:
                continue
            judged = [row for row in self._rows_of[index] if self.lines[row].moves]
            mine = [row for row in judged if devices & set(self.lines[row].devices)]
            if judged and len(mine) >= NARROWER_SHARE * len(judged):
                nodes.append(node)
        if not nodes:
            return {}
        return {f"{', '.join(nodes)}'s shared effect, read tonight mostly from these lines"
                + (f" ({len(nodes)} combined)" if len(nodes) > 1 else ""):
                stouffer(float(self.shared[NODE, node]) for node in nodes)}

    def _design_effect(self, rows: list[int]) -> float:
        """How much more the sum of ``rows``' distances spread over the history nights than
        it would were the lines independent (1 + the lines' mean correlation × their
        number less one; at least 1): a fingerprint change that moved every line of its
        nodes alike leaves no residual, and is judged by its lines' sum in that spread."""
        standard = self.standard[rows]
        sums = np.nansum(standard, axis=0)
        alone = np.nansum(standard * standard, axis=0)
        return max(1.0, float((sums * sums).sum() / max(alone.sum(), 1e-12)))

    def _pooled_rows(self, nights: np.ndarray, levels: np.ndarray | None = None,
                     shares: np.ndarray | None = None, histories: np.ndarray | None = None,
                     deeper: bool = False, each: bool = False) -> list:
        """Each row's recent nights (in noise, worse > 0; NaN: not run), tonight last:
        those that agree with its last night, each through the Student-t (mixed with the
        row's far nights, ``shares``: ``far_shares``) and capped, combined
        (``pooled_zs``). ``levels``: each row's level tonight against its baseline (3 for
        a 3x latency; at least 1): nights beyond ``beyond`` on tonight's side agree within
        ``agree`` noise times that (two nights of a 3x level on a line of CV 40 % are 4
        of its noise apart as often as not): linearly, wider than the line rule's ratio
        (``rules.agrees``), which decides whether the line's nights are a level at all;
        ``histories``: each row's history nights, what its own tail is read from;
        ``each``: every row's nights' z instead (None where a night does not agree), what
        ``verdict --explain`` shows.

        ``deeper`` (a leaf's effect): the window is the deeper night's, tonight's or the
        earlier one's. A leaf's effect is read less the partition's, the median of its
        leaves', and of a fault of one leaf of two the partition takes a share that moves
        with the fabric's night: a congested leaf read +17.0 % then +9.5 % (noise
        1.12 %), its first night no night of tonight's depth, one night 3.39 against
        the bar 4.60 (run_quality, 16 nodes of two leaves: within 2 nights 97 / 93 % at
        seeds 1-2; 100 / 97 % so). Anything else keeps tonight's depth: a node pair's
        quota gone, its shallower night after is no night of the quota's level (the
        live quota nights, back to pass), nor a put latency's spike of the one before
        (the seventh real set: read within the deeper, it paged)."""
        last = np.array([row[~np.isnan(row)][-1] if (~np.isnan(row)).any() else np.nan
                         for row in nights])
        depth = np.abs(last)[:, None]
        if deeper:
            depth = np.maximum(depth, np.abs(nights))
        window = self.policy.agree * np.maximum(1.0, depth / 8)
        agreeing = np.abs(nights - last[:, None]) <= window  # NaN: not
        if levels is not None:
            beyond = (np.sign(nights) == np.sign(last)[:, None]) & (
                np.abs(nights) > self.policy.beyond)
            agreeing |= beyond & (np.abs(nights - last[:, None])
                                  <= window * np.maximum(levels, 1.0)[:, None])
        kept = [tuple(row[keep].tolist()) for row, keep in zip(nights, agreeing)]
        if not each:
            return pooled_zs(kept, self.policy, shares, histories)
        # ``each``: every row's nights' z, None where a night does not agree (--explain)
        zs = night_zs(kept, self.policy, shares, histories)
        return [[next(mine) if keep else None for keep in row] for row, mine
                in zip(agreeing, (iter(z) for z in zs))]


def _levels(effects: np.ndarray) -> np.ndarray:
    """Each row's level tonight (1 + its relative move on the last night, tonight's; an
    effect holds 0, never NaN, on a night none of its lines ran), as a line's: the
    nights beyond on its side agree within that many times ``agree`` of its noise."""
    return 1.0 + np.abs(effects[:, -1])


def _leaves_median(leaves: list[np.ndarray], left: np.ndarray) -> np.ndarray | None:
    """A partition's effect where it has leaves (``leaves``: each leaf's rows among the
    partition's, the lines between its own nodes): the nightly median of the leaves'
    effects (each the biweight of what is ``left`` of its rows); None with fewer than two
    leaves of two rows. Taken over its lines, a leaf that is half the fabric (16 nodes,
    two leaves of 8) gave the partition most of its own -30 %, and its own effect read
    2.2-3.8 against 4.60 (run_quality, 16 nodes: within 2 nights 85 / 55 / 85 % at seeds
    1-3; 85 / 95 / 100 % so). A fabric night moves every leaf, and the median of them
    all. Taken over every line through each leaf (where fewer than two leaves have two
    lines of their own, still so: ``_take_apart``), a leaf whose lines crossed into the
    other on half the nights (``--pair-change 0.5``) moved both leaves' medians, the
    partition took its -30 % whole, and it paged within 2 nights in 90 / 65 / 75 % of
    20 trials at seeds 1-3 (95 / 90 / 90 % so; at the defaults every row as before but
    a node pair's named in one trial of 60 more or less)."""
    leaves = [leaf for leaf in leaves if leaf.sum() >= 2]
    if len(leaves) < 2:
        return None
    return _nanmedians(np.vstack([_biweights(left[leaf].T) for leaf in leaves]).T)


def _nanmedians(matrix: np.ndarray) -> np.ndarray:
    """Each row's median of its values that are not NaN (NaN for a row of none):
    np.nanmedian takes a masked array's slow path on small matrices."""
    ordered = np.sort(matrix, axis=1)  # NaN last
    counts = (~np.isnan(matrix)).sum(axis=1)
    low = np.take_along_axis(ordered, np.maximum((counts - 1) // 2, 0)[:, None], 1)[:, 0]
    high = np.take_along_axis(ordered, np.maximum(counts // 2, 0)[:, None], 1)[:, 0]
    return np.where(counts > 0, (low + high) / 2, np.nan)


def _biweights(matrix: np.ndarray, tuning: float = 4.685, steps: int = 4) -> np.ndarray:
    """Each row's Tukey biweight location (NaN: missing; the median where the row's MAD
    is 0): the lines that a fault moved far (an HCA's third of its node's lines at
    -50 %, a driver's third of all lines at +17 %) weigh nothing, where they would pull
    a median half a noise their way, and every other line of the node after it."""
    centre = _nanmedians(matrix)
    scale = 1.4826 * _nanmedians(np.abs(matrix - centre[:, None]))
    usable = scale > 0
    values = np.where(np.isnan(matrix), 0.0, matrix)
    for _ in range(steps):
        u = (values - centre[:, None]) / np.where(usable, tuning * scale, 1.0)[:, None]
        weights = np.where((np.abs(u) < 1) & ~np.isnan(matrix), (1 - u * u) ** 2, 0.0)
        total = weights.sum(axis=1)
        moved = (weights * values).sum(axis=1) / np.where(total > 0, total, 1.0)
        centre = np.where(usable & (total > 0), moved, centre)
    return centre


def _weighted_biweights(matrix: np.ndarray, noise: np.ndarray, tuning: float = 4.685,
                        steps: int = 4) -> np.ndarray:
    """Each row's biweight location of values of unequal noise (``noise``: a column's
    spread), each value's distance read in its own noise and weighted by its precision,
    from the precision-weighted median: of a node's Himeno (spread 1 %) and one latency
    line (spread 20 %), the Himeno, where their plain median is half the latency's night."""
    values = np.where(np.isnan(matrix), 0.0, matrix)
    precision = np.where(np.isnan(matrix), 0.0, 1.0 / noise[None, :] ** 2)
    order = np.argsort(np.where(np.isnan(matrix), np.inf, matrix), axis=1)
    cumulative = np.cumsum(np.take_along_axis(precision, order, 1), axis=1)
    half = cumulative[:, -1:] / 2
    middle = np.minimum((cumulative < half).sum(axis=1), matrix.shape[1] - 1)
    sorted_values = np.take_along_axis(values, order, 1)
    rows = np.arange(len(order))
    centre = sorted_values[rows, middle]
    tie = np.isclose(cumulative[rows, middle], half[:, 0]) & (
        middle + 1 < (precision > 0).sum(axis=1))  # an even split: between the two
    centre = np.where(tie, (centre + sorted_values[rows, np.minimum(
        middle + 1, matrix.shape[1] - 1)]) / 2, centre)
    for _ in range(steps):
        u = (values - centre[:, None]) / (tuning * noise[None, :])
        weights = np.where(np.abs(u) < 1, (1 - u * u) ** 2, 0.0) * precision
        total = weights.sum(axis=1)
        centre = np.where(total > 0, (weights * values).sum(axis=1) / np.where(
            total > 0, total, 1.0), centre)
    return np.where(precision.sum(axis=1) > 0, centre, np.nan)


def _noise_of(matrix: np.ndarray) -> np.ndarray:
    """Each row's ``_spreads``, at least 0.1 % (a flat history is not noise-free)."""
    return np.maximum(_spreads(matrix), 1e-3)


def _spreads(matrix: np.ndarray) -> np.ndarray:
    """Each row's standard deviation of its values within 3.5 MAD-σ of their median (NaN:
    missing; 0 for a row of fewer than 3 values, which the floor then sets)."""
    centre = _nanmedians(matrix)
    deviations = np.abs(matrix - centre[:, None])
    mad = 1.4826 * _nanmedians(deviations)
    kept = (deviations <= 3.5 * mad[:, None]) | ((mad == 0)[:, None] & ~np.isnan(matrix))
    counts = kept.sum(axis=1)
    means = np.where(kept, matrix, 0.0).sum(axis=1) / np.maximum(counts, 1)
    off = np.where(kept, matrix - means[:, None], 0.0)
    spread = np.sqrt((off * off).sum(axis=1) / np.maximum(counts - 1, 1))
    return np.where(counts >= 3, spread, 0.0)
