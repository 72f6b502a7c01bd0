"""Reference thresholds: stored in PostgreSQL with full history, exchanged as YAML.

Setting a threshold whose scope already has a current row closes that row
(valid_to = now) and opens a new one in the same transaction.
"""

from __future__ import annotations

import getpass
import math
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from perfguard.contract.references import Reference, References
from perfguard.errors import PerfguardError, UsageError
from perfguard.store import queries
from perfguard.store.queries import Connection
from perfguard.yamlfile import dump_yaml, load_yaml

DIRECTIONS = ("higher", "lower")
BOUNDS = ("fraction", "absolute")


@dataclass
class Threshold:
    system: str
    check: str
    metric: str
    reference: float
    direction: str
    partition: str | None = None
    environ: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    point: dict[str, Any] | None = None
    lower: float | None = None
    upper: float | None = None
    bounds: str = "fraction"
    unit: str = ""
    author: str = field(default_factory=getpass.getuser)
    reason: str = ""
    id: int | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None

    def validate(self, where: str) -> Threshold:
        """Refuse what cannot be a threshold; every message names ``where``."""
        self._validate_types(where)
        if self.direction not in DIRECTIONS:
            raise UsageError(f"{where}: direction must be one of {DIRECTIONS}, "
                             f"not {self.direction!r}")
        if self.bounds not in BOUNDS:
            raise UsageError(f"{where}: bounds must be one of {BOUNDS}, not {self.bounds!r}")
        for name in ("reference", "lower", "upper"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise UsageError(f"{where}: {name} must be a finite number")
        if self.lower is None and self.upper is None:
            raise UsageError(f"{where}: give at least one of lower/upper bound")
        self._validate_order(where)
        return self

    def _validate_types(self, where: str) -> None:
        for name in ("system", "check", "metric", "direction", "bounds", "unit", "author",
                     "reason"):
            if not isinstance(getattr(self, name), str):
                raise UsageError(f"{where}: {name} must be a string, "
                                 f"not {getattr(self, name)!r}")
        for name in ("partition", "environ"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise UsageError(f"{where}: {name} must be a string")
        if not self.check or not self.metric:
            raise UsageError(f"{where}: check and metric must not be empty")
        if not isinstance(self.params, dict) or not all(
                isinstance(v, str) for v in self.params.values()):
            raise UsageError(f"{where}: params must map parameter names to values")
        if self.point is not None and (not isinstance(self.point, dict) or not all(
                isinstance(v, (str, int, float)) for v in self.point.values())):
            raise UsageError(f"{where}: point must map coordinates to numbers or strings")
        for name in ("reference", "lower", "upper"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, (int, float))):
                raise UsageError(f"{where}: {name} must be a number, not {value!r}")

    def _validate_order(self, where: str) -> None:
        """lower ≤ reference ≤ upper, and no negative time, size or rate."""
        if self.bounds == "fraction" and ((self.lower or 0) > 0 or (self.upper or 0) < 0):
            raise UsageError(f"{where}: a lower bound must be ≤ 0% and an upper bound ≥ 0% "
                             f"of the reference (lower {self.lower}, upper {self.upper})")
        low, high = self.limits()
        if (low is not None and low > self.reference) or (
                high is not None and high < self.reference):
            raise UsageError(f"{where}: bounds must satisfy lower ≤ reference ≤ upper "
                             f"(lower {low}, reference {self.reference}, upper {high})")
        if is_magnitude_unit(self.unit):
            negative = [(n, v) for n, v in (("reference", self.reference), ("lower", low),
                                            ("upper", high)) if v is not None and v < 0]
            if self.reference <= 0 or negative:
                raise UsageError(f"{where}: a {self.unit} value cannot be negative or zero "
                                 f"(reference {self.reference}, lower {low}, upper {high})")

    def limits(self) -> tuple[float | None, float | None]:
        """Absolute lower and upper limits."""
        if self.bounds == "absolute":
            return self.lower, self.upper
        ref = self.reference
        return (None if self.lower is None else ref + abs(ref) * self.lower,
                None if self.upper is None else ref + abs(ref) * self.upper)

    def as_reframe(self) -> tuple[float, float | None, float | None, str]:
        """ReFrame's (ref, lower_fraction, upper_fraction, unit) reference tuple."""
        if self.bounds == "fraction":
            return (self.reference, self.lower, self.upper, self.unit)
        low, high = self.limits()
        ref = self.reference

        def frac(limit: float | None) -> float | None:
            return None if limit is None or ref == 0 else (limit - ref) / abs(ref)

        return (ref, frac(low), frac(high), self.unit)

    def scope(self) -> str:
        parts = [self.system, self.partition or "*", self.environ or "*", self.check]
        scope = ":".join(parts)
        if self.params:
            scope += " " + " ".join(f"%{k}={v}" for k, v in sorted(self.params.items()))
        if self.point:
            scope += " @" + ",".join(f"{k}={v}" for k, v in sorted(self.point.items()))
        return f"{scope} {self.metric}"


def _from_row(row: dict) -> Threshold:
    return Threshold(
        id=row["id"], system=row["system"], partition=row["partition"], environ=row["environ"],
        check=row["check_name"], params=row["params"], metric=row["metric"], point=row["point"],
        reference=row["reference"], lower=row["lower"], upper=row["upper"],
        bounds=row["bounds"], unit=row["unit"], direction=row["direction"],
        valid_from=row["valid_from"], valid_to=row["valid_to"], author=row["author"],
        reason=row["reason"])


def _scope_args(t: Threshold) -> dict[str, Any]:
    return {"system": t.system, "partition": t.partition, "environ": t.environ,
            "check": t.check, "params": queries.json(t.params), "metric": t.metric,
            "point": queries.json(t.point) if t.point is not None else None}


def set_threshold(conn: Connection, t: Threshold) -> tuple[Threshold, bool]:
    """Close the current row of this scope (if it differs) and open a new one.

    Returns the current threshold and whether anything changed; setting the
    same values again is a no-op, so importing a file twice keeps history clean.
    """
    t.validate(t.scope())
    with conn.transaction():
        current = queries.first(conn, "current_threshold_of_scope", _scope_args(t))
        if current and _same_values(_from_row(current), t):
            return _from_row(current), False
        if current:
            queries.execute(conn, "close_threshold", (current["id"],))
        row = queries.first(conn, "insert_threshold", {
            **_scope_args(t), "reference": t.reference, "lower": t.lower, "upper": t.upper,
            "bounds": t.bounds, "unit": t.unit, "direction": t.direction, "author": t.author,
            "reason": t.reason})
    return _from_row(row), True


def set_all(conn: Connection, thresholds: list[Threshold], source: str) -> int:
    """Set every threshold of a file in one transaction: all of them or none.
    Returns how many changed."""
    try:
        with conn.transaction():
            return sum(set_threshold(conn, t)[1] for t in thresholds)
    except queries.DatabaseError as exc:
        raise PerfguardError(f"{source}: nothing imported, the database refused an entry: "
                             f"{exc}") from exc


def delete(conn: Connection, threshold_id: int) -> Threshold:
    """End a threshold in force now (valid_to = now): runs that start later are judged
    without it, the runs before it keep it, and its row stays in the history."""
    t = get(conn, threshold_id)
    if t.valid_to is not None:
        raise UsageError(f"threshold #{threshold_id} ended {t.valid_to:%Y-%m-%d %H:%M} "
                         f"already (`perfguard thresholds list` shows those in force)")
    with conn.transaction():
        queries.execute(conn, "close_threshold", (threshold_id,))
    return get(conn, threshold_id)


def _same_values(a: Threshold, b: Threshold) -> bool:
    keys = ("reference", "lower", "upper", "bounds", "unit", "direction")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def current(conn: Connection, system: str | None = None,
            check: str | None = None) -> list[Threshold]:
    return _select(conn, True, system, check)


def history(conn: Connection, system: str | None = None,
            check: str | None = None) -> list[Threshold]:
    return _select(conn, False, system, check)


def get(conn: Connection, threshold_id: int) -> Threshold:
    row = queries.first(conn, "threshold_by_id", (threshold_id,))
    if row is None:
        raise UsageError(f"no threshold #{threshold_id} (`perfguard thresholds history` "
                         f"lists every one)")
    return _from_row(row)


def _select(conn: Connection, in_force_only: bool, system: str | None,
            check: str | None) -> list[Threshold]:
    rows = queries.rows(conn, "thresholds", {"in_force_only": in_force_only, "system": system,
                                             "check": check})
    return [_from_row(r) for r in rows]


# --- YAML exchange ---------------------------------------------------------------
_YAML_KEYS = ("check", "partition", "environ", "params", "metric", "point", "reference",
              "lower", "upper", "bounds", "unit", "direction", "author", "reason")


def to_yaml(system: str, thresholds: list[Threshold]) -> str:
    entries = []
    for t in thresholds:
        data = asdict(t)
        entries.append({k: data[k] for k in _YAML_KEYS if data[k] not in (None, {}, "")})
    return dump_yaml({"system": system, "thresholds": entries})


def from_yaml(path: Path) -> list[Threshold]:
    """Every entry of a thresholds file, all validated before any is used."""
    data = load_yaml(path, "thresholds", schema="thresholds")
    return [_entry(data["system"], entry, f"{path}: thresholds[{i}]")
            for i, entry in enumerate(data["thresholds"])]


def _entry(system: str, entry: dict, where: str) -> Threshold:
    """One entry of a file its schema passed: parameters as the checks name them."""
    values = {k: entry[k] for k in _YAML_KEYS if k in entry}
    values["params"] = {str(k): str(v) for k, v in (entry.get("params") or {}).items()}
    for key in ("reference", "lower", "upper"):
        if isinstance(values.get(key), int) and not isinstance(values[key], bool):
            values[key] = float(values[key])
    return Threshold(system=str(system), **values).validate(where)


def parse_bound(text: str | None, option: str = "bound") -> tuple[float | None, bool]:
    """'10%' → (0.10, fraction) ; '-5%' → (-0.05, fraction) ; '3.2' → (3.2, absolute)."""
    if text is None or text == "":
        return None, False
    text = text.strip()
    is_fraction = text.endswith("%")
    try:
        value = float(text[:-1] if is_fraction else text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected a number such as 5.2 or a "
                         f"percentage such as -10%") from None
    if not math.isfinite(value):
        raise UsageError(f"{option} {text!r}: must be a finite number")
    return (value / 100.0 if is_fraction else value), is_fraction


_MAGNITUDE_UNIT = re.compile(r"(?i)^(?:[num]?s|sec|usec|msec|[kmgtp]?i?b|bytes?|\w*flops|"
                             r"[^/]+/s(?:ec)?)$")


def is_magnitude_unit(unit: str) -> bool:
    """Times, sizes, bandwidths, rates and FLOPS: never negative (unlike %, or no unit)."""
    return bool(_MAGNITUDE_UNIT.match(unit.strip()))


def declared_direction(conn: Connection, check: str, metric: str) -> str | None:
    """Which way ``metric`` of ``check`` is better, as the check declared it (None: no run
    of the check has been stored since it declared it)."""
    row = queries.one(conn, "metric_direction", (check, metric))
    return row[0] if row else None



def derive(conn: Connection, run_id: int, tolerance: float, author: str,
           reason: str, history: int = 1, sigmas: float = 4.0,
           minimum: int = 8) -> tuple[list[Threshold], list[str]]:
    """Thresholds proposed for every key figure of a run, one-sided in the direction its
    check declares: ``reference ± tolerance`` from the run alone (``history`` 1), or from
    the last ``history`` runs of each series: their median, and a bound ``sigmas`` noise
    (perfguard.judge.baseline) on the worse side, never tighter than 1 %. Also says what
    was left out and why."""
    from perfguard.judge.rules import baseline

    proposals, notes = [], []
    rows = queries.rows(conn, "key_figure_history", {"run_id": run_id, "count": history})
    for row in rows:
        scope = f"{row['check_name']} {row['metric']} {row['params']}"
        if row["better"] is None:
            notes.append(f"{scope}: its check declares no direction, left out")
            continue
        if history > 1 and len(row["history"]) < minimum:
            notes.append(f"{scope}: {len(row['history'])} runs of history, {minimum} needed")
            continue
        centre, band = row["value"], tolerance
        if history > 1:
            centre, noise = baseline(row["history"])
            band = max(sigmas * noise / abs(centre), 0.01) if centre else 0.01
        higher = row["better"] == "higher"
        proposals.append(Threshold(
            system=row["system"], partition=row["partition"], environ=row["environ"],
            check=row["check_name"], params=row["params"], metric=row["metric"],
            reference=centre, direction=row["better"], unit=row["unit"],
            lower=-band if higher else None, upper=None if higher else band,
            author=author, reason=reason))
    return proposals, notes


def references_in_force(conn: Connection, system: str) -> References:
    """The system's key-figure thresholds in force now, in matching_threshold()'s order of
    precedence: what `perfguard run` hands its checks (perfguard.contract.references)."""
    rows = queries.rows(conn, "references_in_force", (system,))
    return References(tuple(
        Reference(t.check, t.metric, t.partition, t.environ, t.params, t.as_reframe())
        for t in map(_from_row, rows)))
