"""What the site's Slurm has: partitions, their nodes and the nodes' CPUs, asked once.

The site directory is checked against it before anything is submitted
(perfguard.workflows.site_check) and the scheduled nightly's driver is placed with it
(perfguard.workflows.schedule).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from perfguard.errors import PerfguardError
from perfguard.site.context import Context

#: Where a partition name stands for Slurm's default partition.
DEFAULT = ""


@dataclass(frozen=True)
class SlurmNodes:
    """Slurm's partitions → their nodes (the default partition also as ``DEFAULT``), and
    each node's CPU count as Slurm counts them (hardware threads where it sees them)."""
    partitions: dict[str, set[str]]
    cpus: dict[str, int]
    #: Each node's NodeAddr: one address for several nodes is one host running several
    #: slurmd (virtual nodes, `--enable-multiple-slurmd`), whose nodes share its CPUs.
    addresses: dict[str, str] = field(default_factory=dict)

    def named(self) -> list[str]:
        return sorted(p for p in self.partitions if p != DEFAULT)

    def shares_host(self, partition: str) -> bool:
        """The partition's nodes are several slurmd of one host (one NodeAddr)."""
        nodes = self.partitions.get(partition, set())
        return len(nodes) > 1 and len({self.addresses.get(n) for n in nodes}) == 1


def run(ctx: Context, *argv: str) -> subprocess.CompletedProcess:
    """A Slurm client command in the context's Slurm; unreachable is an error saying so."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True,
                              env=ctx.slurm_env(), timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PerfguardError(f"{argv[0]} failed: {exc} (is Slurm's client installed and "
                             f"slurmctld reachable?)") from None


def nodes(ctx: Context) -> SlurmNodes:
    """One ``sinfo -N`` of every partition, hidden ones too."""
    listing = run(ctx, "sinfo", "-h", "-a", "-N", "-o", "%N %P %c %o")
    if listing.returncode != 0:
        raise PerfguardError(f"sinfo failed: {listing.stderr.strip()} (is slurmctld "
                             f"reachable from here?)")
    partitions: dict[str, set[str]] = {}
    cpus: dict[str, int] = {}
    addresses: dict[str, str] = {}
    for line in listing.stdout.splitlines():
        node, partition, count, address = line.split()
        partitions.setdefault(partition.rstrip("*"), set()).add(node)
        if partition.endswith("*"):
            partitions.setdefault(DEFAULT, set()).add(node)
        cpus[node] = int(count)
        addresses[node] = address
    return SlurmNodes(partitions, cpus, addresses)
