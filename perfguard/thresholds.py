"""Reference thresholds: stored in PostgreSQL with full history, exchanged as YAML.

Setting a threshold whose scope already has a current row closes that row
(valid_to = now) and opens a new one in the same transaction.
"""

from __future__ import annotations

import getpass
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from perfguard.errors import PerfguardError

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
        if self.direction not in DIRECTIONS:
            raise PerfguardError(f"{where}: direction must be one of {DIRECTIONS}, "
                                 f"not {self.direction!r}")
        if self.bounds not in BOUNDS:
            raise PerfguardError(f"{where}: bounds must be one of {BOUNDS}, not {self.bounds!r}")
        for name in ("reference", "lower", "upper"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise PerfguardError(f"{where}: {name} must be a finite number")
        if self.lower is None and self.upper is None:
            raise PerfguardError(f"{where}: give at least one of lower/upper bound")
        return self

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


_COLUMNS = ("id, system, partition, environ, check_name, params, metric, point, reference, "
            "lower, upper, bounds, unit, direction, valid_from, valid_to, author, reason")


def _from_row(row: dict) -> Threshold:
    return Threshold(
        id=row["id"], system=row["system"], partition=row["partition"], environ=row["environ"],
        check=row["check_name"], params=row["params"], metric=row["metric"], point=row["point"],
        reference=row["reference"], lower=row["lower"], upper=row["upper"],
        bounds=row["bounds"], unit=row["unit"], direction=row["direction"],
        valid_from=row["valid_from"], valid_to=row["valid_to"], author=row["author"],
        reason=row["reason"])


_SAME_SCOPE = """system = %(system)s AND coalesce(partition, '') = coalesce(%(partition)s, '')
    AND coalesce(environ, '') = coalesce(%(environ)s, '') AND check_name = %(check)s
    AND params = %(params)s AND metric = %(metric)s
    AND coalesce(point, 'null'::jsonb) = coalesce(%(point)s, 'null'::jsonb)"""


def _scope_args(t: Threshold) -> dict[str, Any]:
    return {"system": t.system, "partition": t.partition, "environ": t.environ,
            "check": t.check, "params": Jsonb(t.params), "metric": t.metric,
            "point": Jsonb(t.point) if t.point is not None else None}


def set_threshold(conn: psycopg.Connection, t: Threshold) -> tuple[Threshold, bool]:
    """Close the current row of this scope (if it differs) and open a new one.

    Returns the current threshold and whether anything changed; setting the
    same values again is a no-op, so importing a file twice keeps history clean.
    """
    t.validate(t.scope())
    with conn.transaction():
        current = conn.cursor(row_factory=dict_row).execute(
            f"SELECT {_COLUMNS} FROM threshold WHERE {_SAME_SCOPE} AND valid_to IS NULL "
            f"FOR UPDATE", _scope_args(t)).fetchone()
        if current and _same_values(_from_row(current), t):
            return _from_row(current), False
        if current:
            conn.execute("UPDATE threshold SET valid_to = now() WHERE id = %s", (current["id"],))
        row = conn.cursor(row_factory=dict_row).execute(
            f"""INSERT INTO threshold (system, partition, environ, check_name, params, metric,
                    point, reference, lower, upper, bounds, unit, direction, author, reason)
                VALUES (%(system)s, %(partition)s, %(environ)s, %(check)s, %(params)s,
                    %(metric)s, %(point)s, %(reference)s, %(lower)s, %(upper)s, %(bounds)s,
                    %(unit)s, %(direction)s, %(author)s, %(reason)s)
                RETURNING {_COLUMNS}""",
            {**_scope_args(t), "reference": t.reference, "lower": t.lower, "upper": t.upper,
             "bounds": t.bounds, "unit": t.unit, "direction": t.direction,
             "author": t.author, "reason": t.reason}).fetchone()
    return _from_row(row), True


def _same_values(a: Threshold, b: Threshold) -> bool:
    keys = ("reference", "lower", "upper", "bounds", "unit", "direction")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def current(conn: psycopg.Connection, system: str | None = None,
            check: str | None = None) -> list[Threshold]:
    return _select(conn, "valid_to IS NULL", system, check)


def history(conn: psycopg.Connection, system: str | None = None,
            check: str | None = None) -> list[Threshold]:
    return _select(conn, "true", system, check)


def get(conn: psycopg.Connection, threshold_id: int) -> Threshold:
    row = conn.cursor(row_factory=dict_row).execute(
        f"SELECT {_COLUMNS} FROM threshold WHERE id = %s", (threshold_id,)).fetchone()
    if row is None:
        raise PerfguardError(f"no threshold with id {threshold_id}")
    return _from_row(row)


def _select(conn: psycopg.Connection, condition: str, system: str | None,
            check: str | None) -> list[Threshold]:
    rows = conn.cursor(row_factory=dict_row).execute(
        f"""SELECT {_COLUMNS} FROM threshold
            WHERE {condition} AND (%(system)s::text IS NULL OR system = %(system)s)
              AND (%(check)s::text IS NULL OR check_name = %(check)s)
            ORDER BY system, check_name, metric, params::text, valid_from""",
        {"system": system, "check": check}).fetchall()
    return [_from_row(r) for r in rows]


# --- YAML exchange ---------------------------------------------------------------
_YAML_KEYS = ("check", "partition", "environ", "params", "metric", "point", "reference",
              "lower", "upper", "bounds", "unit", "direction", "author", "reason")


def to_yaml(system: str, thresholds: list[Threshold]) -> str:
    entries = []
    for t in thresholds:
        data = asdict(t)
        entries.append({k: data[k] for k in _YAML_KEYS if data[k] not in (None, {}, "")})
    return yaml.safe_dump({"system": system, "thresholds": entries}, sort_keys=False)


def from_yaml(path: Path) -> list[Threshold]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise PerfguardError(f"{path}: cannot read thresholds file: {exc}") from exc
    if not isinstance(data, dict) or "system" not in data or not isinstance(
            data.get("thresholds"), list):
        raise PerfguardError(f"{path}: expected a mapping with 'system' and a 'thresholds' list")
    return [_entry(data["system"], entry, f"{path}: thresholds[{i}]")
            for i, entry in enumerate(data["thresholds"])]


def _entry(system: str, entry: Any, where: str) -> Threshold:
    if not isinstance(entry, dict):
        raise PerfguardError(f"{where}: expected a mapping")
    unknown = set(entry) - set(_YAML_KEYS)
    missing = {"check", "metric", "reference", "direction"} - set(entry)
    if unknown or missing:
        raise PerfguardError(f"{where}: unknown keys {sorted(unknown)}, missing keys "
                             f"{sorted(missing)}")
    try:
        values = {k: entry[k] for k in _YAML_KEYS if k in entry}
        values["params"] = {str(k): str(v) for k, v in (entry.get("params") or {}).items()}
        for key in ("reference", "lower", "upper"):
            if values.get(key) is not None:
                values[key] = float(values[key])
        return Threshold(system=str(system), **values).validate(where)
    except (TypeError, ValueError) as exc:
        raise PerfguardError(f"{where}: {exc}") from exc


def parse_bound(text: str | None) -> tuple[float | None, bool]:
    """'10%' → (0.10, fraction) ; '-5%' → (-0.05, fraction) ; '3.2' → (3.2, absolute)."""
    if text is None or text == "":
        return None, False
    text = text.strip()
    if text.endswith("%"):
        return float(text[:-1]) / 100.0, True
    return float(text), False


_LOWER_IS_BETTER_UNITS = {"us", "usec", "ms", "s", "sec", "ns"}


def direction_for_unit(unit: str) -> str:
    """Times are better low; bandwidths, rates and FLOPS are better high."""
    return "lower" if unit.strip().lower() in _LOWER_IS_BETTER_UNITS else "higher"


def derive(conn: psycopg.Connection, run_id: int, tolerance: float,
           author: str, reason: str) -> list[Threshold]:
    """Thresholds proposed from a known-good run: each key figure ± tolerance, one-sided."""
    rows = conn.cursor(row_factory=dict_row).execute(
        """SELECT sy.name AS system, p.name AS partition, e.name AS environ, tc.check_name,
                  tc.params, m.name AS metric, m.unit, s.value
           FROM run r JOIN system sy ON sy.id = r.system_id
           JOIN testcase tc ON tc.run_id = r.id AND tc.result = 'pass'
           JOIN partition p ON p.id = tc.partition_id JOIN environ e ON e.id = tc.environ_id
           JOIN sample s ON s.testcase_id = tc.id AND s.point_id = 0
           JOIN metric m ON m.id = s.metric_id
           WHERE r.id = %s ORDER BY tc.check_name, tc.params::text, m.name""",
        (run_id,)).fetchall()
    proposals = []
    for row in rows:
        direction = direction_for_unit(row["unit"])
        proposals.append(Threshold(
            system=row["system"], partition=row["partition"], environ=row["environ"],
            check=row["check_name"], params=row["params"], metric=row["metric"],
            reference=row["value"], direction=direction, unit=row["unit"],
            lower=-tolerance if direction == "higher" else None,
            upper=tolerance if direction == "lower" else None,
            author=author, reason=reason))
    return proposals


def _specificity(t: Threshold) -> int:
    return (t.partition is not None) + (t.environ is not None) + len(t.params)


def most_specific(candidates, check: str, params: dict[str, str], partition: str,
                  environ: str) -> dict[str, Threshold]:
    """Metric → the most specific key-figure threshold that applies to one test variant.

    The same rule as the verdict's SQL: partition, environ and each matching
    variant parameter make a threshold more specific.
    """
    best: dict[str, Threshold] = {}
    for t in candidates:
        if (t.check != check or t.point is not None
                or t.partition not in (None, partition) or t.environ not in (None, environ)
                or any(params.get(k) != v for k, v in t.params.items())):
            continue
        if t.metric not in best or _specificity(t) > _specificity(best[t.metric]):
            best[t.metric] = t
    return best
