"""The Grafana dashboards' SQL, expanded the way Grafana's PostgreSQL data source does.

Used by the tests (every panel's query against the real database) and by the
dashboard benchmark; Grafana itself reads dashboards/json through provisioning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from perfguard.paths import DASHBOARDS_DIR

DASHBOARD_DIR = DASHBOARDS_DIR / "json"
DATASOURCE_UID = "perfguard-pg"


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    ref: str
    sql: str


def dashboards(directory: Path = DASHBOARD_DIR) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}


def queries(directory: Path = DASHBOARD_DIR) -> Iterator[Query]:
    """Every panel target, annotation and template variable query."""
    for name, board in dashboards(directory).items():
        for panel in board.get("panels", []):
            for target in panel.get("targets", []):
                yield Query(name, panel["title"], target["refId"], target["rawSql"])
        for annotation in board.get("annotations", {}).get("list", []):
            target = annotation.get("target") or {}
            if "rawSql" in target:
                yield Query(name, f"annotation: {annotation['name']}", "Anno", target["rawSql"])
        for variable in board.get("templating", {}).get("list", []):
            yield Query(name, f"variable: {variable['name']}", "var", variable["query"])


def _quote(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def expand(sql: str, variables: dict[str, str | list[str]], time_from: datetime,
           time_to: datetime) -> str:
    """Grafana's interpolation: time macros, then variables (a multi-value variable
    becomes a quoted, comma-separated list; a single value is inserted as is)."""
    start, end = _quote(time_from.isoformat()), _quote(time_to.isoformat())
    sql = re.sub(r"\$__timeFilter\(([^)]+)\)", rf"\1 BETWEEN {start} AND {end}", sql)
    sql = sql.replace("$__timeFrom()", start).replace("$__timeTo()", end)

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            return match.group(0)
        current = variables[name]
        if isinstance(current, list):
            return ",".join(_quote(v) for v in current)
        return str(current).replace("'", "''")

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, sql)
