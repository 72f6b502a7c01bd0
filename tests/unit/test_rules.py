"""The line rule and its fast paths, pure: two of the last three nights decide, rules files
are checked, the shortcuts (movement, screening, judge_all) judge as the rule does."""

from __future__ import annotations

import random
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from perfguard.errors import UsageError
from perfguard.judge.rules import DEFAULT_RULE, judge, load_rules


@pytest.mark.parametrize("recent, state", [
    ([100.0, 100.0, 94.0], "inconclusive"), ([100.0, 94.0, 94.0], "regression"),
    ([94.0, 100.0, 94.0], "regression"), ([100.0, 94.0, 100.0], "pass"),
    ([100.0, 106.0, 106.0], "improvement")])
def test_judge_needs_two_of_the_last_three_runs(recent: list[float], state: str) -> None:
    history = [100.0 + d for d in (-1, 1, 0.5, -0.5, 0, 1.2, -1.2, 0.3, -0.3, 0.8)]
    assert judge(history, recent, "higher").state == state
    flipped = {"regression": "improvement", "improvement": "regression"}.get(state, state)
    assert judge(history, recent, "lower").state == flipped

@pytest.mark.parametrize("text, message", [
    ("rules:\n  - metric: 'lat*'\n    kk: 2\n", "rules[0].kk: unknown key (did you mean 'k'?)"),
    ("rules:\n  - metric: 'lat*'\n    k: -1\n",
     "rules[0].k: -1 is less than or equal to the minimum of 0"),
    ("rules:\n  - needed: 4\n", "rules[0]: needed (4) must not be more than confirm (3)"),
    ("rules: 3\n", "rules: 3 is not of type 'array'"),
    ("rules:\n  - same_fingerprint: 1\n", "rules[0].same_fingerprint: 1 is not of type 'boolean'"),
    ("findings: {alpah: 0.1}\nrun: {min_measured_share: 2}\n",
     "findings.alpah: unknown key (did you mean 'alpha'?)\n"),
    ("run: {min_measured_share: 2}\n",
     "run.min_measured_share: 2 is greater than the maximum of 1"),
])
def test_bad_verdict_rules_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "verdict_rules.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        load_rules(path)
    assert load_rules(tmp_path / "absent.yaml").for_metric("C", "latency").k == 1.3

def test_the_fast_paths_judge_as_the_rule_does() -> None:
    """The verdict's shortcuts change no judgement: over 20,000 random series (CV 0.1–5 %,
    steps, spikes, ties, short histories) a series ``movement`` rules out is never a
    regression or an improvement, the float noise estimate agrees with statistics.stdev's
    exact one, and the baselines taken all at once (``judge_all``) are the same floats."""
    import statistics

    from perfguard.judge import rules

    rng = random.Random(11)
    every, directions, one_by_one = [], [], []
    for _ in range(20_000):
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
            assert abs(noise - statistics.stdev(kept)) <= 1e-9 * statistics.stdev(kept) + 1e-12
    assert rules.judge_all(every, directions, [rules.DEFAULT_RULE] * len(every)) == one_by_one

def test_a_curve_screened_out_is_never_a_regression_or_an_improvement() -> None:
    """The curve verdict's screen (``could_band``, on values alone, before any series is
    named) changes no curve's state: over 5,000 random curves (2–23 sizes, CV 0.1–5 %,
    a band of sizes stepped or single sizes spiked), a curve it drops is never a
    regression or an improvement, and it keeps those that are."""
    from perfguard.judge import curves, rules

    rng = random.Random(5)
    kept_moved = 0
    for _ in range(5_000):
        nights, count = rng.randint(8, 40), rng.randint(1, 23)
        cv = rng.choice([0.001, 0.01, 0.02, 0.05])
        values = {1 << size: [100 * rng.gauss(1, cv) for _ in range(nights)]
                  for size in range(count)}
        stepped = sorted(values)[rng.randrange(count):][:rng.randint(1, 4)]
        step, moved = rng.choice([0.9, 0.97, 0.99, 1.01, 1.03, 1.1]), rng.randint(1, 3)
        for size in stepped:
            values[size][-moved:] = [v * step for v in values[size][-moved:]]
        better = rng.choice(["higher", "lower"])
        curve = curves.Curve("C", {}, "p", "e", "m", "u", better,
                             {s: rules.judge_series(v, better) for s, v in values.items()})
        moved = curve.state in (rules.REGRESSION, rules.IMPROVEMENT)
        assert curves.could_band(values, rules.DEFAULT_RULE) or not moved, values
        kept_moved += moved
    assert kept_moved > 100  # the steps made enough regressions to test the screen on

