"""The nightly's schedule, pure: cron fields as cron reads them."""

from __future__ import annotations

from datetime import datetime

import pytest

from perfguard.errors import PerfguardError
from perfguard.workflows.schedule import next_occurrence


def test_cron_schedule() -> None:
    after = datetime(2026, 11, 21, 23, 59, 30)  # a Saturday
    assert next_occurrence("30 2 * * *", after) == datetime(2026, 11, 22, 2, 30)
    assert next_occurrence("0 1 * * 1-5", after) == datetime(2026, 11, 23, 1, 0)
    assert next_occurrence("*/15 * * * *", after) == datetime(2026, 11, 22, 0, 0)
    with pytest.raises(PerfguardError, match="expected 5 cron fields"):
        next_occurrence("30 2 * *", after)

def test_cron_day_of_month_or_day_of_week_and_month_names() -> None:
    """cron ORs a restricted day of month with a restricted day of week."""
    after = datetime(2026, 11, 22, 12, 0)  # Sunday
    assert next_occurrence("0 1 1 * 1", after) == datetime(2026, 11, 23, 1, 0)  # a Monday
    assert next_occurrence("0 1 1 jan *", after) == datetime(2027, 1, 1, 1, 0)
    with pytest.raises(PerfguardError, match="is not a cron schedule"):
        next_occurrence("0 1 * mon *", after)  # 'mon' is a weekday, not a month
