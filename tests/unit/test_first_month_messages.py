"""What a new admin reads: the verdict's counts, where a refused password came from, and
when ReFrame may colour its output (issue 51, item 5)."""

from __future__ import annotations

from pathlib import Path

from perfguard.judge import verdict as vd
from perfguard.present.htmlreport import Report
from perfguard.present.text import summary
from perfguard.run.reframe import colour_wanted
from perfguard.store.db import passfile_line


def line(check: str, metric: str, status: str) -> vd.Line:
    return vd.Line(check, {}, "compute", "gnu", metric, None if metric == "-" else 1.0, "",
                   {}, None, None, None, status)


def test_a_run_that_measured_nothing_counts_no_pass() -> None:
    """The SpackStack fixture passed and everything else skipped: "1 skipped", and the
    fixture apart, named; neither the CLI nor the HTML report says "1 pass"."""
    lines = [line("SpackStack", "-", "pass"), line("UcxPerftestCheck", "-", "skipped")]
    said = summary(lines)
    assert said == ("0 fail, 0 regression, 0 test-failed, 1 skipped; 1 passed without a "
                    "figure (SpackStack)"), said
    counted = Report.counts.fget(type("R", (), {"lines": lines})())
    assert counted == {"skipped": 1, vd.WITHOUT_FIGURE: 1}
    measured = summary([line("OsuPt2PtCheck", "latency", "pass"), lines[0]])
    assert measured.startswith("1 pass, 0 fail") and "1 passed without a figure" in measured


def test_the_passfile_line_a_password_came_from(tmp_path: Path) -> None:
    """libpq's rules: the first line whose host, port, database and user match (``*`` any,
    ``\\:`` an escaped colon); comments and blank lines skipped."""
    passfile = tmp_path / "pgpass"
    passfile.write_text("# site\n\ndbhost:5432:other:alice:x\n"
                        "dbhost:*:perfguard:alice:pa\\:ss\n*:*:*:*:fallback\n")
    wanted = {"host": "dbhost", "port": "5432", "dbname": "perfguard", "user": "alice"}
    assert passfile_line(str(passfile), wanted) == 4
    assert passfile_line(str(passfile), {**wanted, "host": "elsewhere"}) == 5
    assert passfile_line(str(tmp_path / "none"), wanted) is None


def test_colour_only_for_a_person_at_a_terminal() -> None:
    assert colour_wanted(True, {}) is True
    assert colour_wanted(False, {}) is False  # a pipe, a log, a job's output, mail
    assert colour_wanted(True, {"NO_COLOR": "1"}) is False


def test_a_long_failure_reason_is_wrapped_in_its_column_never_cut() -> None:
    """The reason ends with what explains it (the rank, node and signal srun reported):
    the table goes on below the verdict column instead of cutting it at ~100 columns."""
    from perfguard.present.text import TABLE_WIDTH, verdict_table
    from perfguard.states import TEST_FAILED

    reason = ("job 4711 FAILED with exit code 139; step 4711.0 (osu_latency) FAILED 139:0: "
              "device buffers crashed the MPI after OMB's title and before any result: "
              "rank 1 on node2: Segmentation fault (core dumped)")
    line = vd.Line("OsuPt2PtCheck", {"benchmark": "osu_latency"}, "gpu", "gnu-openmpi", "-",
                   None, "", {}, None, None, None, TEST_FAILED, detail=reason)
    table = verdict_table([line])
    assert all(len(row) <= TABLE_WIDTH for row in table.splitlines()), table
    said = " ".join(row.strip() for row in table.splitlines() if row.startswith("   "))
    assert "rank 1 on node2: Segmentation fault (core dumped)" in said, table
    assert "…" not in table


def test_a_skip_note_never_cuts_a_path_at_its_hyphens() -> None:
    """The note under the table wraps between words: a path read back from it is whole
    (a CI path `…/session/modules-test/prefix` came back as `modules- test/prefix`)."""
    from perfguard.present.text import verdict_table
    from perfguard.states import SKIPPED

    path = "/work/ci-clone/.state-test/gw1/session/modules-test/prefix"
    for pad in range(40):
        reason = (f"module pgtest/1.O did not load on node1 {'x' * pad} (provider 'prefix' "
                  f"{path}): check the name with `module avail pgtest/1.O` on node1")
        line = vd.Line("UcxPerftestCheck", {}, "compute", "gnu", "-", None, "", {}, None, None,
                       None, SKIPPED, detail=reason)
        table = verdict_table([line])
        assert path in table, table
