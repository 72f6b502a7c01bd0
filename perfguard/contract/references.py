"""References reach the checks as a file that `perfguard run` writes before ReFrame starts.

The file holds every key-figure threshold of the system in force when the run starts, in
the database's order of precedence (most specific, then newest, then last stored; the
order ``matching_threshold()`` uses). A check takes, per metric, the first row whose
scope covers it (partition and environ unset or equal, every threshold parameter equal
to the check's): the scope test of ``matching_threshold()``, held equal to it by
tests/system/test_thresholds.py. The checks so need no database driver and no connection.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

#: The environment variable `perfguard run` names the run's references file in.
REFERENCES_ENV = "PERFGUARD_REFERENCES"


@dataclass(frozen=True)
class Reference:
    """One threshold row as a check needs it."""
    check: str
    metric: str
    partition: str | None
    environ: str | None
    params: dict[str, str]
    #: ReFrame's (reference, lower fraction, upper fraction, unit)
    reframe: tuple[float, float | None, float | None, str]

    def covers(self, check: str, params: dict[str, str], partition: str,
               environ: str) -> bool:
        return (self.check == check
                and self.partition in (None, partition) and self.environ in (None, environ)
                and all(params.get(k) == v for k, v in self.params.items()))


@dataclass(frozen=True)
class References:
    """The run's references file: rows in precedence order, or why there are none."""
    rows: tuple[Reference, ...] = ()
    unavailable: str | None = None

    def for_test(self, check: str, params: dict[str, str], partition: str, environ: str,
                 metrics: list[str]) -> dict[str, tuple]:
        """Metric → ReFrame reference tuple of the first row that covers the test."""
        found: dict[str, tuple] = {}
        for row in self.rows:
            if row.metric in metrics and row.metric not in found \
                    and row.covers(check, params, partition, environ):
                found[row.metric] = row.reframe
        return found

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"unavailable": self.unavailable,
                                    "rows": [row.__dict__ for row in self.rows]}, indent=1))
        return path

    @classmethod
    def read(cls, path: Path) -> References:
        data = json.loads(path.read_text())
        rows = tuple(Reference(**{**row, "reframe": tuple(row["reframe"])})
                     for row in data["rows"])
        return cls(rows, data.get("unavailable"))


def bounds_direction(reference: tuple) -> str | None:
    """Which way is better, as a ReFrame reference ``(ref, lower, upper[, unit])`` bounds
    it: a lower bound alone guards against less (higher is better), an upper bound alone
    against more (lower is better); both or neither say nothing."""
    lower, upper = reference[1], reference[2]
    if (lower is None) == (upper is None):
        return None
    return "higher" if lower is not None else "lower"


def run_references() -> References:
    """This run's references: the file ``$PERFGUARD_REFERENCES`` names, or none and why."""
    name = os.environ.get(REFERENCES_ENV)
    if not name:
        return References(unavailable=f"${REFERENCES_ENV} is not set (reframe was not "
                                      f"started by `perfguard run`)")
    try:
        return References.read(Path(name))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return References(unavailable=f"references file {name} cannot be read: {exc}")
