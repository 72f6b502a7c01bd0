"""The recorded real-nights sets held out from the rule's tuning (the far nights', the
updates rule's and a young history's borrowing were set without them), each replayed
whole as the results file says: a rule is judged on nights it was not fitted to."""

from __future__ import annotations

import pytest

from tests.system.replayed_sets import NO_UPDATE_PAGES, assert_set_replays_as_results, fault_rows

SEVENTH_FAULTS = fault_rows("0% | 17% | 33% | 33%", "0% | 8% | 17% | 17%",
                           "0% | 67% | 100% | 100%")
EIGHTH_FAULTS = fault_rows("0% | 33% | 33% | 33%", "0% | 17% | 33% | 33%",
                          "0% | 33% | 100% | 100%")
NINTH_FAULTS = fault_rows("0% | 0% | 25% | 25%", "0% | 0% | 0% | 0%",
                         "50% | 50% | 50% | 50%", starts=2)


@pytest.mark.parametrize("data, site, summary, faults, update_pages", [
    ("real-nights-seventh", "seventh, held out", "| 60 | 50 | 27 / 23 | 0 | 7 | 14 (75) |",
     SEVENTH_FAULTS, "9 update(s), paged on the update's night 1, within 2 nights 1, "
                     "within 3 1"),
    ("real-nights-eighth", "eighth, held out", "| 60 | 50 | 29 / 21 | 1 | 15 | 18 (92) |",
     EIGHTH_FAULTS, NO_UPDATE_PAGES),
    ("real-nights-ninth", "ninth, held out", "| 40 | 30 | 2 / 28 | 0 | 3 | 7 (18) |",
     NINTH_FAULTS, "5 update(s), paged on the update's night 1, within 2 nights 1, "
                   "within 3 1")])
def test_a_held_out_set_replays_as_the_results_say(layout, data: str, site: str,
                                                    summary: str, faults: dict[str, str],
                                                    update_pages: str) -> None:
    assert_set_replays_as_results(layout.dsn_for("postgres"), data, site, summary, faults,
                                  update_pages)
