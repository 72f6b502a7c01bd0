"""A threshold's unit converted into its metric's (issue 49: 50000 ns on a µs metric was
stored as 50000 µs), the names a threshold may use, and a direction from a reference."""

from __future__ import annotations

import pytest

from perfguard import paths
from perfguard.contract.references import bounds_direction
from perfguard.errors import UsageError
from perfguard.judge import units
from perfguard.judge.scope import Stored, declared_checks, in_stored_unit, unknown
from perfguard.judge.thresholds import Threshold


@pytest.mark.parametrize("given, stored, factor", [
    ("ns", "us", 1e-3), ("µs", "us", 1.0), ("μs", "ms", 1e-3), ("s", "us", 1e6),
    ("GB/s", "MB/s", 1e3), ("MiB/s", "MB/s", 1.048576), ("GiB/s", "KiB/s", 2.0**20),
    ("KB/s", "B/s", 1e3), ("GFLOPS", "MFLOPS", 1e3), ("msg/s", "msg/s", 1.0)])
def test_units_convert_within_their_dimension(given: str, stored: str, factor: float) -> None:
    assert units.factor(given, stored, "m") == pytest.approx(factor)


@pytest.mark.parametrize("given, stored", [("MB/s", "us"), ("ns", "MFLOPS"),
                                           ("msg/s", "MB/s"), ("us", "")])
def test_a_unit_of_another_dimension_is_refused_naming_the_metrics(given: str,
                                                                   stored: str) -> None:
    with pytest.raises(UsageError, match=f"m is measured in '{stored}'"):
        units.factor(given, stored, "m")


def threshold(**values) -> Threshold:
    return Threshold(**{"system": "local", "check": "UcxPerftestCheck", "metric": "latency",
                        "reference": 50000.0, "direction": "lower", "upper": 60000.0,
                        "bounds": "absolute", "unit": "ns", **values})


def test_a_threshold_is_stored_in_its_metrics_unit() -> None:
    known = Stored(True, ["UcxPerftestCheck"], [{"test": "tag_lat"}], {"latency": "us"})
    t = in_stored_unit(threshold(), known)
    assert (t.reference, t.upper, t.unit) == (50.0, 60.0, "us")
    fraction = in_stored_unit(threshold(upper=0.1, bounds="fraction"), known)
    assert (fraction.reference, fraction.upper) == (50.0, 0.1)
    assert in_stored_unit(threshold(unit=""), known).reference == 50000.0  # its own unit
    never = Stored(True, [], [], {})
    assert in_stored_unit(threshold(), never).unit == "ns"  # nothing to convert into


def test_the_checks_declare_their_parameters_and_metrics() -> None:
    declared = declared_checks([paths.TESTS_DIR])
    ucx = declared["UcxPerftestCheck"]
    assert ucx.params["test"] == {"tag_lat", "tag_bw", "ucp_put_lat", "ucp_put_bw"}
    assert ucx.params["hca"] is None  # the topology's HCAs: any value
    assert {"latency", "bandwidth"} <= ucx.metrics
    assert declared["GpcnetCheck"].metrics is None  # built at run time: any
    assert "MeasuredCheck" not in declared  # a base, no test


def test_a_name_nothing_has_is_named_with_what_is_known() -> None:
    declared = declared_checks([paths.TESTS_DIR])
    none = Stored(False, [], [], {})
    assert unknown(threshold(params={"test": "tag_lat"}), none, declared, {"local"}) is None
    assert "system 'lcoal' (known: local)" in unknown(threshold(system="lcoal"), none,
                                                      declared, {"local"})
    assert "UcxPerftestCheck" in unknown(threshold(check="Ucx"), none, declared, {"local"})
    said = unknown(threshold(params={"test": "tag"}), none, declared, {"local"})
    assert "parameter test=tag of UcxPerftestCheck" in said and "tag_lat" in said
    said = unknown(threshold(metric="latnecy"), none, declared, {"local"})
    assert said.startswith("metric 'latnecy' of UcxPerftestCheck") and "latency" in said
    stored = Stored(True, ["PlainCheck"], [{"n": "1"}], {"gflops": "GFLOPS"})
    assert unknown(threshold(check="PlainCheck", metric="gflops", params={"n": "1"}),
                   stored, declared, set()) is None


@pytest.mark.parametrize("reference, better", [
    ((1e9, -0.1, None, "MB/s"), "higher"), ((2.0, None, 0.1, "us"), "lower"),
    ((1.0, -0.1, 0.1, "us"), None), ((0, None, None, ""), None)])
def test_a_one_sided_reference_says_which_way_is_better(reference: tuple,
                                                         better: str | None) -> None:
    assert bounds_direction(reference) == better
