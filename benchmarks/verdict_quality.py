"""How often does a verdict cry wolf, and how soon does it catch a real drop?

    .venv/bin/python benchmarks/verdict_quality.py [--trials 1000] [--seed 1] [--smoke]
    .venv/bin/python benchmarks/verdict_quality.py --seeds 1-7 [--trials 2000]

Series: real repeated measurements (benchmarks/data/repetitions.json: each value one
whole benchmark run, recorded on this project's 2-core host) and synthetic IB-like
noise (normal, CV 1 %), so the figures speak for a real fabric too. For each series,
nightly sequences are resampled from its values: 30 nights of history, then the
evaluated nights, in which we inject nothing, a step of -2, -5 or -10 % (or of k × the
series' CV), or a single -20 % spike. Methods, side by side on the same sequences:

- perfguard: perfguard.judge with site_config/verdict_rules.yaml (the rule `perfguard
  verdict` applies), a regression;
- band 5 %: worse than the history's median by more than 5 % (fixed ±x % band);
- t-test: beyond the history's mean by t·sd at cumulative probability 0.99 (Bencher's
  t-test boundary; the normal quantile stands in for Student's t);
- z = 5: |z| >= 5 and a change of >= 5 % over the lookback window (Conbench's default).

Reported per series and method: false alarms per night, detection of each step within 1
and within 3 nights, alarms within 3 nights of a spike, and the smallest step (in CVs)
detected within 3 nights with >= 95 % probability while false alarms stay under 1 %.

``--seeds A-B``: perfguard's rule on the synthetic CV-1 % series only, once per seed (a
new population and new nights each), then the mean and the worst seed: the targets are
< 1 % false alarms and a 3-CV step caught within 3 nights >= 95 %, at the worst seed.

``--min-change``: what the line rule's ``min_change`` does, on quiet synthetic lines (CV
0.3 % and 0.5 %, where ``k`` σ is under 1 %), seeds 1-3: false alarms a night and a 1 %
and a 3-CV step within 3 nights, with the site's rule and with ``min_change`` 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfguard.judge.rules import (  # noqa: E402
    DEFAULT_RULE,
    REGRESSION,
    Rules,
    judge,
    load_rules,
)
from perfguard.judge.verdict import rules_file  # noqa: E402

DATA = Path(__file__).with_name("data") / "repetitions.json"
HISTORY, NIGHTS = 30, 3
STEPS = (-0.02, -0.05, -0.10)
CV_MULTIPLES = (1, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20)
T_099 = statistics.NormalDist().inv_cdf(0.99)

Method = Callable[[list[float], list[float], str], bool]


def worse(value: float, reference: float, better: str) -> float:
    """Relative loss (> 0 is worse)."""
    loss = (reference - value) / abs(reference)
    return loss if better == "higher" else -loss


RULES = load_rules(rules_file())


def perfguard(history: list[float], recent: list[float], better: str) -> bool:
    """With the site's per-metric rule (latency series: `latency`, the others not)."""
    rule = RULES.for_metric("", "latency" if better == "lower" else "bandwidth")
    return judge(history, recent, better, rule).state == REGRESSION


def band(history: list[float], recent: list[float], better: str) -> bool:
    return worse(recent[-1], statistics.median(history), better) > 0.05


def t_test(history: list[float], recent: list[float], better: str) -> bool:
    mean, sd = statistics.fmean(history), statistics.stdev(history)
    return worse(recent[-1], mean, better) * abs(mean) > T_099 * sd


def z_five(history: list[float], recent: list[float], better: str) -> bool:
    mean, sd = statistics.fmean(history), statistics.stdev(history)
    loss = worse(recent[-1], mean, better)
    return loss * abs(mean) >= 5 * sd and loss >= 0.05


METHODS: dict[str, Method] = {"perfguard": perfguard, "band 5 %": band, "t-test": t_test,
                              "z = 5": z_five}


def sequence(values: list[float], rng: random.Random, better: str,
             change: Callable[[int], float]) -> list[float]:
    """HISTORY + NIGHTS resampled nights; night i of the evaluation is made worse by
    change(i) (a fraction)."""
    nights = [rng.choice(values) for _ in range(HISTORY + NIGHTS)]
    sign = 1 if better == "higher" else -1
    return [v * (1 - sign * (change(i - HISTORY) if i >= HISTORY else 0.0))
            for i, v in enumerate(nights)]


def alarms(method: Method, nights: list[float], better: str) -> list[bool]:
    """Whether the method alarms on each evaluated night (recent = up to that night)."""
    out = []
    for night in range(HISTORY, HISTORY + NIGHTS):
        recent = nights[night - DEFAULT_RULE.confirm + 1:night + 1]
        history = nights[:night - DEFAULT_RULE.confirm + 1]
        out.append(method(history, recent, better))
    return out


def rates(method: Method, values: list[float], better: str, change, trials: int,
          rng: random.Random) -> tuple[float, float, float]:
    """(alarm on night 1, alarm within 3 nights, alarms per night)."""
    first = within = total = 0
    for _ in range(trials):
        hit = alarms(method, sequence(values, rng, better, change), better)
        first += hit[0]
        within += any(hit)
        total += sum(hit)
    return first / trials, within / trials, total / (trials * NIGHTS)


