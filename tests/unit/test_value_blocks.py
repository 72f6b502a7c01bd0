"""The blocks ingest stores each value in, once (0027): grouping, point order, and the
binary COPY stream PostgreSQL reads them from."""

from __future__ import annotations

import json
import struct
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from perfguard.store import report
from perfguard.store.ingest import Block, _blocks, binary_copy
from perfguard.store.report import Sample, Series


def case(check: str, key: float, sizes: list[int], values: list[float],
         reference: float | None = None) -> report.TestCase:
    return report.TestCase(check, f"{check}_{key}", "", {}, "sys", "p", "e", "pass", 0, None, None,
                    None, [], 0, 1.0, None,
                    [Sample("lat", key, "us", {}, reference, -0.1 if reference else None,
                            0.1 if reference else None)],
                    [Series("bw", "MB/s", ("size",), (sizes,), values)], {})


def test_values_are_grouped_by_check_metric_and_points_in_point_id_order() -> None:
    """Key figures by check and metric (point list (0,)), with their references where any
    has one; sweeps by check, metric and point list, points in id order (the report's
    order permuted once per point list), test cases in id order."""
    points = {(("size", 8),): 5, (("size", 1),): 7, (("size", 2),): 6}
    cases = [case("A", 1.0, [8, 1, 2], [80.0, 10.0, 20.0], reference=1.5),
             case("A", 2.0, [8, 1, 2], [81.0, 11.0, 21.0]),
             case("B", 3.0, [1, 2], [12.0, 22.0])]
    blocks = {(b.check, b.metric_id, tuple(b.point_ids)): b
              for b in _blocks([10, 11, 12], cases, {("lat", "us"): 1, ("bw", "MB/s"): 2},
                               points)}
    assert sorted(blocks) == [("A", 1, (0,)), ("A", 2, (5, 6, 7)), ("B", 1, (0,)),
                              ("B", 2, (6, 7))]
    sweep = blocks[("A", 2, (5, 6, 7))]
    assert sweep.testcase_ids.tolist() == [10, 11]
    assert sweep.values.tolist() == [[80.0, 20.0, 10.0], [81.0, 21.0, 11.0]]
    assert blocks[("A", 1, (0,))].values.tolist() == [[1.0], [2.0]]
    assert blocks[("A", 1, (0,))].references == ([1.5, None], [-0.1, None], [0.1, None])
    assert blocks[("B", 1, (0,))].references is None


def test_binary_copy_is_postgresql_binary_copy_format() -> None:
    """Signature, a row of ten fields (run, start, check, metric, three arrays, three
    NULL reference arrays), the trailer; a 2 × 1 float8 matrix in the array format."""
    block = Block("A", 3, np.zeros(1, np.int32), np.array([10, 11]), np.array([[1.5], [2.5]]))
    stream = binary_copy(7, datetime(2000, 1, 1, 0, 0, 1, tzinfo=timezone.utc), [block])
    assert stream.startswith(b"PGCOPY\n\xff\r\n\0" + bytes(8)) and stream.endswith(b"\xff\xff")
    row = stream[19:-2]
    assert struct.unpack_from(">hiqiq", row) == (10, 8, 7, 8, 1_000_000)
    values = struct.pack(">iiIiiii", 2, 0, 701, 2, 1, 1, 1) + struct.pack(">idid", 8, 1.5, 8, 2.5)
    assert struct.pack(">i", len(values)) + values in row
    assert row.endswith(struct.pack(">iii", -1, -1, -1))


def reframe_report(**case: object) -> dict:
    """A run report of one test case, with what ReFrame's schema requires of it."""
    return {"session_info": {"data_version": "4.2", "uuid": "u", "hostname": "h",
                             "time_elapsed": 1.0, "time_start_unix": 1.0, "time_end_unix": 2.0},
            "restored_cases": [], "runs": [{"num_cases": 1, "num_failures": 0, "testcases": [{
                "name": "C", "unique_name": "C", "system": "sys:p", "partition": "p",
                "environ": "e", "filename": "c.py", "result": "pass", "fail_phase": None,
                "fail_reason": None, "job_completion_time_unix": 2.0, "time_total": 1.0,
                "perfvalues": {}, **case}]}]}


def parsed_series(entries: list[dict]) -> report.TestCase:
    """The test case of a report with ``entries`` as its curves."""
    return report.parse(reframe_report(**{report.SAMPLES_VARIABLE: entries}),
                        Path("r.json")).testcases[0]


