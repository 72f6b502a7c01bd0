"""`perfguard site check`: is the site directory right, before anything is submitted.

Every topology file against its schema and meaning (perfguard.contract.topology), the
site's other setting files through their own loaders, and, for the system a run is for,
the topology against what Slurm has: its partitions, their node counts and CPUs. `run`
does the same before ReFrame starts, so a wrong site file is one error naming the file,
the place and the fix, not ReFrame's traceback or one failed job per check.
"""

from __future__ import annotations

from pathlib import Path

from perfguard.contract.topology import Partition, System, load_system, slurm_partition
from perfguard.errors import PerfguardError, UsageError
from perfguard.site import paths, slurm
from perfguard.site.context import Context
from perfguard.site.detect import compact_cpus


def file_problems(ctx: Context) -> tuple[list[Path], list[str]]:
    """The setting files read, and what is wrong in them (one line each)."""
    from perfguard.judge import thresholds
    from perfguard.judge.rules import load_rules
    from perfguard.judge.verdict import rules_file

    checked: list[Path] = []
    problems: list[str] = []

    def attempt(path: Path, load) -> None:  # noqa: ANN001 - a loader taking the path
        checked.append(path)
        try:
            load(path)
        except PerfguardError as exc:
            problems.extend(str(exc).splitlines())

    for path in paths.topology_files(ctx.state):
        attempt(path, load_system)
    for path in paths.site_folder("thresholds"):
        attempt(path, thresholds.from_yaml)
    attempt(rules_file(), load_rules)
    return checked, problems


def find_system(ctx: Context, name: str) -> System:
    """The system ``name`` (``sys`` of ``sys:part``) of this context's topology files."""
    files = paths.topology_files(ctx.state)
    for path in files:
        system = load_system(path)
        if system.name == name.partition(":")[0]:
            return system
    raise UsageError(f"no system {name!r} in the topology files "
                     f"({', '.join(str(p) for p in files) or 'none'}): `perfguard site "
                     f"init --detect` writes one")


def selected_partitions(system: System, name: str) -> list[Partition]:
    """The partitions ``name`` (``sys`` or ``sys:part``) selects."""
    only = name.partition(":")[2]
    return [p for p in system.partitions if not only or p.name == only]


def slurm_problems(ctx: Context, system: System, partitions: list[Partition]) -> list[str]:
    """The topology of ``partitions`` against Slurm: a partition Slurm lacks would fail every
    job at sbatch, more nodes than it has would leave the multi-node checks pending, and a
    CPU the nodes lack would fail every pinned rank."""
    found = slurm.nodes(ctx)
    problems = []
    for part in partitions:
        where = f"{system.path}: partition {part.name}"
        name = slurm_partition(part.access)
        members = found.partitions.get(name or slurm.DEFAULT)
        if members is None:
            problems.append(
                f"{where}: access names Slurm partition {name or '(default)'}, which Slurm "
                f"does not have (it has {', '.join(found.named())}); fix access: "
                f"['--partition=NAME']")
            continue
        if part.nodes > len(members):
            problems.append(f"{where}: nodes: {part.nodes}, but Slurm's partition "
                            f"{name or '(default)'} has {len(members)}; set nodes: "
                            f"{len(members)} or fewer")
        fewest = min(found.cpus[n] for n in members)
        beyond = sorted({c for d in part.node.numa for c in d.cpus if c >= fewest})
        if beyond:
            problems.append(f"{where}: node.numa names CPUs {compact_cpus(beyond)}, but Slurm's "
                            f"nodes of partition {name or '(default)'} have {fewest} CPUs "
                            f"(0-{fewest - 1}); `perfguard topology detect` on a node "
                            f"writes what it has")
    return problems


def require_runnable(ctx: Context, system: str, against_slurm: bool = True) -> None:
    """Before a run: the site files load and ``system`` fits the site's Slurm (a dry run
    submits nothing: no Slurm asked); else one UsageError listing every problem."""
    _, problems = file_problems(ctx)
    if not problems and against_slurm:
        found = find_system(ctx, system)
        problems = slurm_problems(ctx, found, selected_partitions(found, system))
    if problems:
        raise UsageError("the site directory is not right:\n  " + "\n  ".join(problems)
                         + "\nnothing was run (`perfguard site check` checks it again)")
