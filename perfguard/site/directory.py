"""A site directory: what `perfguard site init` writes and `perfguard site show` explains.

The files themselves are read through ``perfguard.paths`` (site first, shipped default
otherwise); this module only creates a starting site and describes where each setting
comes from.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from perfguard import paths
from perfguard.errors import PerfguardError
from perfguard.site import slurm
from perfguard.site.context import Context
from perfguard.yamlfile import dump_yaml

README = """\
# perfguard site directory

Point perfguard at it with `--site {site}` or `PERFGUARD_SITE={site}`; keep it in the
site's own git repository. What is not here comes from the defaults shipped with perfguard;
`perfguard site show` says which file each setting comes from.

- `systems/*.yaml`: one topology file per system (`perfguard topology detect` on one node
  of each partition writes one; `perfguard site init --detect` does it through srun).
- `thresholds/*.yaml`: reference thresholds (`perfguard thresholds import`).
- `verdict_rules.yaml`, `sweep.yaml`, `mpi_flavours.yaml`: replace the shipped file of the
  same name as a whole (copy it from `perfguard site show` and edit).
"""


def describe(state: Path | None = None) -> str:
    """Which site directory is used and, per setting file, where it comes from; ``state``:
    the state directory the command resolved (``--state-dir`` among them)."""
    site = paths.site_dir()
    lines = [f"site directory: {site or '(none: shipped defaults only)'}",
             f"shipped defaults: {paths.DEFAULTS_DIR}",
             f"dashboards: {paths.DASHBOARDS_DIR} (Grafana provisioning: docs/grafana.md)",
             f"state directory: {state or paths.state_dir()}", ""]
    for name, source in paths.layered_files().items():
        origin = "site" if site is not None and source.is_relative_to(site) else "shipped"
        lines.append(f"{name:32} {origin:8} {source}")
    return "\n".join(lines + ["", site_checks(site)])


def site_checks(site: Path | None) -> str:
    """Whether the site's own checks directory is there (searched beside the shipped
    library by every run: run/reframe.py check_directories), and what it holds."""
    if site is None:
        return "site checks: none (no site directory)"
    folder = site / "checks"
    if not folder.is_dir():
        return (f"site checks: {folder} not found (a site's own ReFrame checks go there: "
                f"docs/writing-checks.md)")
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.py")
                   if "__pycache__" not in p.parts)
    return (f"site checks: {folder} found, searched by every run: "
            f"{', '.join(files) if files else 'no .py file in it'}")


def slurm_nodes(ctx: Context) -> slurm.SlurmNodes | None:
    """What the Slurm this host can see has (None without Slurm)."""
    try:
        return slurm.nodes(ctx)
    except PerfguardError:
        return None


def partitions(ctx: Context) -> dict[str, int]:
    """The Slurm partitions this host can see → their node counts (empty without Slurm)."""
    found = slurm_nodes(ctx)
    return {name: len(found.partitions[name]) for name in found.named()} if found else {}


#: Written above a system whose partitions' nodes share one host.
SHARED_HOST_NOTE = ("# note: the nodes of {parts} are slurmd of one host (one NodeAddr): "
                    "they share its CPUs, so ranks are spread and yield, and "
                    "check_variables sizes a night for that (docs/adopting.md)")


def shared_host(document: dict, parts: list[str]) -> dict:
    """A detected system whose partitions ``parts`` are virtual nodes of one host: ranks
    on different nodes must not share a CPU, busy-polling ranks must yield, and a night
    at the checks' fabric-sized iterations would not end (issue 51: one UCX check alone
    ran 10 min); so the embedded cluster's own settings, the same facts."""
    from perfguard.cluster.layout import SHARED_HOST_CHECK_VARIABLES

    for part in document["partitions"]:
        if part["name"] in parts:
            part["nodes_share_host"] = True
            part["env_vars"] = {"OMPI_MCA_mpi_yield_when_idle": "1"}
    return {**document, "check_variables": dict(SHARED_HOST_CHECK_VARIABLES)}


#: Nodes the multi-node checks span where a partition has more: collectives over a whole
#: large partition would wait for all of it every night.
DEFAULT_SPAN = 4


def detect_command(system: str, partition: str, nodes: int) -> list[str]:
    """Topology detection on one node of ``partition``: facts from a compute node, never
    from the host that runs perfguard. The YAML comes back on srun's standard output, so
    the site directory need not be on a filesystem the node sees."""
    return ["srun", f"--partition={partition}", "-N1", "-n1", "--exclusive",
            sys.executable, "-m", "perfguard.cli", "topology", "detect",
            "--system", system, "--partition", partition,
            "--nodes", str(min(nodes, DEFAULT_SPAN))]


def init(ctx: Context, site: Path, system: str, detect: bool, only: list[str] | None = None
         ) -> list[str]:
    """Write a starting site directory; returns what was done or what to run. ``only``:
    the partitions to describe (default: every one; a service partition is no compute
    partition to measure)."""
    if site.exists() and any(site.iterdir()):
        raise PerfguardError(f"site directory {site} exists and is not empty")
    for folder in paths.SITE_FOLDERS:
        (site / folder).mkdir(parents=True, exist_ok=True)
    (site / "README.md").write_text(README.format(site=site))
    notes = [f"wrote {site / 'README.md'}"]
    nodes = slurm_nodes(ctx)
    found = {name: len(nodes.partitions[name]) for name in nodes.named()} if nodes else {}
    if not found:
        return notes + ["no Slurm here (sinfo not found or failing): on a cluster, run "
                        "`perfguard topology detect --system NAME --partition PART -o "
                        f"{site}/systems/NAME-PART.yaml` on one node of each partition"]
    unknown = sorted(set(only or []) - set(found))
    if unknown:
        raise PerfguardError(f"--partition {', '.join(unknown)}: Slurm has no such partition "
                             f"(it has {', '.join(found)})")
    found = {name: count for name, count in found.items() if not only or name in only}
    detected: list[dict] = []
    comments: list[str] = []
    for partition, count in found.items():
        command = detect_command(system, partition, count)
        if not detect:
            notes.append(f"to describe partition {partition}: {shlex.join(command)} "
                         f"> {site}/systems/{system}-{partition}.yaml")
            continue
        result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                                env=ctx.slurm_env())
        if result.returncode != 0:
            raise PerfguardError(f"topology detect on partition {partition} failed "
                                 f"(exit {result.returncode}): {result.stderr.strip()[-400:]}")
        detected.append(yaml.safe_load(result.stdout))
        comments += [line.replace("# note:", f"# note ({partition}):", 1)
                     for line in result.stdout.splitlines() if line.startswith("#")]
    if detected:  # one system, one entry per partition, each one's notes kept
        merged = {**detected[0], "partitions": [p for d in detected for p in d["partitions"]]}
        shared = [name for name in found if nodes and nodes.shares_host(name)]
        if shared:
            merged = shared_host(merged, shared)
            comments.append(SHARED_HOST_NOTE.format(parts=", ".join(shared)))
        target = site / "systems" / f"{system}.yaml"
        target.write_text("".join(f"{line}\n" for line in comments)
                          + dump_yaml(merged))
        notes.append(f"partitions {', '.join(found)}: wrote {target}")
    return notes
