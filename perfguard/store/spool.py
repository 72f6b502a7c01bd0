"""The spool: reports waiting to be stored, and those parked because they never can be.

A report that cannot be stored now is copied here under a name of its own (two
reports both called report.json stay two), its metadata beside it under the same
name, the reason last; files appear whole (written aside, then renamed) and are
private (0600 in 0700 directories: reasons may name hosts and users).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from perfguard.secrets import redact_secrets, write_private

META_SUFFIX = ".meta.json"
REASON_SUFFIX = ".reason"


def meta_path(report: Path) -> Path:
    """The run metadata (trigger, labels) kept beside a report."""
    return report.with_name(report.name + META_SUFFIX)


def reason_path(report: Path) -> Path:
    """Why a spooled or parked report is there."""
    return report.with_name(report.name + REASON_SUFFIX)


def spool_dir(state: Path) -> Path:
    return state / "spool"


def rejected_dir(state: Path) -> Path:
    return spool_dir(state) / "rejected"


def archive_dir(state: Path) -> Path:
    """Where reports stored from the spool are kept (run.report_path points here)."""
    return state / "reports"


def _unique_name(report: Path) -> str:
    """Spool names never collide: two reports both called report.json stay two."""
    return f"{uuid.uuid4().hex[:12]}-{report.name}"


def _private_dir(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    return directory


def _atomic_copy(source: Path, target: Path) -> None:
    """Copy under a temporary name, then rename: a crash leaves no half file."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, tmp)
    tmp.chmod(0o600)
    os.replace(tmp, target)


def _keep(directory: Path, report: Path, reason: str, from_spool: bool) -> Path:
    """Put a report and its metadata into ``directory`` with the reason beside it: a copy
    under a unique name, or — for a report already in the spool — moved by its name.
    Files appear whole (written aside, then renamed), the reason last."""
    _private_dir(directory)
    target = directory / (report.name if from_spool else _unique_name(report))
    if report.resolve() != target.resolve():
        if meta_path(report).exists():
            _atomic_copy(meta_path(report), meta_path(target))
        _atomic_copy(report, target)
        if from_spool:
            unspool(report)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write_private(reason_path(target), f"{stamp} {redact_secrets(reason)}\n")
    return target


def in_spool(state: Path, report: Path) -> bool:
    return report.parent.resolve() == spool_dir(state).resolve()


def spool(state: Path, report: Path, reason: str) -> Path:
    """Keep a copy of a report that could not be stored now, for `ingest --spool`."""
    return _keep(spool_dir(state), report, reason, in_spool(state, report))


def reject(state: Path, report: Path, reason: str) -> Path:
    """Park a report that can never be stored, with the reason; never retried."""
    return _keep(rejected_dir(state), report, reason, in_spool(state, report))


def _listed(directory: Path) -> list[Path]:
    if not directory.exists():
        return []
    return sorted(p for p in directory.glob("*.json")
                  if not p.name.endswith(META_SUFFIX) and not p.name.startswith("."))


def spooled(state: Path) -> list[Path]:
    return _listed(spool_dir(state))


def rejected(state: Path) -> list[Path]:
    return _listed(rejected_dir(state))


def unspool(report: Path) -> None:
    for path in (report, meta_path(report), reason_path(report)):
        path.unlink(missing_ok=True)


def archive(state: Path, report: Path) -> Path:
    """Move a stored report out of the spool to where run.report_path says it is."""
    target = _private_dir(archive_dir(state)) / report.name
    if meta_path(report).exists():
        os.replace(meta_path(report), meta_path(target))
    os.replace(report, target)
    reason_path(report).unlink(missing_ok=True)
    return target


@contextmanager
def spool_lock(state: Path) -> Iterator[None]:
    """One `ingest --spool` at a time per state directory (cron jobs may overlap)."""
    with open(_private_dir(spool_dir(state)) / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
