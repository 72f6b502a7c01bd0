"""The spool: reports waiting to be stored, and those parked because they never can be.

A report that cannot be stored now is copied here under a name of its own (two
reports both called report.json stay two), its metadata beside it under the same
name, the reason last; files appear whole (written aside, then renamed) and are
private (0600 in 0700 directories: reasons may name hosts and users). Rejected reports
(they can never be stored) are kept for diagnosis only up to ``$PERFGUARD_REJECTED_MAX_MB``
(default 16 MiB) all together: a copy larger than that is cut off and its reason says so,
and the oldest copies are removed to make room for a new one (said by ``reject``).
`perfguard spool list` shows what is kept, `perfguard spool purge` removes it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from perfguard.errors import UsageError
from perfguard.secrets import redact_secrets, write_private

META_SUFFIX = ".meta.json"
REASON_SUFFIX = ".reason"


def meta_path(report: Path) -> Path:
    """The run metadata (trigger, labels, leaf switches) kept beside a report."""
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


#: The most of the rejected reports kept together, in MiB (a larger copy is cut off, the
#: reason says so; the oldest are removed to make room).
REJECTED_MAX_MB_ENV = "PERFGUARD_REJECTED_MAX_MB"
DEFAULT_REJECTED_MAX_MB = 16.0


def rejected_cap() -> int:
    """``$PERFGUARD_REJECTED_MAX_MB`` (default 16) in bytes: how much of the rejected
    reports is kept, all of them together. A report that can never be stored is evidence,
    not data: two 200 MB probes left 401 MB in the spool before, and a cap per copy let a
    hundred bad nights keep 1.6 GB."""
    text = os.environ.get(REJECTED_MAX_MB_ENV, str(DEFAULT_REJECTED_MAX_MB))
    try:
        cap = float(text)
    except ValueError:
        cap = -1.0
    if not cap >= 0:
        raise UsageError(f"{REJECTED_MAX_MB_ENV}={text!r}: expected a number of MiB (0 or "
                         f"more) to keep of the rejected reports together")
    return int(cap * 2 ** 20)


def _atomic_copy(source: Path, target: Path, limit: int | None = None) -> None:
    """Copy (its first ``limit`` bytes) under a temporary name, then rename: a crash
    leaves no half file."""
    tmp = target.with_name(f".{target.name}.tmp")
    if limit is None:
        shutil.copyfile(source, tmp)
    else:
        with open(source, "rb") as whole, open(tmp, "wb") as kept:
            kept.write(whole.read(limit))
    tmp.chmod(0o600)
    os.replace(tmp, target)


def _keep(directory: Path, report: Path, reason: str, from_spool: bool,
          limit: int | None = None) -> Path:
    """Put a report and its metadata into ``directory`` with the reason beside it: a copy
    under a unique name, or — for a report already in the spool — moved by its name; of
    a report larger than ``limit`` bytes only its first ``limit`` are kept, and the reason
    says so. Files appear whole (written aside, then renamed), the reason last."""
    _private_dir(directory)
    target = directory / (report.name if from_spool else _unique_name(report))
    size = report.stat().st_size
    cut = limit is not None and size > limit
    if report.resolve() != target.resolve():
        if meta_path(report).exists():
            _atomic_copy(meta_path(report), meta_path(target))
        _atomic_copy(report, target, limit if cut else None)
        if from_spool:
            unspool(report)
    elif cut:
        os.truncate(target, limit)
    if cut:
        reason += (f" [{TRUNCATED}: kept the first {limit / 2 ** 20:g} of "
                   f"{size / 2 ** 20:.1f} MiB, ${REJECTED_MAX_MB_ENV}]")
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write_private(reason_path(target), f"{stamp} {redact_secrets(reason)}\n")
    return target


#: How the reason of a rejected report kept only in part says so.
TRUNCATED = "truncated"


def in_spool(state: Path, report: Path) -> bool:
    return report.parent.resolve() == spool_dir(state).resolve()


def spool(state: Path, report: Path, reason: str) -> Path:
    """Keep a copy of a report that could not be stored now, for `ingest --spool`."""
    return _keep(spool_dir(state), report, reason, in_spool(state, report))


@dataclass(frozen=True)
class Rejected:
    """A report parked as rejected (``path``), and the older rejected reports removed to
    keep them all under the cap (each path and the bytes it freed, oldest first)."""
    path: Path
    removed: tuple[tuple[Path, int], ...] = ()
    cap: int = 0

    def said(self) -> str:
        """What was removed to make room ('' where nothing was)."""
        if not self.removed:
            return ""
        names = ", ".join(f"{p.name} ({size / 2 ** 20:.1f} MiB)" for p, size in self.removed)
        freed = sum(size for _, size in self.removed)
        return (f"removed the oldest rejected report(s) to keep them under "
                f"${REJECTED_MAX_MB_ENV} ({self.cap / 2 ** 20:g} MiB together): {names}; "
                f"{freed / 2 ** 20:.1f} MiB freed")


def reject(state: Path, report: Path, reason: str) -> Rejected:
    """Park a report that can never be stored, with the reason; never retried. All
    rejected reports together are kept up to ``rejected_cap()`` bytes: a larger copy is
    cut off (said in its reason), and the oldest others are removed until the rest fits
    (said by ``Rejected.said``)."""
    cap = rejected_cap()
    parked = _keep(rejected_dir(state), report, reason, in_spool(state, report), cap)
    return Rejected(parked, tuple(_trim_rejected(state, parked, cap)), cap)


def _footprint(report: Path) -> int:
    """A kept report's bytes with its metadata and reason."""
    return sum(p.stat().st_size for p in (report, meta_path(report), reason_path(report))
               if p.exists())


