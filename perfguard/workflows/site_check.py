"""`perfguard site check`: is the site directory right, before anything is submitted.

Every topology file against its schema and meaning (perfguard.contract.topology), the
site's other setting files through their own loaders, and, for the system a run is for,
the topology against what Slurm has: its partitions, their node counts and CPUs. `run`
does the same before ReFrame starts, so a wrong site file is one error naming the file,
the place and the fix, not ReFrame's traceback or one failed job per check.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from perfguard import paths
from perfguard.contract.topology import (
    Partition,
    System,
    load_system,
    named_system,
    slurm_partition,
)
from perfguard.errors import PerfguardError, UsageError
from perfguard.site import slurm
from perfguard.site.context import Context
from perfguard.site.detect import compact_cpus
from perfguard.yamlfile import load_yaml


@dataclass
class SiteFiles:
    """The setting files read, what is wrong in them (one line each), and the systems
    their topology files describe."""
    read: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    systems: list[System] = field(default_factory=list)
    #: Each thresholds file that loaded → its entries.
    thresholds: dict[Path, list] = field(default_factory=dict)

    def load(self, path: Path, loader: Callable[[Path], Any]) -> Any:
        self.read.append(path)
        try:
            return loader(path)
        except PerfguardError as exc:
            self.problems.extend(str(exc).splitlines())
            return None


def read_site_files(ctx: Context) -> SiteFiles:
    """Every setting file through its own loader, each read once."""
    from perfguard.judge import thresholds
    from perfguard.judge.rules import load_rules
    from perfguard.judge.verdict import rules_file

    files = SiteFiles()
    for path in paths.topology_files(ctx.state):
        system = files.load(path, load_system)
        if system is not None:
            files.systems.append(system)
    for path in paths.site_folder("thresholds"):
        loaded = files.load(path, thresholds.from_yaml)
        if loaded is not None:
            files.thresholds[path] = loaded
    files.load(rules_file(), load_rules)
    for name, schema in (("sweep.yaml", "sweep"), ("mpi_flavours.yaml", "mpi_flavours")):
        files.load(paths.site_file(name), partial(load_yaml, what=name, schema=schema))
    return files


def thresholds_of_no_check(files: SiteFiles) -> list[str]:
    """The entries of the thresholds files read that name no check (what `site check`
    adds to the files' problems; a run goes on: a retired check's old thresholds must
    not stop a nightly, and judge nothing there either)."""
    from perfguard.judge.scope import declared_checks
    from perfguard.run.reframe import RunRequest, check_directories

    if not any(files.thresholds.values()):
        return []
    known = declared_checks(check_directories(RunRequest(), paths.site_dir()))
    return [problem for path, entries in files.thresholds.items()
            for problem in unknown_checks(path, entries, known)]


def unknown_checks(path: Path, entries: list, known: dict) -> list[str]:
    """Entries of a thresholds file that name no check of ``known`` (the library's and
    the site's ``checks/``, read from their source as `thresholds import` does): a
    misspelt name never matches a test case, so the threshold would judge nothing."""
    problems = []
    for number, entry in enumerate(entries):
        if entry.check not in known:
            near = difflib.get_close_matches(entry.check, list(known), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            problems.append(f"{path}: thresholds[{number}]: check {entry.check!r} is no check "
                            f"of the library or of the site's checks/{hint}")
    return problems


def find_system(ctx: Context, name: str, systems: list[System] | None = None) -> System:
    """The system ``name`` (``sys`` of ``sys:part``) of this context's topology files
    (``systems``: those files loaded already)."""
    files = paths.topology_files(ctx.state)
    found = named_system(systems if systems is not None else map(load_system, files), name)
    if found is not None:
        return found
    raise UsageError(f"no system {name!r} in the topology files "
                     f"({', '.join(str(p) for p in files) or 'none'}): `perfguard site "
                     f"init --detect` writes one")


def selected_partitions(system: System, name: str) -> list[Partition]:
    """The partitions ``name`` (``sys`` or ``sys:part``) selects."""
    only = name.partition(":")[2]
    chosen = [p for p in system.partitions if not only or p.name == only]
    if not chosen:
        raise UsageError(f"--system {name}: system {system.name} has no partition {only!r} "
                         f"(it has {', '.join(p.name for p in system.partitions)}; "
                         f"{system.path})")
    return chosen


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


def check(ctx: Context, system: str | None) -> SiteFiles:
    """The site files, and ``system`` (None: none) against the site's Slurm once they
    load: what `site check` prints and what `run` refuses to start with."""
    files = read_site_files(ctx)
    if not files.problems and system:
        found = find_system(ctx, system, files.systems)
        files.problems = slurm_problems(ctx, found, selected_partitions(found, system))
    return files


def require_partition(ctx: Context, system: str) -> None:
    """``sys:part`` names a partition of the system (ReFrame's own error otherwise, exit
    1, no list): checked before a dry run too, which asks no Slurm. A system no topology
    file describes is left to ReFrame's configuration."""
    if ":" not in system:
        return
    try:
        found = find_system(ctx, system)
    except (UsageError, PerfguardError):
        return
    selected_partitions(found, system)


def require_runnable(ctx: Context, system: str, against_slurm: bool = True) -> None:
    """Before a run: the site files load and ``system`` fits the site's Slurm (a dry run
    submits nothing: no Slurm asked); else one UsageError listing every problem."""
    require_partition(ctx, system)
    problems = check(ctx, system if against_slurm else None).problems
    if problems:
        raise UsageError("the site directory is not right:\n  " + "\n  ".join(problems)
                         + "\nnothing was run (`perfguard site check` checks it again)")
