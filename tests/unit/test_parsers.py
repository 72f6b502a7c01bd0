"""Benchmark output parsers on real outputs and on malformed or truncated ones."""

from __future__ import annotations

import pytest

from reframe_tests.common.binding import SrunBinding, binding_errors, mask_of, srun_masks
from reframe_tests.sweep import parser as sweep
from reframe_tests.ucx import parser as ucx
from tests.conftest import DATA


def test_ucx_bandwidth_sweep_from_real_run() -> None:
    results = ucx.parse((DATA / "ucx_perftest_tag_bw.out").read_text())
    assert [r.size for r in results] == [8, 4096, 65536, 1048576]
    assert results[1].bandwidth_mib_s == pytest.approx(3356.17)
    assert results[0].latency_p50_us == pytest.approx(0.278)
    assert all(r.iterations == 20000 for r in results)


def test_ucx_latency_from_real_run() -> None:
    results = ucx.parse((DATA / "ucx_perftest_ucp_put_lat.out").read_text())
    assert [r.size for r in results] == [8, 4096]
    assert 0 < results[0].latency_us < results[1].latency_us


def test_ucx_truncated_output_names_the_size() -> None:
    text = (DATA / "ucx_perftest_tag_bw.out").read_text()
    truncated = text[: text.rindex("Final:")]
    with pytest.raises(ucx.ParseError, match="message size 1048576: no 'Final:' row"):
        ucx.parse(truncated)


def test_ucx_no_marker() -> None:
    with pytest.raises(ucx.ParseError, match="never ran"):
        ucx.parse("srun: error: node2: task 0: Exited with exit code 1\n")


def test_a_throttled_nodes_empty_last_interval_is_not_a_failed_measurement() -> None:
    """Recorded on the leaf cluster, node4 throttled to a fifth of a core: the last report
    interval held no iteration, so its average latency is inf; the overall figures are
    what is taken. A non-finite figure that is taken still fails the measurement."""
    text = (DATA / "sweep_throttled_node_final_interval.out").read_text()
    bw, lat = sweep.parse(text)
    assert (bw.server, bw.test, bw.result.latency_us, bw.result.bandwidth_mib_s) == (
        "node4", "tag_bw", 1001.678, 998.32)
    assert (lat.test, lat.result.latency_us) == ("tag_lat", 2.458)
    # the sweep judges the typical round trip: the starved node is the bandwidth's to find
    assert sweep.typical_latency(lat.result) == 0.165
    broken = text.replace("1001.678        0.00     998.32", "1001.678        0.00        inf")
    with pytest.raises(ucx.ParseError, match="tag_bw node4→node4: non-finite value"):
        sweep.parse(broken)


def test_a_run_too_short_for_ucx_perftests_timer_says_so() -> None:
    """Recorded on the embedded cluster on a quiet host (ucp_put_bw, 8 B, ``-n 50``):
    ucx_perftest timed the run as no time and printed inf; the failure says why and what
    to change, not only that a value is not finite."""
    text = ("# perfguard size=8\n"
            "Final:                    50      0.010     0.000     0.000         inf        inf"
            "         inf         inf\n")
    with pytest.raises(ucx.ParseError, match=r"message size 8: non-finite value in .*: "
                       r"ucx_perftest timed the run as 0 µs overall, too short for its timer; "
                       r"raise the iterations \(-n\)"):
        ucx.parse(text)


def test_srun_verbose_masks() -> None:
    stderr = ("cpu-bind=MASK - node2, task  1  0 [6091]: mask 0x2 set\n"
              "cpu-bind=MASK - node1, task  0  0 [6090]: mask 0x1 set\n"
              "cpu-bind=MASK - node3, task  2  0 [7000]: mask 0xff00 set FAILED\n")
    assert srun_masks(stderr) == {0: SrunBinding("node1", 0, 0x1), 1: SrunBinding("node2", 0, 0x2),
                                  2: SrunBinding("node3", 0, 0xff00)}
    assert mask_of([0, 1, 8]) == 0x103


def test_binding_errors_name_task_and_masks() -> None:
    stderr = ("cpu-bind=MASK - node1, task  0  0 [1]: mask 0x1 set\n"
              "cpu-bind=MASK - node1, task  1  1 [2]: mask 0x4 set\n")
    assert binding_errors(stderr, 2, [0, 1]) == [
        "task 1 (local rank 1) on node1: mask 0x4, expected 0x2"]
    assert binding_errors(stderr, 3, []) == ["srun reported no cpu-bind mask for task 2"]


def test_binding_errors_per_node_maps() -> None:
    """Nodes with their own core maps: the masks are matched by host, each host against
    its own map."""
    stderr = ("cpu-bind=PER_NODE_MAP - node1, task 0 0 [1]: mask 0x2 set\n"
              "cpu-bind=PER_NODE_MAP - node2, task 1 0 [2]: mask 0x2 set\n")
    assert binding_errors(stderr, 2, [1], {"node1": [1], "node2": [1]}) == []
    assert binding_errors(stderr, 2, [1], {"node1": [1], "node2": [0]}) == [
        "task 1 (local rank 0) on node2: mask 0x2, expected 0x1"]
    assert binding_errors(stderr.splitlines()[0], 2, [1], {"node1": [1], "node2": [0]}) == [
        "srun reported no cpu-bind mask for task 1"]


def test_a_parser_error_is_said_once_in_the_sanity_error() -> None:
    """ReFrame's errors append their cause's message; a chained ValueError made the
    recorded reasons read "sanity error: X: X" (the quiet nights' ucx_perftest failures)."""
    from reframe.core.exceptions import SanityError

    from reframe_tests.common.output import parsed

    with pytest.raises(SanityError) as raised:
        parsed(ucx.parse, "# perfguard size=8\n")
    assert str(raised.value) == ("message size 8: no 'Final:' row (output truncated or the "
                                 "client failed)")
