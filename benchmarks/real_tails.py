"""How heavy the real nights' tails are, against the tail the findings read them with.

    .venv/bin/python benchmarks/real_tails.py [--data DIR ...] [--smoke]

The findings read each night's distance from a line's baseline (in the baseline's noise,
``perfguard.judge.rules.baseline``) through a Student-t of ``tail_df`` degrees of freedom
of unit variance (``perfguard.judge.findings``), so a night 6 noise out is taken as one
that noise alone gives about 2 times in 1,000. Whether that holds is a property of the
site's lines, which a synthetic benchmark cannot tell (it draws the tails it assumes).
Here every key figure of the recorded real nights (``benchmarks/data/real-nights*``) is
judged night by night as the line rule takes its baseline (the ``window`` nights before,
from ``min_history`` on, the noise at least ``min_noise`` of the centre) and the share of
line-nights beyond k noise is set beside what the findings' t, and a normal, would give,
and beside benchmarks/run_quality.py's synthetic site (300 lines, its correlated noise,
as many nights as the real sets) measured the same way: the model the rules were tuned
on.
Then how often each way of reading a night calls it rarer than 1 in 100, 1,000 and
10,000 on its worse side (the side that pages; figures are read larger-better, a latency
negated): the t alone, and the t mixed with the line's own far nights as the findings now
read it (``findings.far_night_probability`` with the share ``findings.far_shares`` learns
from the same baseline's nights), and that with the line's own tail where its history lay
as far more often (``findings.own_tail``). A reading that is right calls a night rarer than 1 in
1,000 on about 1 line-night in 1,000. Then whether a line's far nights come again: how
often a night is far after none, one, and two or more far nights in its baseline.
Nights are taken as recorded: a fault's nights (none here) and disturbed test cases
(``real-nights-psi``) are not left out as the verdict would leave them, so the shares are
an upper bound on what the judge sees on the sets where that happens. Last, whether a
far better night says anything of a far worse one (``findings.far_shares`` counts the
worse side alone).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import run_quality as rq  # noqa: E402
from real_nights import LATENCY_UNITS, cases, load_nights  # noqa: E402

from perfguard.judge import findings as fd  # noqa: E402
from perfguard.judge import rules as judge  # noqa: E402

SETS = sorted((ROOT / "benchmarks" / "data").glob("real-nights*"))
#: Distances (in noise) whose share of line-nights beyond is compared.
DISTANCES = (3.0, 4.5, 6.0, 9.0)
SMOKE_NIGHTS = 20
#: Nights of the synthetic site: as many as a real set has.
SYNTHETIC_NIGHTS = 60
#: Chances (on the worse side) below which a reading calls a night rare.
RARER_THAN = (1e-2, 1e-3, 1e-4)
#: How far worse one night lies (in noise), and the sites' lines (run_quality's sizes):
#: what a rule that paged on one such night would page.
ONE_NIGHT, SITE_LINES = (9.0, 15.0, 30.0), (3, 48, 300, 4000)
NIGHTS_A_MONTH = 30


def series(folder: Path, nights: int | None = None) -> dict[str, list[float]]:
    """Each key figure of the passed test cases, night by night in the order they ran,
    larger better (latencies, ``real_nights.LATENCY_UNITS``, negated): a night below
    its baseline is worse on every line."""
    found: dict[str, list[float]] = defaultdict(list)
    for night in load_nights(folder)[:nights]:
        for case in cases(night.report):
            if case.get("result") != "pass":
                continue
            for key, entry in (case.get("perfvalues") or {}).items():
                if entry and entry[0] is not None:
                    sign = -1.0 if entry[4] in LATENCY_UNITS else 1.0
                    found[f"{case['name']} {key.rsplit(':', 1)[-1]}"].append(
                        sign * float(entry[0]))
    return found


def judged_nights(values: list[float], rule: judge.Rule = judge.DEFAULT_RULE
                  ) -> list[tuple[float, list[float], float, float]]:
    """Each night from ``min_history`` on as the line rule judges it: (its value, the
    ``window`` nights before it, their centre, their noise at least ``min_noise`` of the
    centre)."""
    nights = range(rule.min_history, len(values))
    windows = [values[max(0, night - rule.window):night] for night in nights]
    return [(values[night], window, centre, max(noise, rule.min_noise * abs(centre)))
            for night, window, (centre, noise) in zip(nights, windows,
                                                      judge.baselines(windows))]


def distances(values: list[float], rule: judge.Rule = judge.DEFAULT_RULE) -> list[float]:
    """Each night's distance from the baseline of the nights before it, in their noise."""
    return [abs(value - centre) / noise
            for value, _, centre, noise in judged_nights(values, rule)]


