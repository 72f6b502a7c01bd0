"""Is this value a regression? One series' history against its latest nights.

The rule (defaults measured by ``benchmarks/verdict_quality.py``, see docs/verdicts.md):

- **Baseline**: the series' earlier values (same system, check, variant, partition,
  environ, metric and point), newest ``window`` of them. Its centre is the median and its
  noise the standard deviation of the values within ``OUTLIER`` MAD-sigmas of it
  (``baseline``), at least ``min_noise`` of the centre: one bad night in the history
  moves neither.
- **Recent**: the latest ``confirm`` values of the series, the judged run's included. A
  night is *beyond* when it is worse (or better) than the centre by more than ``k`` noise
  and by more than ``min_change`` of the centre.
- **Decision**: ``regression`` (``improvement``) when at least ``needed`` of the recent
  nights are beyond on the same side, the judged one among them, agreeing with it within
  ``agree`` noise (``agrees``: scaled with the level; a shifted level, not a spike next to
  an unlucky night), and the recent nights that agree with it lie on average beyond
  ``level`` noise (two nights just past ``k`` are chance; a level is not), so a single
  spike never alarms. A judged night beyond without that is ``inconclusive`` ("confirm
  on the next run"), as is a history shorter
  than ``min_history`` or noise so large that a change of ``max_detectable`` would go
  unseen, and a level the history went to on ``revisits`` nights and came back from each
  time (``visits``: a state of the line's own, not a new level). Otherwise ``pass``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfguard.states import IMPROVEMENT, INCONCLUSIVE, PASS, REGRESSION

#: MAD → standard deviation for normally distributed noise.
MAD_TO_SIGMA = 1.4826
#: Values further than this many MAD-sigmas from the median are outliers of a history.
OUTLIER = 3.5
#: Below the centre two nights agree within this share of the judged value's distance
#: from the centre where that is wider than ``agree`` noise (``agrees``).
DEEP_SHARE = 0.25


@dataclass(frozen=True)
class Rule:
    window: int = 30
    min_history: int = 8
    k: float = 1.3
    min_change: float = 0.01
    confirm: int = 3
    needed: int = 2
    #: Nights that confirm each other differ by less than this many noise.
    agree: float = 4.0
    #: The recent nights that agree with the judged one lie on average beyond this many
    #: noise (k marks a night; level confirms a shift).
    level: float = 1.8
    #: Noise above which a 25 % change would not be told from noise: such a noisy line is
    #: judged only for shifts of ``noisy_level`` noise or more (a 3x latency on a 40 %
    #: line), "noise too large" for anything smaller.
    max_detectable: float = 0.25
    noisy_level: float = 3.0
    #: Floor of the noise, relative to the centre (a flat history is not noise-free).
    min_noise: float = 0.001
    #: A level the line's history reached on this many nights, coming back each time, is
    #: a state of the line's own (``visits``), not a new change: judged inconclusive
    #: (0: never).
    revisits: int = 3
    #: How far (in noise) a history night must lie at least to count as such a visit
    #: (and between half and twice the judged level: ``visit_range``).
    revisit_floor: float = 3.0
    #: Baseline from the runs since the judged nodes' environment last changed only.
    same_fingerprint: bool = False


DEFAULT_RULE = Rule()
#: What a site sets of the rule, per check and metric (verdict_rules.yaml ``rules:``, its
#: schema says the same); the rest of Rule is the model, fixed here with the measurement
#: behind each value.
SETTINGS = ("window", "min_history", "k", "min_change", "confirm", "needed", "level",
            "same_fingerprint")


@dataclass(frozen=True)
class Rules:
    """Per-metric overrides of the rule (site_config/verdict_rules.yaml): the first
    entry whose ``check`` and ``metric`` patterns match applies."""

    entries: tuple[tuple[str, str, Rule], ...] = ()
    #: Read when each value was measured also where no rule needs it (accepted levels).
    times: bool = False

    def runs_read(self) -> int:
        """How many recent runs the history queries read: every rule's window and recent
        nights, twice over (runs of a system need not all have every check)."""
        return 2 * self.values_judged()

    def values_judged(self) -> int:
        """The most values of a series any rule judges by: its window and recent nights."""
        rules = [DEFAULT_RULE, *(rule for _, _, rule in self.entries)]
        return max(rule.window + rule.confirm for rule in rules)

    def needs_times(self) -> bool:
        """Whether a rule judges by fingerprint epoch (needs when each value was measured)."""
        return self.times or any(rule.same_fingerprint for _, _, rule in self.entries)

    def for_metric(self, check: str, metric: str) -> Rule:
        return next((rule for check_glob, metric_glob, rule in self.entries
                     if fnmatch.fnmatchcase(check, check_glob)
                     and fnmatch.fnmatchcase(metric, metric_glob)), DEFAULT_RULE)


#: No overrides: the default rule for every metric.
DEFAULT_RULES = Rules()


def read_rules_file(path: Path) -> dict:
    """The verdict rules file checked against its schema ({} where there is none): read
    once per verdict, its parts handed to what uses them (``load_rules``, the findings'
    policy, the run's measured floor)."""
    from perfguard.yamlfile import load_yaml

    return load_yaml(path, "verdict rules", schema="verdict_rules") if path.exists() else {}


def load_rules(path: Path, data: dict | None = None) -> Rules:
    """The overrides in ``path`` (already read: ``data``); a missing file means the
    defaults everywhere."""
    from perfguard.errors import UsageError

    data = read_rules_file(path) if data is None else data
    entries = []
    for index, entry in enumerate(data.get("rules") or []):
        values = {k: v for k, v in entry.items() if k not in ("check", "metric")}
        rule = dataclasses.replace(DEFAULT_RULE, **values)
        if rule.needed > rule.confirm:
            raise UsageError(f"{path}: rules[{index}]: needed ({rule.needed}) must not be "
                             f"more than confirm ({rule.confirm})")
        entries.append((str(entry.get("check", "*")), str(entry.get("metric", "*")), rule))
    return Rules(tuple(entries))


@dataclass(frozen=True)
class Judgement:
    state: str
    centre: float | None
    noise: float | None
    change: float | None
    beyond: tuple[int, ...]
    reason: str
    rule: Rule = DEFAULT_RULE

    @property
    def cv(self) -> float | None:
        return None if not self.centre or self.noise is None else self.noise / abs(self.centre)

    @property
    def band(self) -> tuple[float, float] | None:
        """The values a run may take and still be within noise (``side`` is 0 inside)."""
        return self._band(self.rule.k)

    @property
    def shift_band(self) -> tuple[float, float] | None:
        """The values a level may take and still be no shift (``level`` noise): what a
        single measurement, with no later nights to confirm it, is held to (the sweep)."""
        return self._band(self.rule.level)

    def _band(self, noises: float) -> tuple[float, float] | None:
        if self.centre is None or self.noise is None:
            return None
        half = max(noises * self.noise, self.rule.min_change * abs(self.centre))
        return self.centre - half, self.centre + half


def baseline(history: list[float]) -> tuple[float, float]:
    """(median, noise) of a history. The noise is the standard deviation of the values
    within ``OUTLIER`` MAD-sigmas of the median: outliers (a bad night, a spike) are left
    out as the MAD would, but the estimate is far less noisy than the MAD itself, which
    at 30 values misjudges the noise by ±20 % and so raises false alarms."""
    [found] = baselines([history])
    if found is None:
        raise ValueError("the baseline of an empty history")
    return found


def baselines(histories: list[list[float]]) -> list[tuple[float, float] | None]:
    """``baseline`` of each history (None for an empty one), those of one length as one
    matrix: a 100,000-line verdict spent 1 s taking them one at a time in Python, 0.1 s
    so. One history is a matrix of one row, so a baseline is the same floats however it
    was taken."""
    found: list[tuple[float, float] | None] = [None] * len(histories)
    by_length: dict[int, list[int]] = {}
    for index, history in enumerate(histories):
        if len(history):
            by_length.setdefault(len(history), []).append(index)
    for indices in by_length.values():
        matrix = np.array([histories[i] for i in indices], dtype=np.float64)
        centres = _medians(matrix)
        deviations = np.abs(matrix - centres[:, None])
        mad_sigmas = MAD_TO_SIGMA * _medians(deviations)
        kept = deviations <= (OUTLIER * mad_sigmas)[:, None]
        counts = np.add.reduce(kept, axis=1)
        noises = np.where(counts >= 3, _stdevs(matrix, kept, counts), mad_sigmas)
        for index, centre, noise in zip(indices, centres.tolist(), noises.tolist()):
            found[index] = (centre, noise)
    return found


def _medians(matrix: np.ndarray, axis: int = 1) -> np.ndarray:
    """The medians along ``axis`` (each row's): the middle value, or the two middle ones'
    sum halved (as statistics.median and np.median; np.median's dispatch costs a single
    history 15 µs, and its partition of a verdict's 250,000 curve sizes' 30 nights 94 ms
    where a sort takes 38)."""
    ordered = np.sort(matrix, axis=axis)
    middle = matrix.shape[axis] // 2
    if matrix.shape[axis] % 2:
        return np.take(ordered, middle, axis=axis)
    return (np.take(ordered, middle - 1, axis=axis) + np.take(ordered, middle, axis=axis)) / 2


def _stdevs(matrix: np.ndarray, kept: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each row's sample standard deviation of its ``kept`` values (``counts`` of them, at
    least one: the value nearest the median; that of a single one is 0); two passes, as
    statistics.stdev, whose exact fractions are 40 times slower."""
    means = np.add.reduce(np.where(kept, matrix, 0.0), axis=1) / counts
    off = np.where(kept, matrix - means[:, None], 0.0)
    return np.sqrt(np.add.reduce(off * off, axis=1) / np.maximum(counts - 1, 1))


def side(value: float, centre: float, noise: float, better: str, rule: Rule) -> int:
    """-1 worse, +1 better, 0 within noise (beyond both k·noise and min_change)."""
    change = (value - centre) / abs(centre) if centre else 0.0
    if abs(value - centre) <= rule.k * noise or abs(change) <= rule.min_change:
        return 0
    gain = 1 if value > centre else -1
    return gain if better == "higher" else -gain


#: How a line without a baseline begins its reason, wherever it is shown.
NOT_YET = "not yet judged"


def not_yet(history: int, rule: Rule) -> str:
    """"not yet judged: history 2 of 8 runs" — the runs before the last ``confirm`` ones
    (this run included), which are judged against that history once it is long enough."""
    return (f"{NOT_YET}: history {history} of {rule.min_history} runs (the last "
            f"{rule.confirm} runs, this one included, are judged against it)")


def judge(history: list[float], recent: list[float], better: str,
          rule: Rule = DEFAULT_RULE, base: tuple[float, float] | None = None,
          against: str | None = None) -> Judgement:
    """``history``: earlier values, oldest first, before the recent nights; ``recent``: the
    latest nights, oldest first, the judged value last. ``base``: ``baseline`` of the
    history's newest ``window`` values where it was computed already (``baselines``);
    ``against``: what the baseline is, where it is not the history's median."""
    value = recent[-1]
    history = history[-rule.window:]
    if len(history) < rule.min_history:
        return Judgement(INCONCLUSIVE, None, None, None, (), not_yet(len(history), rule), rule)
    history = settled(history, rule)
    centre, noise = base or baseline(history)
    noise = max(noise, rule.min_noise * abs(centre))
    change = (value - centre) / abs(centre) if centre else None
    noisy = is_noisy(centre, noise, rule)
    if noisy:
        rule = dataclasses.replace(rule, level=max(rule.level, rule.noisy_level))
    recent = recent[-rule.confirm:]
    sides = [side(v, centre, noise, better, rule) for v in recent]
    mine = sides[-1]
    beyond = tuple(i for i, (v, side) in enumerate(zip(recent, sides))
                   if side == mine and mine != 0 and agrees(v, value, centre, noise, rule))
    if mine == 0:
        return Judgement(PASS, centre, noise, change, (), "within noise", rule)
    what = "worse" if mine < 0 else "better"
    against = against or f"the median of {len(history)} runs"
    size = f"{change:+.1%} vs {against}" if change is not None else ""
    level = _level(recent, value, centre, noise, better, rule)
    if len(beyond) >= rule.needed and level * mine > rule.level:
        visited = visits(history, recent[:-1], centre, noise, abs(level), mine, better, rule)
        if rule.revisits and visited >= rule.revisits:
            low, high = visit_range(abs(level), rule)
            return Judgement(INCONCLUSIVE, centre, noise, change, beyond,
                             f"{size}; {len(beyond)} of the last {len(sides)} runs {what}, "
                             f"{abs(level):.1f}σ on average, but {visited} of the "
                             f"{len(history)} runs before were at that level ({low:.1f}–"
                             f"{high:.1f}σ) and came back: a state this line returns to, "
                             f"not a new level", rule)
        state = REGRESSION if mine < 0 else IMPROVEMENT
        return Judgement(state, centre, noise, change, beyond,
                         f"{size}; {len(beyond)} of the last {len(sides)} runs {what} by "
                         f"more than {rule.k:g}σ, {abs(level):.1f}σ on average", rule)
    shift = abs(value - centre) / noise
    if len(beyond) < rule.needed and (not noisy or shift > rule.level):
        return Judgement(INCONCLUSIVE, centre, noise, change, beyond,
                         f"{size}; one night beyond, {shift:.1f}σ {what}"
                         f"{_noisy_note(noise, centre, rule) if noisy else ''}: confirm on "
                         f"the next", rule)
    if noisy:
        return Judgement(INCONCLUSIVE, centre, noise, change, beyond,
                         f"{size}; noise ±{noise / abs(centre):.1%} too large to tell this "
                         f"change (a shift of {rule.level:g}σ on its recent runs is judged)",
                         rule)
    return Judgement(INCONCLUSIVE, centre, noise, change, beyond,
                     f"{size}; {len(beyond)} of the last {len(sides)} runs {what} by "
                     f"more than {rule.k:g}σ, but only {abs(level):.1f}σ on average "
                     f"({rule.level:g}σ make a shift): confirm on the next", rule)


def visits(history: list[float], before: list[float], centre: float, noise: float,
           level: float, mine: int, better: str, rule: Rule) -> int:
    """How many ``history`` nights lay at the judged ``level`` (in noise, on side
    ``mine``: between half and twice as far out, and at least ``revisit_floor``) and were
    followed by a night within ``k`` noise before the judged one (``before``: the recent
    nights ahead of it). The baseline's noise leaves out far values as outliers; where a
    line keeps going to a second state and back (shared-memory bandwidth at −15 to −22 %
    on 3 of its first 11 quiet nights) those are no outliers, and judged against the
    trimmed noise each return to that state read as a new level and paged
    (docs/verdicts.md, "A state the line returns to"). A spike far beyond the level is
    no visit of it (three −12 % spikes on a 1 % line would otherwise hide a −4.5 %
    fault), nor is a level the line never left: a fault's nights have no return after
    them, and a key figure's regressed nights are not in its history at all
    (``verdict._without``). A level held ``confirm`` nights in a row or more is one
    visit: a history that held one for its first 3 nights (a host's load, then gone)
    changed level once, and read as 3 visits it kept a -50 % node pair inconclusive
    (issue 67); shorter stays count night by night (the quiet host's bibw: nights 7-8
    and 10)."""
    sign = 1 if better == "higher" else -1
    low, high = visit_range(level, rule)
    at_level, came_back = [], False
    for index, value in reversed(list(enumerate([*history, *before]))):
        distance = sign * mine * (value - centre) / noise
        at_level.append(index < len(history) and low <= distance <= high and came_back)
        came_back = came_back or abs(distance) <= rule.k
    runs = [len(list(nights)) for there, nights in itertools.groupby(at_level) if there]
    return sum(1 if nights >= rule.confirm else nights for nights in runs)


def visit_range(level: float, rule: Rule) -> tuple[float, float]:
    """How far out (in noise) a history night must lie to count as a visit of ``level``:
    between half and twice the level, and at least ``revisit_floor``."""
    return max(rule.revisit_floor, level / 2), max(rule.revisit_floor, 2 * level)


def _noisy_note(noise: float, centre: float, rule: Rule) -> str:
    """Why a night beyond on a noisy line is still worth confirming: it is past the shift
    such a line is judged for."""
    return (f" (past the {rule.level:g}σ a line of noise ±{noise / abs(centre):.1%} is "
            f"judged by)")


def is_noisy(centre: float, noise: float, rule: Rule) -> bool:
    """Whether a change of ``max_detectable`` (25 %) would go unseen on a line of this
    baseline: such a line is judged only for shifts of ``noisy_level`` noise."""
    return bool(centre) and max(rule.k, rule.level) * noise / abs(centre) > rule.max_detectable


def blind_nights(series: list[float] | tuple[float, ...], rule: Rule = DEFAULT_RULE) -> int:
    """How many nights in a row, up to the last value of ``series``, the line has been
    blind: its baseline that night so noisy (``is_noisy``) that a change of
    ``max_detectable`` could not be told from noise. 0 for a line that sees tonight; the
    count stops where the history was too short to say."""
    nights = 0
    for end in range(len(series), 0, -1):
        history = judged_history(series[:end], rule)
        if len(history) < rule.min_history:
            break
        centre, noise = baseline(list(history))
        if not is_noisy(centre, max(noise, rule.min_noise * abs(centre)), rule):
            break
        nights += 1
    return nights


def blind_text(nights: int, cv: float, rule: Rule) -> str:
    """"blind for 12 nights: noise ±67.0 % hides any change under 3σ (201 %)": what a
    blind line says wherever its verdict is shown."""
    return (f"blind for {nights} night{'s' if nights != 1 else ''}: noise ±{cv:.1%} hides any "
            f"change under {rule.noisy_level:g}σ ({rule.noisy_level * cv:.0%})")


#: Runs of an accepted level, before its recent nights, that are enough to judge it
#: against itself (until then the runs that were accepted are its reference).
OWN_LEVEL = 3


def judge_new_level(before: list[float], since: list[float], accepted: int, better: str,
                    rule: Rule = DEFAULT_RULE) -> Judgement:
    """The last value of ``since`` (a line's runs from the first of an accepted level on,
    oldest first, of which the first ``accepted`` are those accepted) judged against that
    level, so that a second fault after an accept pages: against the level's own runs
    before the recent nights once there are OWN_LEVEL of them, meanwhile against the
    median of the accepted runs. Until the level has a full history (``min_history``) its
    noise is at least the line's relative noise before the change (``before``): two or
    three values are no estimate of it, and noise grows with the level."""
    history, recent = split(since, rule)
    if len(history) >= OWN_LEVEL:
        reference = history[-rule.window:]
        against = f"the median of {len(reference)} runs of the accepted level"
    else:
        reference, against = list(since[:accepted]), "the accepted level"
    earlier = before[-rule.window:]
    if not reference or (len(earlier) < OWN_LEVEL and len(reference) < OWN_LEVEL):
        return Judgement(INCONCLUSIVE, None, None, None, (), not_yet(len(history), rule), rule)
    centre, noise = baseline(reference)
    if len(history) < rule.min_history and len(earlier) >= OWN_LEVEL:
        old_centre, old_noise = baseline(earlier)
        if old_centre:
            noise = max(noise, old_noise / abs(old_centre) * abs(centre))
    needed = OWN_LEVEL if len(history) >= OWN_LEVEL else 0  # what --explain says it needs
    return judge(reference, recent, better, dataclasses.replace(rule, min_history=needed),
                 (centre, noise), against)


def agrees(night: float, value: float, centre: float, noise: float, rule: Rule) -> bool:
    """Whether ``night`` confirms the judged ``value``: within ``agree`` noise of it, the
    noise scaled up with the level the value reached. Run-to-run noise grows with the
    level (a 10x latency under a CPU quota jitters 10x as much in microseconds), so two
    nights of one 10x level would otherwise never agree in the baseline's noise. Noise
    in proportion to the level is a ratio: above a positive centre the nights agree
    within ``agree`` of the baseline's relative noise in logs. Scaled linearly instead
    (the same to first order), a line of CV 25 % or more had every night beyond on its
    side agree with any spike: a put latency 15x its median "confirmed" by a 2x night
    two nights before paged (the sixth real set). Below the centre the window is the
    baseline's noise, or a quarter of the judged value's distance from the centre where
    that is wider (``DEEP_SHARE``): a fault's nights jitter with its depth, and a Himeno
    35.1 % then 28.5 % slower (noise 1.7 %, 4.0 noise apart) waited for a third night
    (run_quality's slow Himeno line at 16 nodes and 300 lines, seeds 1-3: 5 of 360
    trials; no row paged fewer). Half its distance (the findings' evidence window,
    ``findings.NightEffects._pooled_rows``) took a real night 33 % worse into a -50 %
    HCA's level on the eighth real set; its curve then read as a state the line returns
    to, and the HCA paged a night later."""
    if value > centre > 0:
        return night > 0 and abs(math.log(night / value)) <= rule.agree * noise / centre
    scale = max(1.0, abs(value / centre)) if centre else 1.0
    window = max(rule.agree * noise * scale, DEEP_SHARE * abs(value - centre))
    return abs(night - value) <= window


def _level(recent: list[float], value: float, centre: float, noise: float, better: str,
           rule: Rule) -> float:
    """Where the recent nights that agree with the judged value lie on average, in noise
    from the centre, signed as ``side`` signs (< 0 worse); a spike that does not agree is
    left out, as it is of the nights beyond."""
    agreeing = [v for v in recent if agrees(v, value, centre, noise, rule)]
    shift = (statistics.fmean(agreeing) - centre) / noise
    return shift if better == "higher" else -shift


def evidence(recent: list[float], j: Judgement, better: str) -> tuple[int, tuple[float, ...]]:
    """(side of the judged run, the worse-signed noise from the centre of each recent run
    that agrees with it) for findings; (0, ()) without a baseline. The agreement scaled
    with the level (``agrees``) is for nights beyond on the judged run's side: a night at
    the baseline is no night of a 3x level on a line of CV 40 % (within 12 of its noise
    of it), and counted as one it diluted the level's evidence by a third."""
    if j.centre is None or not j.noise:
        return 0, ()
    rule, value = j.rule, recent[-1]
    sign = 1 if better == "lower" else -1
    mine = side(value, j.centre, j.noise, better, rule)
    agreeing = [v for v in recent[-rule.confirm:] if abs(v - value) <= rule.agree * j.noise
                or (side(v, j.centre, j.noise, better, rule) == mine
                    and agrees(v, value, j.centre, j.noise, rule))]
    return mine, tuple(sign * (v - j.centre) / j.noise for v in (agreeing if mine else [value]))


def history_distances(history: list[float], j: Judgement, better: str
                      ) -> tuple[float, ...]:
    """Each of a baseline's nights in its noise from its centre, worse > 0 as
    ``evidence``'s nights (() without a baseline): how often the line lay that far on
    that side is what its own tail is (``findings.own_tail``)."""
    if j.centre is None or not j.noise:
        return ()
    sign = 1 if better == "lower" else -1
    return tuple(sign * (v - j.centre) / j.noise for v in history)


def split(series: list[float] | tuple[float, ...],
          rule: Rule = DEFAULT_RULE) -> tuple[list[float], list[float]]:
    """A series up to the judged run (oldest first) → (earlier runs, the recent runs)."""
    recent = list(series[-rule.confirm:])
    return list(series[:len(series) - len(recent)]), recent


def movement(series: list[float] | tuple[float, ...], rule: Rule = DEFAULT_RULE) -> int:
    """+1 (-1) where ``judge_series`` could find the last value of ``series`` moved up
    (down), else 0: only when its history is long enough and the value is off the
    history's median by more than ``min_change`` (``side`` is 0 otherwise), whatever
    the noise. Which way, so that sizes of a curve that moved apart are not taken for
    one band."""
    return int(movements(np.asarray(series, dtype=np.float64).reshape(-1, 1), rule)[0])


def movements(nights: np.ndarray, rule: Rule = DEFAULT_RULE) -> np.ndarray:
    """``movement`` of every column of ``nights`` (nights × series, oldest night first; or
    a stack of such, curves × nights × series) at once: a verdict's curves screened in one
    median per size, the same median as ``baseline``'s."""
    count = nights.shape[-2]
    recent = min(rule.confirm, count)
    earlier = nights[..., max(0, count - recent - rule.window):count - recent, :]
    if not recent or earlier.shape[-2] < rule.min_history:
        return np.zeros(nights.shape[:-2] + nights.shape[-1:], dtype=np.int64)
    centre, last = _medians(earlier, axis=-2), nights[..., -1, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        moved = (centre != 0) & (np.abs(last - centre) / np.abs(centre) > rule.min_change)
    return np.where(moved, np.sign(last - centre), 0).astype(np.int64)


def judge_series(series: list[float] | tuple[float, ...], better: str,
                 rule: Rule = DEFAULT_RULE, base: tuple[float, float] | None = None
                 ) -> Judgement:
    """The last value of ``series`` judged against the values before it (``base``: its
    ``judged_history``'s baseline, where computed already)."""
    return judge(*split(series, rule), better, rule, base)


def judged_history(series: list[float] | tuple[float, ...], rule: Rule = DEFAULT_RULE
                   ) -> list[float]:
    """The values of ``series`` its baseline is taken from: the newest ``window`` before
    the recent nights (``split``'s earlier runs, cut to the window), less a level it
    left before it was first judged (``settled``)."""
    end = len(series) - min(rule.confirm, len(series))
    return settled(list(series[max(0, end - rule.window):end]), rule)


#: Nights in a row a history held beyond its noise on one side make a level it moved to
#: (a change of load, a fix), not nights of its tail: the line rule's ``confirm``. A young
#: line's first nights that may be a level it left are at least this many, at most half
#: its ``min_history`` (the newer level then held the median of the first night it was
#: judged on, so no night ever compared it with the old one, and nobody was told); the
#: findings take such nights out of a line's far nights (``findings.without_held_levels``).
LEVEL_NIGHTS = 3


def settled(history: list[float], rule: Rule = DEFAULT_RULE) -> list[float]:
    """A young history (fewer than ``window`` values, all it has) without the level it
    left before it was first judged: its first 3 or 4 nights, where each lies beyond the
    line rule's ``k`` noises of the newer nights' baseline on one side and their median
    beyond ``OUTLIER`` noises (a level, as the line rule reads one), and none of the
    newer nights lies beyond ``OUTLIER`` there (a fifth night at the old level: it left
    later, and was judged). Measured live (real OMB 7.4, 4 embedded nodes,
    benchmarks/results/verdicts.md): osu_bw at 3,900-4,400 MB/s for 3 nights, then
    1,480-2,390 under a CPU quota on every node, made one noise of CV 53 % of the two
    levels (baseline 2,235 ± 1,193), and a node pair's -50 % fault on top was within it
    for three nights, every line blind; the newer 6 nights alone are 1,824 ± 363, and the
    fault 2.1 and 1.9 σ below. osu_bibw's old level (3,138, 2,522, 3,669 against 1,938 ±
    201) has a night only 2.9 σ out: with every old night required beyond ``OUTLIER`` it
    kept its whole history (± 479), and its 4.7 σ fault read 2 σ. A mature line's
    history is left whole: a level it left since was judged when it happened, and stays
    a regression until it is accepted (`perfguard accept`)."""
    if len(history) >= rule.window:
        return history
    for start in range(rule.min_history // 2, LEVEL_NIGHTS - 1, -1):
        newer = history[start:]
        if len(newer) < rule.min_history - LEVEL_NIGHTS:
            continue
        centre, noise = baseline(newer)
        if noise <= 0:
            continue
        older = [(v - centre) / noise for v in history[:start]]
        for side in (1.0, -1.0):
            if (all(side * v > rule.k for v in older)
                    and side * statistics.median(older) > OUTLIER
                    and all(side * (v - centre) <= OUTLIER * noise for v in newer)):
                return newer  # no newer night back at the older level: it was left
    return history


def judge_all(series: list[list[float] | tuple[float, ...]], better: list[str],
              rules: list[Rule]) -> list[Judgement]:
    """``judge_series`` of each series (with its direction and rule), the baselines taken
    at once (``baselines``)."""
    bases = baselines([judged_history(s, rule) for s, rule in zip(series, rules)])
    return [judge_series(s, b, rule, base)
            for s, b, rule, base in zip(series, better, rules, bases)]
