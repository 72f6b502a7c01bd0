"""The recorded real-nights sets the rule was tuned on (the quiet host's nights, the
spaced ones, and the two whose shoulders set the far-night rule), each replayed whole as
the results file says; the sixth also in a random order."""

from __future__ import annotations

import re

import pytest

from tests.system.replayed_sets import (
    NO_UPDATE_PAGES,
    RESULTS,
    assert_set_replays_as_results,
    fault_rows,
    replay_set,
)

QUIET_FAULTS = fault_rows("0% | 83% | 100% | 83%", "0% | 42% | 83% | 67%",
                         "0% | 67% | 67% | 67%")
SPACED_FAULTS = fault_rows("0% | 100% | 100% | 67%", "0% | 58% | 100% | 83%",
                          "0% | 67% | 67% | 67%")
FIFTH_FAULTS = fault_rows("0% | 17% | 33% | 33%", "0% | 8% | 25% | 25%",
                         "0% | 33% | 67% | 67%")
SIXTH_FAULTS = fault_rows("0% | 0% | 0% | 0%", "0% | 0% | 0% | 0%",
                         "0% | 0% | 100% | 100%")


@pytest.mark.parametrize("data, site, summary, faults", [
    ("real-nights-quiet", "quiet, shoulders", "| 60 | 50 | 48 / 2 | 1 | 12 | 0 (0) |",
     QUIET_FAULTS),
    ("real-nights-spaced", "spaced, shoulders", "| 60 | 50 | 50 / 0 | 0 | 9 | 0 (0) |",
     SPACED_FAULTS),
    ("real-nights-fifth", "fifth, shoulders", "| 60 | 50 | 32 / 18 | 0 | 11 | 12 (53) |",
     FIFTH_FAULTS),
    ("real-nights-sixth", "sixth, shoulders", "| 60 | 50 | 14 / 36 | 2 | 13 | 18 (54) |",
     SIXTH_FAULTS)])
def test_a_tuned_set_replays_as_the_results_say(layout, data: str, site: str, summary: str,
                                                 faults: dict[str, str]) -> None:
    assert_set_replays_as_results(layout.dsn_for("postgres"), data, site, summary, faults,
                                  NO_UPDATE_PAGES)


def test_a_set_in_a_random_order_replays_as_the_results_say(layout) -> None:
    """The results' command for the sixth set in a random order (seed 2): the row it
    prints is the page's, and the nights ran in another order than recorded, each in the
    time slot of the night it replaced (the judge orders a line's history by it)."""
    command = ("benchmarks/real_nights.py --data benchmarks/data/real-nights-sixth "
               "--shuffle 2")
    out = replay_set(layout.dsn_for("postgres"), *command.split()[1:])
    assert f"`.venv/bin/python {command}`" in RESULTS.read_text()
    row = "| 60 | 50 | 16 / 34 | 1 | 12 | 15 (46) |"
    assert row in out and row in RESULTS.read_text(), out
    assert "replayed in a random order (seed 2)" in out
    [page] = re.findall(r"page on night (\d+) \(run (\d+)", out)
    assert page[0] != page[1], page  # the recorded night 43 ran as the 51st
