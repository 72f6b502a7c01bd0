"""What the site's Slurm has: partitions, their nodes and the nodes' CPUs, asked once.

The site directory is checked against it before anything is submitted
(perfguard.workflows.site_check) and the scheduled nightly's driver is placed with it
(perfguard.workflows.schedule).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime

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


@dataclass(frozen=True)
class JobAccount:
    """One Slurm job as accounting (sacct) saw it: what a run's cost is made of."""
    job_id: str
    nodes: int
    submitted_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    elapsed_s: float
    state: str

    @property
    def node_hours(self) -> float:
        """Elapsed × allocated nodes: what the job took from the machine."""
        return self.nodes * self.elapsed_s / 3600

    @property
    def queue_wait_s(self) -> float | None:
        """Start − submit; None for a job that never started."""
        if self.submitted_at is None or self.started_at is None:
            return None
        return max(0.0, (self.started_at - self.submitted_at).total_seconds())

    @property
    def finished(self) -> bool:
        """Accounting has written the job's end (slurmdbd writes it a moment later)."""
        return self.ended_at is not None and self.state.split()[0] not in (
            "PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED")


#: sacct's fields for JobAccount, one line per job (-X: the allocation, not its steps).
SACCT_JOB_FIELDS = "JobIDRaw,NNodes,Submit,Start,End,ElapsedRaw,State"


def parse_jobs(listing: str) -> list[JobAccount]:
    """``sacct -X -n -P -o`` SACCT_JOB_FIELDS → JobAccount per line. Times are the local
    time sacct prints ("Unknown" or "None" where there is none); lines of another shape
    (a warning) are left out."""
    found = []
    for line in listing.splitlines():
        fields = line.split("|")
        if len(fields) != 7 or not fields[0].strip():
            continue
        job_id, nodes, submit, start, end, elapsed, state = (f.strip() for f in fields)
        try:
            found.append(JobAccount(job_id, int(nodes or 0), _sacct_time(submit),
                                    _sacct_time(start), _sacct_time(end),
                                    float(elapsed or 0), state))
        except ValueError:
            continue
    return found


def _sacct_time(text: str) -> datetime | None:
    """sacct's ``2026-11-28T22:40:01`` (local time) as an aware datetime; None for
    ``Unknown``, ``None`` or empty."""
    if text in ("", "Unknown", "None"):
        return None
    return datetime.fromisoformat(text).astimezone()


def job_accounting(ctx: Context, job_ids: list[str], wait_s: float = 30
                   ) -> list[JobAccount]:
    """The jobs as Slurm accounting has them, waiting up to ``wait_s`` for slurmdbd to
    write their ends (a run's last job ends a moment before accounting says so). Jobs
    accounting does not know are left out; a site without accounting gets []."""
    if not job_ids:
        return []
    deadline = time.monotonic() + wait_s
    while True:
        listing = run(ctx, "sacct", "-X", "-n", "-P", "-j", ",".join(job_ids),
                      "-o", SACCT_JOB_FIELDS)
        jobs = parse_jobs(listing.stdout) if listing.returncode == 0 else []
        done = len(jobs) >= len(set(job_ids)) and all(job.finished for job in jobs)
        if done or time.monotonic() >= deadline:
            return jobs
        time.sleep(1)