def chances(values: list[float], policy: fd.Policy = fd.DEFAULT_POLICY) -> np.ndarray:
    """For each night judged as ``distances`` judges it, its chance of lying at least as
    far on the worse side (the side that pages; a better night is not rare: 1) read
    through the t alone, through the t mixed with the far worse nights of the baseline's
    own nights, and that or the share of the baseline's nights as far on its side where
    the history says it is likelier (``findings.own_tail``): rows (t, with far nights,
    and its own tail)."""
    judged = judged_nights(values)
    if not judged:
        return np.zeros((3, 0))
    histories = [tuple((centre - v) / noise for v in window)  # worse > 0 (``series``)
                 for _, window, centre, noise in judged]
    # each row is one window of the same line, not one line of a run: a young window
    # would borrow the far rate of this line's later windows (``young_nights``), which
    # a night's judge cannot know; read as a full history each
    shares = fd.far_shares_of(histories, dataclasses.replace(policy, young_nights=0))
    worse = np.array([(centre - value) / noise for value, _, centre, noise in judged])
    readings = np.vstack([fd.t_chance(worse, policy),
                          fd.far_night_probability(np.abs(worse), shares, policy),
                          fd.night_chance(worse, shares, fd.history_matrix(histories),
                                          policy)])
    return np.where(worse > 0, readings, 1.0)


def calibration(name: str, lines: dict[str, list[float]]) -> list[str]:
    """How often each reading calls a night rarer than each of ``RARER_THAN``."""
    both = np.hstack([chances(values) for values in lines.values()])
    rows = []
    for reading, row in zip(("t alone", "with its far nights", "and its own tail"), both):
        shares = " | ".join(f"{float(np.mean(row < level)):.2%}" for level in RARER_THAN)
        rows.append(f"| {name} | {reading} | {shares} |")
    return rows


def recurrence(name: str, lines: dict[str, list[float]],
               policy: fd.Policy = fd.DEFAULT_POLICY) -> str:
    """How often a night is far (beyond ``far`` noise, either side) after 0, 1 and 2 or
    more far nights (either side) in its baseline's window: whether a line's far nights
    come again, which is what reading each line with its own far nights assumes (on
    which side: ``sides``)."""
    far, seen = [0, 0, 0], [0, 0, 0]
    for values in lines.values():
        for value, window, centre, noise in judged_nights(values):
            before = min(2, sum(abs(v - centre) / noise > policy.far for v in window))
            seen[before] += 1
            far[before] += abs(value - centre) / noise > policy.far
    cells = " | ".join(f"{f / n:.1%} of {n}" if n else "-" for f, n in zip(far, seen))
    return f"| {name} | {cells} |"


def sides(lines: dict[str, list[float]], policy: fd.Policy = fd.DEFAULT_POLICY
          ) -> list[int]:
    """How often a night is far worse (beyond ``far`` noise; ``lines``: larger is better,
    as ``series`` gives them) after a baseline with no far night, with far nights only on
    the better side, and only on the worse side: whether a far better night says anything
    of a worse one (``findings.far_shares`` counts the worse side alone). Counts: (far
    worse, nights) of each."""
    counted = [0] * 6
    for values in lines.values():
        for value, window, centre, noise in judged_nights(values):
            worse = sum((centre - v) / noise > policy.far for v in window)
            better = sum((v - centre) / noise > policy.far for v in window)
            if worse and better:
                continue
            kind = 2 if worse else 1 if better else 0
            counted[2 * kind] += (centre - value) / noise > policy.far
            counted[2 * kind + 1] += 1
    return counted


def nights_a_month(share: float) -> str:
    """How many nights a month a site of each of ``SITE_LINES`` lines has at least one
    line that does what ``share`` of line-nights do (its lines taken as independent)."""
    return " / ".join(f"{NIGHTS_A_MONTH * (1 - (1 - share) ** n):.1f}" for n in SITE_LINES)


def one_night(lines: dict[str, list[float]]) -> list[str]:
    """How often one night lies beyond k noise on the worse side, and how many nights a
    month a site of run_quality's sizes would have such a line (were its lines
    independent): what a rule that paged on one night would page. Findings page a level,
    two nights or more, so a one-line fault (a slow Himeno node) is paged within 2 nights
    no more often than its line ran on both (run_quality's last column)."""
    worse = np.array([(centre - value) / noise for values in lines.values()
                      for value, _, centre, noise in judged_nights(values)])
    rows = []
    for k in ONE_NIGHT:
        share = float(np.mean(worse > k)) if len(worse) else 0.0
        months = nights_a_month(share)
        rows.append(f"| {k:g} | {share:.2%} of {len(worse):,} | {months} |")
    return rows