def test_curves_screened_together_are_screened_as_one_by_one() -> None:
    """The verdict screens the curves whose nights listed the same points as one stack
    (``_could_band``): over 3,000 random curves of a few point lists, their point ids in
    no size order, some stepped at a band of sizes, it keeps exactly the curves that
    ``could_band`` keeps one at a time (and some of each)."""
    from perfguard.judge import curves, history, rules

    rng = np.random.default_rng(11)
    sizes = {point: 1 << int(size) for point, size in zip(range(1, 9), rng.permutation(8))}
    lists = [(1, 2, 3, 4, 5, 6, 7, 8), (8, 3, 5), (4,), (2, 7, 1, 6)]
    found = []
    for index in range(3_000):
        points = lists[index % len(lists)]
        nights = 100 * rng.normal(1, 0.01, (int(rng.choice([20, 33])), len(points)))
        nights[-2:, rng.random(len(points)) < 0.5] *= rng.choice([0.9, 0.98, 1.0, 1.05])
        found.append((history.CurveNights("v", "C", "bw", 1, True, nights, points, 1),
                      rules.DEFAULT_RULE))
    kept = {id(curve) for curve, _ in curves._could_band(found, sizes)}
    one_by_one = {id(curve) for curve, rule in found if curves.could_band(
        {sizes[point]: curve.nights[:, column].tolist()
         for column, point in enumerate(curve.point_ids)}, rule)}
    assert kept == one_by_one and 100 < len(kept) < 2_900

def test_a_curve_whose_nights_list_different_points_keeps_each_points_nights() -> None:
    """Nights of one curve (variant, partition, environ, metric 3) come as one row per
    set of points: size 10 measured every night, size 20 on two; each series holds its
    point's values, oldest night first, and is named by its newest test case. Metric 4
    listed the same points every night (one row: the transposition)."""
    from perfguard.judge.history import _point_series

    def night(day: int) -> datetime:
        return datetime(2026, 11, day, tzinfo=timezone.utc)

    both = ((10, 20), (103, 105), (3, 5), (night(3), night(5)), ((1.3, 2.3), (1.5, 2.5)))
    only_10 = ((10,), (101, 102, 104), (1, 2, 4), (night(1), night(2), night(4)),
               ((1.1,), (1.2,), (1.4,)))
    curves = [("v", 1, 1, 3, "C", *only_10), ("v", 1, 1, 3, "C", *both),
              ("v", 1, 1, 4, "C", *only_10)]

    def rows(points: set[int], with_times: bool) -> list[tuple]:
        found = _point_series(curves, points, {3: "bw", 4: "lat"}, 5, with_times)
        assert [(c.variant, c.check, c.metric, c.metric_id, c.measured) for c in found] == [
            ("v", "C", "bw", 3, True), ("v", "C", "lat", 4, False)]
        merged, single = found[0].nights, found[1].nights
        assert merged is None and single.tolist() == [[1.1], [1.2], [1.4]]
        return [(*row[:3], tuple(row[3]), *row[4:]) for curve in found for row in curve.rows]

    series = {(row[1], row[2]): row for row in rows({10, 20}, True)}
    assert series[(4, 10)] == (104, 4, 10, (1.1, 1.2, 1.4),
                               tuple(night(d) for d in (1, 2, 4)), False)
    assert series[(3, 10)] == (105, 3, 10, (1.1, 1.2, 1.3, 1.4, 1.5),
                               tuple(night(d) for d in (1, 2, 3, 4, 5)), True)
    assert series[(3, 20)] == (105, 3, 20, (2.3, 2.5), (night(3), night(5)), True)
    assert {(row[1], row[2], row[4]) for row in rows({10}, False)} == {
        (3, 10, None), (4, 10, None)}


