"""A series' history as the judge reads it: values oldest first, optionally only those of
the current fingerprint epoch (since the environment of the judged nodes last changed)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg


@dataclass(frozen=True)
class Value:
    started_at: datetime
    value: float
    system: str
    nodes: tuple[str, ...]


def values(conn: psycopg.Connection, series: list[Value], same_fingerprint: bool) -> list[float]:
    """The values of ``series`` (oldest first, the judged run's last); with
    ``same_fingerprint`` only those since the last fingerprint change of the judged run's
    nodes (Conbench's reset at a distribution change: after an upgrade the new level is
    learnt afresh, and the run is inconclusive until enough of it is known)."""
    if not same_fingerprint or not series:
        return [v.value for v in series]
    mine = series[-1]
    (start,) = conn.execute("SELECT fingerprint_epoch(%s, %s, %s)",
                            (mine.system, list(mine.nodes), mine.started_at)).fetchone()
    return [v.value for v in series if start is None or v.started_at >= start]