def test_series_at_the_same_points_share_one_shape() -> None:
    """A sweep's curves are hashed once for their points (report.Shape), and the shape is
    what ingest groups them by: equal points, one shape; other points, another."""
    tc = parsed_series([
        {"metric": "bw", "coords": {"size": [1, 2, 4]}, "values": [1.0, 2.0, 3.0]},
        {"metric": "lat", "coords": {"size": [1, 2, 4]}, "values": [4.0, 5.0, 6.0]},
        {"metric": "bw", "coords": {"size": [1, 2]}, "values": [1.0, 2.0]}])
    first, second, other = (series.signature() for series in tc.series)
    assert first is second and first == (("size",), ((1, 2, 4),), 3)
    assert other != first and hash(first) == hash((("size",), ((1, 2, 4),), 3))


def test_a_nan_drops_its_point_not_its_curve() -> None:
    """One NaN in an 18-point curve drops that point: its 17 finite points are stored,
    the test case passes, and the dropped point is named. Before, the test case failed
    and none of its figures was stored. A curve of NaNs only is dropped whole; another
    test case's curve at the same points keeps the shared shape."""
    sizes = [2 ** n for n in range(18)]
    values = [float(n + 1) for n in range(18)]
    values[3] = float("nan")
    tc = parsed_series([{"metric": "bw", "coords": {"size": sizes, "nodes": 2},
                         "values": values},
                        {"metric": "lat", "coords": {"size": [1, 2]},
                         "values": [float("nan"), float("inf")]}])
    assert tc.result == "pass" and tc.fail_reason is None, tc.fail_reason
    [bw] = tc.series
    assert len(bw.values) == 17 and 8 not in bw.columns[0] and 16 in bw.columns[0]
    assert bw.columns[1] == (2,) * 17 and bw.values[3] == 5.0
    assert [p["size"] for p in (bw.point(i) for i in range(17))] == sizes[:3] + sizes[4:]
    assert tc.dropped == ["perfguard_samples[0].values[3] (size=8, nodes=2): nan",
                          "perfguard_samples[1]: every value (2) not finite: lat dropped"]


def test_a_nan_key_figure_fails_its_test_case_and_keeps_its_other_figures() -> None:
    """A NaN key figure (or a NaN bound of its reference) fails its test case with the
    place named, and only that figure is not stored: the other key figure and the
    curve's 18 points are (before, none of the test case's figures was: issue 67's
    "one NaN drops its test case's 17 finite curve points")."""
    sizes = [2 ** n for n in range(18)]
    tc = report.parse(reframe_report(
        perfvalues={"p:bw": [float("nan"), 0, None, None, "MB/s"],
                    "p:lat": [1.5, 1.0, None, 0.1, "us"],
                    "p:msg": [7.0, 5.0, float("nan"), None, "Mmsg/s"]},
        **{report.SAMPLES_VARIABLE: [{"metric": "bw", "coords": {"size": sizes},
                                      "values": [float(n + 1) for n in range(18)]}]}),
        Path("r.json")).testcases[0]
    assert tc.result == "fail" and tc.fail_phase == "performance", tc.result
    assert tc.fail_reason == (
        "perfvalues['p:bw']: value nan is not finite (NaN or infinity); perfvalues['p:msg']: "
        "value nan is not finite (NaN or infinity): not stored (19 other figure(s) of this "
        "test case are)"), tc.fail_reason
    assert [s.metric for s in tc.key_samples] == ["lat"] and len(tc.series[0].values) == 18
    assert tc.dropped == []  # curve points only: ingest says "curve point(s) not stored"


def test_a_curve_with_an_object_as_a_point_is_named() -> None:
    """A point that is an object is a malformed report, naming the coordinate."""
    with pytest.raises(report.ReportError, match=r"coords\['size'\] must hold numbers"):
        parsed_series([{"metric": "bw", "coords": {"size": [1, [2]]}, "values": [1.0, 2.0]}])


def test_a_report_with_nan_as_reframe_writes_it_is_read(tmp_path: Path) -> None:
    """ReFrame writes a failed figure as the bare ``NaN`` of json.dumps, which strict JSON
    parsers (orjson) refuse: the report is read, and only its test case fails."""
    path = tmp_path / "report.json"
    path.write_text(json.dumps(reframe_report(
        perfvalues={"p:bw": [float("nan"), 0, None, None, "MB/s"]})))
    assert "[NaN, " in path.read_text()
    [tc] = report.load(path).testcases
    assert tc.result == "fail" and "value nan is not finite" in tc.fail_reason
