"""Do the verdict's fast paths judge as the rule does? Random sweeps, counted.

    .venv/bin/python benchmarks/fast_paths.py [--seed 11] [--smoke]

The verdict takes shortcuts that must change no judgement (perfguard.judge.rules and
perfguard.judge.curves): ``movement`` rules a series out before it is judged, the noise
is taken in floats (``_stdevs``) where statistics.stdev is exact, the baselines of many
series are taken at once (``judge_all``), a curve is screened on its values alone
(``could_band``) and curves of one point list are screened as one stack
(``_could_band``). Each sweep draws random series or curves (CV 0.1-5 %, steps, spikes,
ties, short histories) and fails on the first one where a shortcut and the rule differ.

Sizes: 20,000 series, 5,000 curves and 3,000 stacked curves (about 25 s on an idle core,
two minutes on a busy one: why they left the unit suite, issue 49); ``--smoke`` 2,000,
500 and 300 (tests/system/test_benchmarks.py). tests/unit/test_rules.py runs each sweep
at a few hundred draws, so a broken shortcut still fails the unit suite.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfguard.judge import curves, history, rules  # noqa: E402


def fast_paths(count: int, seed: int = 11) -> dict[str, int]:
    """``count`` random series: one ``movement`` rules out is never a regression or an
    improvement, the float noise agrees with statistics.stdev, and ``judge_all`` gives
    the same judgements as one by one. Returns what was drawn (moved: regressions and
    improvements the sweep saw)."""
    rng = random.Random(seed)
    every, directions, one_by_one = [], [], []
    for _ in range(count):
        length = rng.randint(1, 40)
        cv = rng.choice([0.001, 0.01, 0.02, 0.05])
        series = [100 * rng.gauss(1, cv) for _ in range(length)]
        if rng.random() < 0.5:
            step = rng.choice([0.9, 0.97, 0.99, 1.01, 1.03, 1.1])
            moved = rng.randint(1, 3)
            series[-moved:] = [v * step for v in series[-moved:]]
        if rng.random() < 0.2:  # a bad night in the history: left out of the noise
            series[rng.randrange(length)] *= rng.choice([0.5, 1.5])
        if rng.random() < 0.1:  # coarse figures: ties, a MAD of 0
            series = [round(v) for v in series]
        better = rng.choice(["higher", "lower"])
        judged = rules.judge_series(series, better)
        every.append(series), directions.append(better), one_by_one.append(judged)
        if rules.movement(series) == 0:
            assert judged.state not in (rules.REGRESSION, rules.IMPROVEMENT), series
        kept = rules.split(series)[0][-rules.DEFAULT_RULE.window:]
        if len(kept) >= 3:
            noise = rules._stdevs(np.array([kept]), np.ones((1, len(kept)), dtype=bool),
                                  np.array([len(kept)]))[0]
            exact = statistics.stdev(kept)
            assert abs(noise - exact) <= 1e-9 * exact + 1e-12, kept
    assert rules.judge_all(every, directions, [rules.DEFAULT_RULE] * len(every)) == one_by_one
    moved = sum(j.state in (rules.REGRESSION, rules.IMPROVEMENT) for j in one_by_one)
    return {"drawn": count, "moved": moved}


def screen(count: int, seed: int = 5) -> dict[str, int]:
    """``count`` random curves (2-23 sizes, a band of sizes stepped): a curve
    ``could_band`` drops is never a regression or an improvement."""
    rng = random.Random(seed)
    kept_moved = 0
    for _ in range(count):
        nights, sizes = rng.randint(8, 40), rng.randint(1, 23)
        cv = rng.choice([0.001, 0.01, 0.02, 0.05])
        values = {1 << size: [100 * rng.gauss(1, cv) for _ in range(nights)]
                  for size in range(sizes)}
        stepped = sorted(values)[rng.randrange(sizes):][:rng.randint(1, 4)]
        step, moved = rng.choice([0.9, 0.97, 0.99, 1.01, 1.03, 1.1]), rng.randint(1, 3)
        for size in stepped:
            values[size][-moved:] = [v * step for v in values[size][-moved:]]
        better = rng.choice(["higher", "lower"])
        curve = curves.Curve("C", {}, "p", "e", "m", "u", better,
                             {s: rules.judge_series(v, better) for s, v in values.items()})
        moved = curve.state in (rules.REGRESSION, rules.IMPROVEMENT)
        assert curves.could_band(values, rules.DEFAULT_RULE) or not moved, values
        kept_moved += moved
    return {"drawn": count, "moved": kept_moved}


def stacked(count: int, seed: int = 11) -> dict[str, int]:
    """``count`` random curves of a few point lists (point ids in no size order), some
    stepped at a band of sizes: the stack screen (``_could_band``) keeps exactly the
    curves ``could_band`` keeps one at a time."""
    rng = np.random.default_rng(seed)
    sizes = {point: 1 << int(size) for point, size in zip(range(1, 9), rng.permutation(8))}
    lists = [(1, 2, 3, 4, 5, 6, 7, 8), (8, 3, 5), (4,), (2, 7, 1, 6)]
    found = []
    for index in range(count):
        points = lists[index % len(lists)]
        nights = 100 * rng.normal(1, 0.01, (int(rng.choice([20, 33])), len(points)))
        nights[-2:, rng.random(len(points)) < 0.5] *= rng.choice([0.9, 0.98, 1.0, 1.05])
        found.append((history.CurveNights("v", "C", "bw", 1, True, nights, points, 1),
                      rules.DEFAULT_RULE))
    kept = {id(curve) for curve, _ in curves._could_band(found, sizes)}
    one_by_one = {id(curve) for curve, rule in found if curves.could_band(
        {sizes[point]: curve.nights[:, column].tolist()
         for column, point in enumerate(curve.point_ids)}, rule)}
    assert kept == one_by_one, sorted(kept ^ one_by_one)[:5]
    return {"drawn": count, "moved": len(kept)}


SWEEPS = {"movement, noise, judge_all vs the rule (series)": (fast_paths, 20_000),
          "could_band vs the curve's judgement (curves)": (screen, 5_000),
          "stacked screen vs one by one (curves)": (stacked, 3_000)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=None,
                        help="one seed for every sweep (default: each sweep's own)")
    parser.add_argument("--smoke", action="store_true",
                        help="a tenth of each sweep (the suite runs it)")
    args = parser.parse_args()
    print("| sweep | drawn | moved (or kept) | agree | time |\n|---|---|---|---|---|")
    for name, (sweep, count) in SWEEPS.items():
        started = time.monotonic()
        seeded = {} if args.seed is None else {"seed": args.seed}
        found = sweep(count // 10 if args.smoke else count, **seeded)
        print(f"| {name} | {found['drawn']:,} | {found['moved']:,} | yes | "
              f"{time.monotonic() - started:.1f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
