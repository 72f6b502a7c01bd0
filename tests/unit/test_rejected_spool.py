"""The rejected reports (spool/rejected/) kept under one total cap, oldest removed first
and said (issue 67, item 5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfguard.store import spool


def test_the_cap_is_on_all_rejected_reports_together_the_oldest_removed_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$PERFGUARD_REJECTED_MAX_MB is for all rejected copies together: a third report of
    0.4 MiB under a 1 MiB cap removes the oldest, says which and how much it freed, and
    keeps the newest whole. Before, the cap was per copy: 1.2 MiB stayed."""
    monkeypatch.setenv(spool.REJECTED_MAX_MB_ENV, "1")
    state = tmp_path / "state"
    parked = []
    for n in range(3):
        report = tmp_path / f"r{n}.json"
        report.write_bytes(b" " * (4 * 2 ** 20 // 10))
        parked.append(spool.reject(state, report, f"bad {n}"))
        path = getattr(parked[-1], "path", parked[-1])
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # oldest first
    total = sum(k.size for k in spool.kept(state))
    assert total <= 2 ** 20, f"{total / 2 ** 20:.2f} MiB rejected kept under a 1 MiB cap"
    kept = spool.rejected(state)
    assert parked[0].path not in kept and parked[1].path in kept and parked[2].path in kept
    assert parked[2].path.stat().st_size == 4 * 2 ** 20 // 10  # the newest whole
    assert [p for p, _ in parked[2].removed] == [parked[0].path]
    assert parked[2].said() == (f"removed the oldest rejected report(s) to keep them under "
                                f"$PERFGUARD_REJECTED_MAX_MB (1 MiB together): "
                                f"{parked[0].path.name} (0.4 MiB); 0.4 MiB freed")
    assert not spool.reason_path(parked[0].path).exists()
