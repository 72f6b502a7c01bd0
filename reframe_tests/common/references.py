"""Thresholds become ReFrame references, so ReFrame itself fails a test that misses one.

`perfguard run` writes the system's thresholds in force to a file before ReFrame starts
(perfguard.contract.references); each test picks its own from it. Without the file (the
database was down, or reframe was started by hand) the run goes on without references,
said once; `perfguard verdict` compares afterwards.
"""

from __future__ import annotations

import functools

from reframe.core.logging import getlogger

from perfguard.contract import References, run_references


@functools.cache
def _references() -> References:
    """The run's references, read once per session; their absence is said once."""
    found = run_references()
    if found.unavailable:
        getlogger().warning(f"perfguard: running without references: {found.unavailable}; "
                            f"`perfguard verdict` compares later")
    return found


def for_check(display_name: str, check: str, params: dict[str, str], system: str,
              partition: str, environ: str, metrics: list[str]) -> dict:
    """ReFrame's ``reference`` for one test: its system:partition → the thresholds of the
    figures it reports (a missing one is said, once per test, in ReFrame's log)."""
    found = _references().for_test(check, params, partition, environ, metrics)
    missing = sorted(set(metrics) - set(found))
    if missing:
        getlogger().info(f"perfguard: {display_name}: no reference for {', '.join(missing)}")
    return {f"{system}:{partition}": found}


def direction_problem(check: str, measured: set[str], better: dict[str, str]) -> str | None:
    """Every metric measured must say 'higher' or 'lower' is better (perfguard_better):
    verdicts never guess it from a unit."""
    missing = sorted(measured - set(better))
    wrong = sorted(m for m, b in better.items() if b not in ("higher", "lower"))
    if missing or wrong:
        return (f"perfguard_better of {check} must say 'higher' or 'lower' for "
                f"{', '.join(missing + wrong)}")
    return None