def smallest_step(method: Method, values: list[float], better: str, cv: float,
                  false_alarms: float, trials: int, rng: random.Random) -> str:
    if false_alarms >= 0.01:
        return f"none (false alarms {false_alarms:.1%})"
    for multiple in CV_MULTIPLES:
        step = multiple * cv
        _, within, _ = rates(method, values, better, lambda i, s=step: s, trials, rng)
        if within >= 0.95:
            return f"{multiple:g} CV ({step:.1%})"
    return f"> {CV_MULTIPLES[-1]} CV"


def synthetic(rng: random.Random, cv: float, n: int = 200) -> list[float]:
    return [rng.gauss(1000.0, 1000.0 * cv) for _ in range(n)]


def over_seeds(seeds: range, trials: int) -> None:
    """perfguard on synthetic CV-1 % noise, per seed, then mean and worst."""
    print("| seed | false alarms / night | 3-CV step caught within 3 nights |")
    print("|---|---|---|")
    found = []
    for seed in seeds:
        rng = random.Random(seed)
        values = synthetic(rng, 0.01)
        cv = statistics.stdev(values) / abs(statistics.fmean(values))
        false_alarms = rates(perfguard, values, "higher", lambda i: 0.0, trials, rng)[2]
        caught = rates(perfguard, values, "higher", lambda i, s=3 * cv: s, trials, rng)[1]
        found.append((false_alarms, caught))
        print(f"| {seed} | {false_alarms:.2%} | {caught:.1%} |", flush=True)
    alarms_ = [f for f, _ in found]
    caught_ = [c for _, c in found]
    print(f"| mean | {statistics.fmean(alarms_):.2%} | {statistics.fmean(caught_):.1%} |")
    print(f"| worst | {max(alarms_):.2%} | {min(caught_):.1%} |")


def min_change_effect(trials: int) -> None:
    """``--min-change``: the site's rule against the same with ``min_change`` 0."""
    global RULES
    site = RULES
    rule = site.for_metric("", "bandwidth")
    print("| line CV | min_change | false alarms / night, seeds 1 / 2 / 3 | 1 % step within "
          "3 nights | 3-CV step within 3 nights |\n|---|---|---|---|---|")
    for cv in (0.003, 0.005):
        for value in (rule.min_change, 0.0):
            RULES = Rules((("*", "*", dataclasses.replace(rule, min_change=value)),))
            found = []
            for seed in (1, 2, 3):
                rng = random.Random(seed)
                values = synthetic(rng, cv)
                found.append((rates(perfguard, values, "higher", lambda i: 0.0, trials, rng)[2],
                              rates(perfguard, values, "higher", lambda i: 0.01, trials, rng)[1],
                              rates(perfguard, values, "higher", lambda i, s=3 * cv: s, trials,
                                    rng)[1]))
            print(f"| {cv:.1%} | {value:g} | "
                  + " | ".join(" / ".join(f"{row[k]:.{2 if k == 0 else 0}%}" for row in found)
                               for k in range(3)) + " |", flush=True)
    RULES = site


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true",
                        help="20 trials: that the script runs (the test suite's size)")
    parser.add_argument("--seeds", help="A-B: perfguard on the synthetic series per seed, "
                                        "with the mean and the worst")
    parser.add_argument("--min-change", action="store_true",
                        help="the line rule's min_change against none, on quiet lines")
    args = parser.parse_args()
    if args.smoke:
        args.trials = 20
    if args.min_change:
        min_change_effect(args.trials)
        return 0
    if args.seeds:
        first, _, last = args.seeds.partition("-")
        over_seeds(range(int(first), int(last or first) + 1), args.trials)
        return 0
    rng = random.Random(args.seed)
    recorded = json.loads(DATA.read_text())
    series = {name: (entry["values"], entry["better"]) for name, entry in
              recorded["series"].items()}
    series["synthetic IB-like, CV 1 %"] = (synthetic(rng, 0.01), "higher")
    header = ("| series (n, CV) | method | false alarms / night | " +
              " | ".join(f"{s:+.0%} step: night 1 / 3 nights" for s in STEPS) +
              " | alarms in 3 nights: no change / -20 % spike on night 1 | smallest step "
              "caught |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name, (values, better) in series.items():
        centre = statistics.median(values)
        cv = statistics.stdev(values) / abs(statistics.fmean(values))
        for label, method in METHODS.items():
            _, quiet, false_alarms = rates(method, values, better, lambda i: 0.0, args.trials,
                                           rng)
            steps = [rates(method, values, better, lambda i, s=-s: s, args.trials, rng)
                     for s in STEPS]
            spike = rates(method, values, better, lambda i: 0.2 if i == 0 else 0.0,
                          args.trials, rng)[1]
            smallest = smallest_step(method, values, better, cv, false_alarms,
                                     args.trials, rng)
            cells = " | ".join(f"{a:.0%} / {b:.0%}" for a, b, _ in steps)
            print(f"| {name} (n={len(values)}, median {centre:.4g}, CV {cv:.1%}) | {label} | "
                  f"{false_alarms:.2%} | {cells} | {quiet:.1%} / {spike:.1%} | {smallest} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