def test_explain_marks_each_recent_run_on_its_own_side() -> None:
    """A run far off the band on the other side than the judged one is beyond, not
    "within"; only the runs that agree with the judged one are counted."""
    import random

    from perfguard.judge import rules as judge
    from perfguard.judge.verdict import Line
    from perfguard.present.text import explain

    noisy = random.Random(3)
    history = [100 + noisy.gauss(0, 2) for _ in range(20)]
    recent = [160.0, 61.0, 60.0]
    judged = judge.judge(history, recent, "higher")
    line = Line("OsuBw", {}, "p", "e", "bandwidth", 60.0, "MB/s", {}, None, None, None,
                judged.state, judged.reason, judged.centre, "higher", judged,
                tuple(history + recent))
    text = explain(line)
    assert judged.state == judge.REGRESSION, text
    assert "160 (beyond, better, not counted), 61 (beyond, worse, counted), 60 (beyond, " \
           "worse, counted)" in text, text
    curve = Line("OsuBw", {}, "p", "e", "bandwidth curve", None, "MB/s", {}, None, None,
                 None, judge.REGRESSION, "-48% above 64 KiB")
    explained = explain(curve)
    assert "history: 0 runs" not in explained and "judged as a whole curve" in explained


def test_a_faults_first_night_leaves_the_baseline_with_the_night_that_confirmed_it() -> None:
    """Measured live (osu_latency under a CPU quota on both nodes): 24.0 µs was "confirm on
    the next", 41.0 µs the regression. Both are the fault; a spike three nights earlier,
    a night on the other side and the nights within the noise stay."""
    from perfguard.judge.verdict import _first_nights

    values = (3.96, 3.89, 4.1, 9.0, 3.85, 4.2, 3.56, 3.84, 3.87, 4.0, 23.99, 40.98)
    assert _first_nights(values, {11}, DEFAULT_RULE) == {10}
    assert _first_nights(values[:10] + (4.1, 40.98), {11}, DEFAULT_RULE) == set()
    assert _first_nights(values[:10] + (1.0, 40.98), {11}, DEFAULT_RULE) == set()

def _line_of_noise(cv: float, centre: float = 10_000.0, nights: int = 30) -> list[float]:
    """A history of ``nights`` values around ``centre`` with noise ``cv`` (seeded)."""
    rng = random.Random(49)
    return [centre * (1 + rng.gauss(0, cv)) for _ in range(nights)]


def test_a_first_night_far_beyond_a_noisy_line_says_so() -> None:
    """Issue 49: a −63.8 % osu_bw on its first night, 4.4σ on a ±14 % line, was explained
    as "noise ±14.4 % too large to tell this change"; it is one night beyond, past the
    shift such a line is judged by: confirm on the next. "Noise too large" stays for a
    change that is not such a shift."""
    from perfguard.judge.rules import baseline

    history = _line_of_noise(0.144)
    centre, noise = baseline(history)
    first = judge(history, [centre, centre, centre * (1 - 0.638)], "higher")
    shift = 0.638 * centre / noise
    assert first.state == "inconclusive"
    assert f"-63.8% vs the median of 30 runs; one night beyond, {shift:.1f}σ worse" \
        in first.reason and first.reason.endswith(": confirm on the next")
    assert "too large" not in first.reason
    small = judge(history, [centre, centre, centre * 0.72], "higher")
    assert "noise ±" in small.reason and "too large to tell this change" in small.reason
    quiet = judge(_line_of_noise(0.01), [10_000.0, 10_000.0, 9_500.0], "higher")
    assert "; one night beyond, " in quiet.reason and "confirm on the next" in quiet.reason


def test_an_accepted_level_is_judged_against_its_accepted_runs_at_once() -> None:
    """After an accept, a second fault pages: with the accepted runs as the reference (and
    the line's relative noise from before the change) the level's second night -10 % is a
    regression, where the rule alone said "not yet judged" for 8 nights."""
    from perfguard.judge.rules import judge_new_level

    before = [100.0 + (i % 5 - 2) * 0.5 for i in range(20)]
    level = [95.0, 95.3, 94.8]  # accepted
    assert judge_new_level(before, level + [95.1], 3, "higher").state == "pass"
    second = judge_new_level(before, level + [85.5, 85.2], 3, "higher")
    assert second.state == "regression" and "vs the accepted level" in second.reason
    own = judge_new_level(before, level + [95.2, 95.0, 85.5, 85.4], 3, "higher")
    assert own.state == "regression" and "runs of the accepted level" in own.reason
    upgrade = judge_new_level(before, [95.0, 85.5, 85.2], 1, "higher")  # upgrade-check --accept
    assert upgrade.state == "regression", upgrade.reason
    assert judge_new_level([], [95.0, 95.1], 1, "higher").reason.startswith("not yet judged")
