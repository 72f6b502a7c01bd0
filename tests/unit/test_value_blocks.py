"""The blocks ingest stores each value in, once (0027): grouping, point order, and the
binary COPY stream PostgreSQL reads them from."""

from __future__ import annotations

import struct
from datetime import datetime, timezone

import numpy as np

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
