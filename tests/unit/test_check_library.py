"""The check library reads top to bottom: an OMB check stands on its benchmark's class and
one base (issue 41: it inherited 11 perfguard classes, 8 of them plugins setting each
other's variables), and the base's hooks run in the order its docstring says."""

from __future__ import annotations

from reframe_tests.common import base
from reframe_tests.common.base import LaunchedCheck, MeasuredCheck
from reframe_tests.omb.osu import OsuPt2PtCheck
from reframe_tests.sanity.mpi_hello import MpiHelloCheck


def perfguard_bases(check: type) -> list[str]:
    return [c.__name__ for c in check.__mro__[1:] if c.__module__.startswith("reframe_tests")]


def test_an_omb_check_inherits_three_perfguard_classes() -> None:
    assert perfguard_bases(OsuPt2PtCheck) == ["OsuBenchmark", "MeasuredCheck", "LaunchedCheck"]
    assert perfguard_bases(MpiHelloCheck) == ["LaunchedCheck"]  # no binaries, no measurement


def test_the_bases_hooks_are_the_documented_handful() -> None:
    hooks = [hook.__name__ for hook in MeasuredCheck._rfm_hook_registry]
    assert sorted(hooks) == sorted([
        "maintained_by_perfguard", "one_core_per_task", "compose_the_job",
        "limit_the_job_time", "read_what_the_job_left", "measured_by_perfguard",
        "take_the_measurement_slot",
        "skip_where_a_program_was_missing", "references_and_directions"])
    assert all(f"``{hook}``" in base.__doc__ for hook in hooks)
    assert {h.__name__ for h in LaunchedCheck._rfm_hook_registry} < set(hooks)