def _trim_rejected(state: Path, newest: Path, cap: int) -> list[tuple[Path, int]]:
    """Remove the oldest rejected reports (by when they were parked), never ``newest``,
    until all of them together fit ``cap`` bytes: each removed and its bytes."""
    others = sorted((p for p in rejected(state) if p != newest),
                    key=lambda p: (p.stat().st_mtime_ns, p.name))
    sizes = {p: _footprint(p) for p in [*others, newest]}
    total = sum(sizes.values())
    removed = []
    for old in others:
        if total <= cap:
            break
        unspool(old)
        total -= sizes[old]
        removed.append((old, sizes[old]))
    return removed


def _listed(directory: Path) -> list[Path]:
    if not directory.exists():
        return []
    return sorted(p for p in directory.glob("*.json")
                  if not p.name.endswith(META_SUFFIX) and not p.name.startswith("."))


def spooled(state: Path) -> list[Path]:
    return _listed(spool_dir(state))


def rejected(state: Path) -> list[Path]:
    return _listed(rejected_dir(state))


@dataclass(frozen=True)
class Kept:
    """A report in the spool: waiting to be stored (``ingest --spool``) or rejected."""
    path: Path
    rejected: bool
    size: int
    reason: str

    @property
    def line(self) -> str:
        """One line of `perfguard spool list`."""
        kind = "rejected" if self.rejected else "waiting"
        return f"{kind:<8}  {self.size / 2 ** 20:>8.1f} MiB  {self.path}: {self.reason}"


def kept(state: Path) -> list[Kept]:
    """Every report the spool holds, waiting ones first, each with its reason."""
    def one(path: Path, is_rejected: bool) -> Kept:
        why = reason_path(path)
        reason = why.read_text().strip() if why.exists() else "(no reason recorded)"
        return Kept(path, is_rejected, path.stat().st_size, reason)

    return [one(p, False) for p in spooled(state)] + [one(p, True) for p in rejected(state)]


def purge(state: Path, waiting: bool = False, older_than_days: float | None = None
          ) -> list[Kept]:
    """Remove the rejected reports (and with ``waiting`` those waiting to be stored: they
    are lost), only those older than ``older_than_days`` if given: what was removed."""
    cutoff = None if older_than_days is None else time.time() - older_than_days * 86400
    gone = [k for k in kept(state) if (k.rejected or waiting)
            and (cutoff is None or k.path.stat().st_mtime < cutoff)]
    for found in gone:
        unspool(found.path)
    return gone


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
