"""The recorded real-nights sets replayed whole (``benchmarks/real_nights.py``) and held to
the figures the results file gives for them: the sets the rule was tuned on and those held
out from it run in test files of their own, so the suite's workers share them out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: The dated measurements behind docs/verdicts.md, newest first; the newest section ends
#: at LATEST_END.
RESULTS = BENCHMARKS / "results" / "verdicts.md"
LATEST_END = "<!-- end of the newest measurements -->"
#: What every set's updates that changed nothing give (the results say it once).
NO_UPDATE_PAGES = ("9 update(s), paged on the update's night 0, within 2 nights 0, "
                   "within 3 0")


def fault_rows(half: str, intermittent: str, driver: str, starts: int = 3
               ) -> dict[str, str]:
    """A set's three fault rows as real_nights.py prints them (paged night 1, within 2,
    within 3, named), from ``starts`` start nights on its two nodes with bandwidth lines
    (each intermittent pattern a trial of its own)."""
    return {f"HCA at half bandwidth ({2 * starts} trial(s))": half,
            f"HCA half, 2 of 3 nights ({4 * starts} trial(s))": intermittent,
            f"driver +0.3 µs small latency ({starts} trial(s))": driver}


def replay_set(dsn: str, *options: str) -> str:
    """real_nights.py on a set (``options``: its ``--data`` and others) into databases of
    the test cluster's PostgreSQL (``dsn``), from the checkout's root; its output."""
    result = subprocess.run([sys.executable, "benchmarks/real_nights.py", *options, "--dsn",
                             dsn], cwd=BENCHMARKS.parent, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def assert_set_replays_as_results(dsn: str, data: str, site: str, summary: str,
                                  faults: dict[str, str], update_pages: str) -> None:
    """The results' command for one set, run whole: its table row (nights, judged, quiet,
    false pages, test-failed, disturbed), the faults' rows and the updates that changed
    nothing are what the replay prints, so the page's figures stay true of the code."""
    out = replay_set(dsn, "--data", f"benchmarks/data/{data}")
    docs = RESULTS.read_text()
    command = f".venv/bin/python\nbenchmarks/real_nights.py --data benchmarks/data/{data}"
    assert f"`{command}`" in docs
    assert summary in out and summary in docs, out
    for fault, row in faults.items():
        assert f"| real nights | {fault} | {row} |" in out, out
        assert f"| {site} | {fault} | {row} |" in docs
    assert update_pages in out and update_pages in docs, out
