"""Thresholds become ReFrame references, so ReFrame itself fails a test that misses one.

`perfguard run` writes the system's thresholds in force to a file before ReFrame starts
(perfguard.contract.references); each test picks its own from it. A metric the database
has a threshold for is judged by it (the check's own ``reference`` for it is replaced,
said once per check and metric in a run); any other keeps the check's own reference.
Without the file (the database was down, or reframe was started by hand) the run goes on
with the checks' own references, said once; `perfguard verdict` compares afterwards.
"""

from __future__ import annotations

import functools

from reframe.core.logging import getlogger

from perfguard.contract import References, bounds_direction, run_references


@functools.cache
def _references() -> References:
    """The run's references, read once per session; their absence is said once."""
    found = run_references()
    if found.unavailable:
        getlogger().warning(f"perfguard: running without references: {found.unavailable}; "
                            f"`perfguard verdict` compares later")
    return found


#: (check, metric) whose own reference the database's threshold replaced, said once a run
_replaced: set[tuple[str, str]] = set()


def own_references(reference, partition_fullname: str, metrics: list[str]) -> dict:
    """Metric → the check's own ``reference`` tuple for this partition (ReFrame's scoped
    lookup, ``*`` and the system's name included); metrics it gives none are left out."""
    found = {}
    for metric in metrics:
        try:
            found[metric] = tuple(reference[f"{partition_fullname}:{metric}"])
        except KeyError:
            continue
    return found


def for_check(display_name: str, check: str, params: dict[str, str], partition: str,
              environ: str, metrics: list[str], own: dict) -> dict[str, tuple]:
    """Metric → ReFrame reference tuple for one test: the database's threshold, else the
    check's own reference ``own``; a replaced own reference is said once a run, a figure
    with neither once per test."""
    found = _references().for_test(check, params, partition, environ, metrics)
    for metric in sorted(set(own) & set(found) - {m for c, m in _replaced if c == check}):
        _replaced.add((check, metric))
        getlogger().info(f"perfguard: {check} {metric}: the database's threshold replaces "
                         f"its own reference {own[metric][:3]} (`perfguard thresholds "
                         f"list --check {check}`)")
    merged = {**own, **found}
    missing = sorted(set(metrics) - set(merged))
    if missing:
        getlogger().info(f"perfguard: {display_name}: no reference for {', '.join(missing)}")
    return merged


def directions(better: dict[str, str], reference: dict[str, tuple]) -> dict[str, str]:
    """The check's ``perfguard_better``, and for a metric it gives no direction, the one
    its reference's bounds say (a lower bound alone: higher is better)."""
    derived = {metric: bounds_direction(ref) for metric, ref in reference.items()
               if metric not in better}
    return {**better, **{m: d for m, d in derived.items() if d}}


def direction_problem(check: str, measured: set[str], better: dict[str, str]) -> str | None:
    """Every metric measured must say 'higher' or 'lower' is better (perfguard_better):
    verdicts never guess it from a unit."""
    missing = sorted(measured - set(better))
    wrong = sorted(m for m, b in better.items() if b not in ("higher", "lower"))
    if missing or wrong:
        return (f"perfguard_better of {check} must say 'higher' or 'lower' for "
                f"{', '.join(missing + wrong)} (or a one-sided reference imply it)")
    return None
