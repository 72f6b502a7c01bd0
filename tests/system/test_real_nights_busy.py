"""The busy host's recorded nights (`real-nights`, load 4-14 on 2 cores, recorded before
the CPU wait was), replayed whole as the results file says. Its inter-node osu_latency lay
far worse on 8 of its first 17 nights, 3 of them in a row: read as a level it moved to,
those 3 left a line of 5 far nights, and its 238 us on night 18 and 80 us on night 19
paged (3 false pages in 50 nights, 2026-12-02); 3 far nights in a row are a level only
where the line's other nights make such a run unlikely (``findings.without_held_levels``).
In a file of its own: the suite's workers share the replays out by file."""

from __future__ import annotations

from tests.system.replayed_sets import NO_UPDATE_PAGES, assert_set_replays_as_results, fault_rows

BUSY_FAULTS = fault_rows("0% | 0% | 0% | 0%", "0% | 0% | 0% | 0%", "0% | 33% | 100% | 100%")


def test_the_busy_set_replays_as_the_results_say(layout) -> None:
    assert_set_replays_as_results(layout.dsn_for("postgres"), "real-nights",
                                  "busy, held levels", "| 60 | 50 | 0 / 50 | 1 | 3 | 0 (0) |",
                                  BUSY_FAULTS, NO_UPDATE_PAGES)
