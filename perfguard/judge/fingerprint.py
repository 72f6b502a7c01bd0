"""What changed in the nodes' environment between two runs (driver, firmware, stack…)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from reframe.utility import nodelist_abbrev

from perfguard.store import queries
from perfguard.store.queries import Connection

#: Nodes a diff cannot compare: never fingerprinted before, or not used by the later run.
NO_EARLIER_STATE = "nodes with no earlier fingerprint to compare"
NOT_MEASURED = "nodes not in the later run"
SCALAR_FIELDS = ("kernel", "os", "ofed", "rdma_core", "gpu_driver", "mpi", "ucx",
                 "spack_lock_hash")
#: Facts that say which host a node is, not what it runs: new at every boot, so never a
#: change of the environment (a reboot would otherwise confirm any finding that night).
IDENTITY_FIELDS = ("boot_id",)


@dataclass(frozen=True)
class Change:
    field: str
    before: str | None
    after: str | None
    nodes: tuple[str, ...]

    def render(self) -> str:
        if self.field in (NO_EARLIER_STATE, NOT_MEASURED):
            return f"{self.field}: {compact_nodes(self.nodes)}"
        before = self.before if self.before is not None else "(none)"
        after = self.after if self.after is not None else "(none)"
        return f"{self.field}: {before} → {after} on {compact_nodes(self.nodes)}"


def flatten(row: dict) -> dict[str, str]:
    """One node's fingerprint as field → value (HCA and GPU facts spelled out, and the
    facts without a column of their own: CUDA driver, nvidia_peermem, gdrdrv, …)."""
    facts = {f: row[f] for f in SCALAR_FIELDS if row.get(f)}
    extra = row.get("extra")
    facts.update({k: str(v) for k, v in (extra if isinstance(extra, dict) else {}).items()
                  if isinstance(v, (str, int, float)) and k not in IDENTITY_FIELDS})
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


def fingerprint_rows(conn: Connection, run_id: int) -> list[dict]:
    """The run's fingerprints as stored, a row per node (read once where several things
    are taken from them: ``fingerprints``, ``hosts_sharing``)."""
    return queries.rows(conn, "fingerprints_of_run", (run_id,))


def fingerprints(conn: Connection, run_id: int,
                 rows: list[dict] | None = None) -> dict[str, dict[str, str]]:
    """Each node's fingerprint as flat fields (``rows``: ``fingerprint_rows``, where read)."""
    rows = fingerprint_rows(conn, run_id) if rows is None else rows
    return {row["node"]: flatten(row) for row in rows}


def hosts_sharing(rows: list[dict]) -> dict[str, tuple[str, ...]]:
    """Each node of a run's fingerprint ``rows`` that printed the same boot id as others
    (one booted kernel: one host, as virtual nodes are) → those others. A finding can then
    not tell such a node from its host, and says so."""
    by_boot: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        extra = row.get("extra")
        boot = extra.get("boot_id") if isinstance(extra, dict) else None
        if boot:
            by_boot[boot].append(row["node"])
    return {node: tuple(sorted((n for n in nodes if n != node), key=natural_key))
            for nodes in by_boot.values() if len(nodes) > 1 for node in nodes}


def fingerprints_as_of(conn: Connection, run_id: int,
                       nodes: list[str]) -> dict[str, dict[str, str]]:
    """Each of ``nodes`` as it was at run ``run_id``: its fingerprint in the newest run of
    the same system up to that one that used it (a node the baseline run did not use is
    compared with its own earlier state, not with nothing)."""
    rows = queries.rows(conn, "fingerprints_as_of", (run_id, nodes))
    return {row["node"]: flatten(row) for row in rows}


def diff(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[Change]:
    """Changes grouped by (field, old, new) across nodes present in both; nodes only in
    ``after`` are listed as having no earlier state, never as a change to "present"."""
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
        changes.append(Change(NO_EARLIER_STATE, None, None, tuple(added)))
    if removed:
        changes.append(Change(NOT_MEASURED, None, None, tuple(removed)))
    return changes


@dataclass(frozen=True)
class SlowLink:
    """A device whose PCIe link trained below what it and its slot can do."""
    device: str
    trained: str
    maximum: str
    nodes: tuple[str, ...]

    def render(self) -> str:
        return (f"{self.device} on {compact_nodes(self.nodes)}: PCIe link {self.trained}, "
                f"maximum {self.maximum}")


def _speed(text: str | None) -> float | None:
    """'32.0 GT/s PCIe' → 32.0 (sysfs's current/max_link_speed)."""
    match = re.match(r"\s*([\d.]+)", text or "")
    return float(match.group(1)) if match else None


def links_below_maximum(nodes: dict[str, dict[str, str]]) -> list[SlowLink]:
    """Devices whose PCIe link is narrower than its maximum, or, for HCAs, slower: a GPU
    lowers its link speed when idle (the fingerprint is taken before the benchmark), so
    only its width is judged."""
    grouped: dict[tuple, list[str]] = defaultdict(list)
    for node, facts in nodes.items():
        devices = {key.rsplit(" ", 1)[0] for key in facts if key.endswith(" pcie_max_width")}
        for device in sorted(devices):
            get = {f: facts.get(f"{device} pcie_{f}") for f in
                   ("speed", "width", "max_speed", "max_width")}
            if not all(v and v.strip() for v in get.values()):
                continue
            narrow = get["width"].isdigit() and get["max_width"].isdigit() and \
                int(get["width"]) < int(get["max_width"])
            slow = device.startswith("hca ") and (_speed(get["speed"]) or 0) < (
                _speed(get["max_speed"]) or 0)
            if narrow or slow:
                trained = f"{get['speed'].replace(' PCIe', '')} x{get['width']}"
                maximum = f"{get['max_speed'].replace(' PCIe', '')} x{get['max_width']}"
                grouped[(device, trained, maximum)].append(node)
    return [SlowLink(device, trained, maximum, tuple(sorted(found, key=natural_key)))
            for (device, trained, maximum), found in grouped.items()]


def natural_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def compact_nodes(nodes) -> str:
    """('nid001', 'nid002', 'nid007') → 'nid[001-002,007]': Slurm's hostlist notation, zero
    padding kept (ReFrame's own nodelist utility)."""
    return nodelist_abbrev(sorted(nodes, key=natural_key))


