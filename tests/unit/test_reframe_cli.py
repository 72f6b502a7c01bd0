"""perfguard's ReFrame launcher: ReFrame's deprecation warnings asked for only where a
filter would show them (perfguard/run/reframe_cli.py), never lost where it would."""

import inspect
import sys
import warnings

import pytest
import reframe.core.variables
import reframe.core.warnings as rfm_warnings
import reframe.frontend.cli  # noqa: F401  (every module that imports the warning function)

from perfguard.run import reframe as run_reframe
from perfguard.run.reframe_cli import cheap_deprecations


@pytest.fixture(autouse=True)
def restored(monkeypatch) -> None:
    """ReFrame's modules as they were after each test (the replacement is per process)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("reframe") and hasattr(module, "user_deprecation_warning"):
            monkeypatch.setattr(module, "user_deprecation_warning",
                                module.user_deprecation_warning)


def test_the_launcher_is_perfguards() -> None:
    assert run_reframe.reframe_launcher() == [sys.executable, "-m", "perfguard.run.reframe_cli"]


def test_an_ignored_deprecation_does_not_walk_the_stack(monkeypatch) -> None:
    """Before: ReFrame's user_deprecation_warning called inspect.stack() (every frame's
    source read) for each warning, ignored or not: twice for every test variant."""
    assert cheap_deprecations() >= 2  # reframe.core.variables and reframe.core.fields
    walked = []
    monkeypatch.setattr(inspect, "stack", lambda *a, **k: walked.append(1) or [])
    with rfm_warnings.suppress_deprecations():
        sys.modules["reframe.core.variables"].user_deprecation_warning("ignored")
    assert walked == []


def test_a_deprecation_that_would_show_still_shows(monkeypatch) -> None:
    assert cheap_deprecations() >= 2
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with pytest.warns(rfm_warnings.ReframeDeprecationWarning, match="shown"):
            reframe.core.variables.user_deprecation_warning("shown")