def two_nights(lines: dict[str, list[float]], policy: fd.Policy = fd.DEFAULT_POLICY
               ) -> list[str]:
    """How often two nights running both lie beyond k noise on the worse side of the
    baseline before them and agree as the line rule's nights do (``rules.agrees``),
    after a baseline with a far worse night (beyond ``far`` noise) and after none, and
    how many nights a month a site of run_quality's sizes would have such a line: what a
    rule would page that read two deep nights as a level whatever the line's history.
    Findings read a line whose history has far worse nights with them
    (``findings.far_night_probability``), so a one-line fault on such a line (a slow
    Himeno node whose history has one far night) waits for a third night."""
    rule = judge.DEFAULT_RULE
    counted = {k: [0, 0, 0, 0] for k in ONE_NIGHT}  # deep after far, nights; after none
    for values in lines.values():
        judged = judged_nights(values)
        for (value, window, centre, noise), (after, *_) in zip(judged, judged[1:]):
            far = any((centre - v) / noise > policy.far for v in window)
            agree = judge.agrees(value, after, centre, noise, rule)
            for k, row in counted.items():
                deep = min(centre - value, centre - after) / noise > k and agree
                row[0 if far else 2] += deep
                row[1 if far else 3] += 1
    rows = []
    for k, (deep_far, far_nights, deep_none, none_nights) in counted.items():
        share = (deep_far + deep_none) / max(far_nights + none_nights, 1)
        months = nights_a_month(share)
        rows.append(f"| {k:g} | {deep_far} of {far_nights:,} | {deep_none} of "
                    f"{none_nights:,} | {share:.2%} | {months} |")
    return rows


def synthetic(nights: int, seed: int = 1) -> dict[str, list[float]]:
    """run_quality's 300-line site with its default (correlated) noise: each line's values
    (its base times the noise, larger better as ``series``), its missing nights left
    out."""
    site, noise = rq.prepared("300", nights, seed, rq.Noise())
    sign = np.array([-1.0 if spec.better == "lower" else 1.0 for spec in site.specs])
    values = (sign * site.base)[:, None] * noise
    return {spec.name: [v for v in row if not np.isnan(v)]
            for spec, row in zip(site.specs, values.tolist())}


def table(name: str, lines: dict[str, list[float]]) -> list[str]:
    found = np.array([d for values in lines.values() for d in distances(values)])
    rows = [f"{name}: {len(found)} line-nights judged"]
    for k in DISTANCES:
        seen = float(np.mean(found > k)) if len(found) else 0.0
        # the share beyond k (either side) the findings' t gives: how they read a night
        model = float(2 * fd.t_chance(k, fd.DEFAULT_POLICY))
        normal = float(2 * stats.norm.sf(k))
        ratio = f"{seen / model:,.0f}x" if model else "-"
        rows.append(f"| {name} | {k:g} | {seen:.2%} | {model:.3%} | {ratio} | "
                    f"{normal:.1e} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, action="append",
                        help="a set of recorded nights (repeatable; default: every set)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"the first {SMOKE_NIGHTS} nights of each set")
    args = parser.parse_args()
    df = fd.DEFAULT_POLICY.tail_df
    print(f"| set | beyond k noise | real share | t({df:g}) the findings read | real / t | "
          f"normal |")
    print("|---|---|---|---|---|---|")
    nights = SMOKE_NIGHTS if args.smoke else None
    named = [(folder.name, series(folder, nights)) for folder in args.data or SETS]
    sets = {name for name, _ in named}
    named.append(("run_quality 300 lines", synthetic(nights or SYNTHETIC_NIGHTS)))
    for name, lines in named:
        head, *rows = table(name, lines)
        print("\n".join(rows))
        print(f"  ({head})", file=sys.stderr)
    print()
    print("| set | reading | rarer than 1 in 100 | 1 in 1,000 | 1 in 10,000 |")
    print("|---|---|---|---|---|")
    for name, lines in named:
        print("\n".join(calibration(name, lines)))
    print()
    print(f"| set | far tonight (beyond {fd.DEFAULT_POLICY.far:g} noise, either side) after "
          "no far night in its baseline | after one | after two or more |")
    print("|---|---|---|---|")
    for name, lines in named:
        print(recurrence(name, lines))
    print()
    print(f"| far worse tonight (beyond {fd.DEFAULT_POLICY.far:g} noise), all real sets | "
          "after no far night in its baseline | after far better ones only | after far "
          "worse ones only |")
    print("|---|---|---|---|")
    totals = np.sum([sides(lines) for name, lines in named if name in sets], axis=0)
    cells = " | ".join(f"{f / n:.1%} of {n:,}" if n else "-"
                       for f, n in zip(totals[::2], totals[1::2]))
    print(f"| every real set | {cells} |")
    print()
    sizes = " / ".join(f"{n:,}" for n in SITE_LINES)
    print("| one night worse than (noise), every real set | line-nights | nights a month "
          f"with one such line at {sizes} lines (independent lines) |")
    print("|---|---|---|")
    real = {f"{name} {key}": values for name, lines in named if name in sets
            for key, values in lines.items()}
    print("\n".join(one_night(real)))
    print()
    print(f"| two nights running worse than (noise), agreeing, every real set | after a far "
          f"worse night in its baseline | after none | of all | nights a month with one "
          f"such line at {sizes} lines |")
    print("|---|---|---|---|---|")
    print("\n".join(two_nights(real)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
