"""What changed in the nodes' environment between two runs (driver, firmware, stack…)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

SCALAR_FIELDS = ("kernel", "os", "ofed", "rdma_core", "gpu_driver", "mpi", "ucx",
                 "spack_lock_hash")


@dataclass(frozen=True)
class Change:
    field: str
    before: str | None
    after: str | None
    nodes: tuple[str, ...]

    def render(self) -> str:
        before = self.before if self.before is not None else "(none)"
        after = self.after if self.after is not None else "(none)"
        return f"{self.field}: {before} → {after} on {compact_nodes(self.nodes)}"


def flatten(row: dict) -> dict[str, str]:
    """One node's fingerprint as field → value (HCA and GPU facts spelled out)."""
    facts = {f: row[f] for f in SCALAR_FIELDS if row.get(f)}
    for kind, label in (("hcas", "name"), ("gpus", "index")):
        devices = row.get(kind) or []
        for position, device in enumerate(devices if isinstance(devices, list) else []):
            if not isinstance(device, dict):
                continue
            # A device the collector could not name is still compared, by its position.
            name = device.get(label, f"#{position}")
            for key, value in device.items():
                if key != label:
                    facts[f"{kind[:-1]} {name} {key}"] = str(value)
    return facts


def fingerprints(conn: psycopg.Connection, run_id: int) -> dict[str, dict[str, str]]:
    rows = conn.cursor(row_factory=dict_row).execute(
        """SELECT n.name AS node, f.* FROM fingerprint f JOIN node n ON n.id = f.node_id
           WHERE f.run_id = %s""", (run_id,)).fetchall()
    return {row["node"]: flatten(row) for row in rows}


def diff(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[Change]:
    """Changes grouped by (field, old, new) across nodes present in both runs."""
    grouped: dict[tuple, list[str]] = defaultdict(list)
    for node in sorted(set(before) & set(after), key=natural_key):
        old, new = before[node], after[node]
        for field in sorted(set(old) | set(new)):
            if old.get(field) != new.get(field):
                grouped[(field, old.get(field), new.get(field))].append(node)
    changes = [Change(f, b, a, tuple(n)) for (f, b, a), n in grouped.items()]
    added = sorted(set(after) - set(before), key=natural_key)
    removed = sorted(set(before) - set(after), key=natural_key)
    if added:
        changes.append(Change("node", None, "present", tuple(added)))
    if removed:
        changes.append(Change("node", "present", None, tuple(removed)))
    return changes


def natural_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def compact_nodes(nodes) -> str:
    """('node3', 'node4', 'node7') → 'node[3-4,7]' (Slurm's hostlist notation)."""
    by_prefix: dict[str, list[int]] = defaultdict(list)
    others = []
    for node in nodes:
        match = re.fullmatch(r"(.*?)(\d+)", node)
        if match:
            by_prefix[match.group(1)].append(int(match.group(2)))
        else:
            others.append(node)
    parts = []
    for prefix, numbers in by_prefix.items():
        numbers.sort()
        ranges, start = [], numbers[0]
        for previous, current in zip(numbers, numbers[1:] + [None]):
            if current != previous + 1:
                ranges.append(str(start) if start == previous else f"{start}-{previous}")
                start = current
        parts.append(f"{prefix}{ranges[0]}" if len(numbers) == 1 else
                     f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts + others)


def render(changes: list[Change]) -> str:
    if not changes:
        return "no fingerprint changes"
    return "\n".join(change.render() for change in changes)
