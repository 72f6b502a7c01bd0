"""Faults injected into the embedded cluster's virtual nodes, for the proofs and the
benchmarks that must show a slow node is found (and a clean cluster is not blamed)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from perfguard.cluster.layout import ClusterLayout
from perfguard.cluster.services import node_pids
from perfguard.errors import PerfguardError

CPU_CGROUP = Path("/sys/fs/cgroup/cpu")


@contextmanager
def throttled(layout: ClusterLayout, nodes: Iterable[str], share: float,
              period_us: int = 100_000) -> Iterator[None]:
    """Each node's slurmd (and so every job step it starts) limited to ``share`` of one
    core by its own CPU cgroup quota (cgroup v1); removed however the block ends.

    A short ``period_us`` spreads the quota evenly: a ping-pong under the default 100 ms
    period stalls for tens of milliseconds whenever the two nodes' throttled phases
    miss each other, and its latency then varies tenfold from run to run."""
    if not (CPU_CGROUP / "cgroup.procs").exists():
        raise PerfguardError(f"no cgroup v1 cpu controller at {CPU_CGROUP}: cannot throttle "
                             f"a node")
    groups = []
    try:
        for node in nodes:
            group = CPU_CGROUP / f"perfguard-slow-{layout.port_base}-{node}"
            group.mkdir(exist_ok=True)
            groups.append(group)
            (group / "cpu.cfs_period_us").write_text(str(period_us))
            (group / "cpu.cfs_quota_us").write_text(str(int(share * period_us)))
            pids = node_pids(layout, node)
            if not pids:
                raise PerfguardError(f"cannot throttle {node}: its slurmd is not running")
            for pid in pids:
                (group / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        for group in groups:
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    (CPU_CGROUP / "cgroup.procs").write_text(pid)
                except OSError:
                    pass  # gone meanwhile
            group.rmdir()
