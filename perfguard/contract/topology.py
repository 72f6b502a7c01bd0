"""Node topology of a system's partitions, read from ``site_config/systems/<system>.yaml``.

The file says, per partition, what one node looks like: NUMA domains and their
cores, HCAs (port, link layer, rate, NUMA domain), GPUs (NUMA domain and PCIe
affinity to each HCA), the MPI flavour, and where the benchmarks come from. The
ReFrame site config is generated from it, and the checks derive their pinning
from it: which cores, which GPU and which HCA knob for a given HCA.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard.errors import PerfguardError
from perfguard.yamlfile import load_yaml

#: PCIe affinity between a GPU and an HCA, best first (nvidia-smi topo -m legend).
AFFINITY_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
PROVIDER_KINDS = ("spack", "prefix", "system", "replay")


@dataclass(frozen=True)
class Numa:
    id: int
    cpus: tuple[int, ...]


@dataclass(frozen=True)
class Hca:
    name: str
    port: int
    link_layer: str
    rate_gbps: float
    numa: int
    gid_index: int | None = None
    #: IB speed name as ibv_devinfo/sysfs show it (QDR, FDR10, FDR, EDR, HDR, NDR);
    #: needed where the rate alone is ambiguous: 4X QDR and 4X FDR10 both say 40.
    speed: str = ""

    @property
    def rdma(self) -> bool:
        """An RDMA port (InfiniBand or RoCE), as opposed to a plain network interface."""
        return self.link_layer.lower() in ("infiniband", "ethernet")

    @property
    def data_rate_gbps(self) -> float:
        """Payload rate of the port.

        SDR/DDR/QDR signal at the nominal rate with 8b/10b (4X QDR: 40 → 32 Gb/s).
        FDR10 signals 10.3125 Gbaud per lane with 64b/66b: its nominal 40 is the data
        rate. FDR signals 14.0625 Gbaud with 64b/66b (4X: 56 → 54.5). EDR and later
        report the data rate already (100, 200, 400). Without a speed name a rate
        of 40 or less is taken as 8b/10b and 56 as FDR.
        """
        speed = self.speed.upper()
        if speed == "FDR10":
            return self.rate_gbps
        if speed == "FDR" or (not speed and self.rate_gbps == 56):
            return self.rate_gbps / 14 * 14.0625 * 64 / 66
        if speed in ("SDR", "DDR", "QDR") or (not speed and self.rate_gbps <= 40):
            return self.rate_gbps * 8 / 10
        return self.rate_gbps


@dataclass(frozen=True)
class Gpu:
    index: int
    model: str
    numa: int
    affinity: dict[str, str] = field(default_factory=dict)
    #: PCI bus id as nvidia-smi prints it (``00000000:17:00.0``); the jobs prove with it
    #: that each rank used this GPU. Empty: the rank's visible index is checked instead.
    bus_id: str = ""


@dataclass(frozen=True)
class NodeTopology:
    numa: tuple[Numa, ...]
    hcas: tuple[Hca, ...]
    gpus: tuple[Gpu, ...]
    #: Memory of one node; None: not stated (checks that need much do not skip on it).
    memory_mib: int | None = None

    def hca(self, name: str) -> Hca:
        for hca in self.hcas:
            if hca.name == name:
                return hca
        raise PerfguardError(f"no HCA {name!r} in this partition "
                             f"(has {[h.name for h in self.hcas]})")

    @property
    def cores(self) -> int:
        return sum(len(d.cpus) for d in self.numa)

    def cores_near(self, hca: Hca, count: int) -> list[int]:
        """``count`` cores, those of the HCA's NUMA domain first, then the other domains
        by distance (intra-node pairs and multi-pair runs may need more than one domain)."""
        domains = sorted(self.numa, key=lambda d: (abs(d.id - hca.numa), d.id))
        cores = [cpu for domain in domains for cpu in domain.cpus]
        if len(cores) < count:
            raise PerfguardError(f"HCA {hca.name}: {count} cores requested, the node has "
                                 f"{len(cores)} in the topology")
        return cores[:count]

    def cores_per_node_sharing_a_host(self, hca: Hca, count: int, nodes: int
                                      ) -> list[list[int]]:
        """``count`` cores for each of ``nodes`` nodes that share one host's CPUs (virtual
        nodes): the first node gets the cores near the HCA, each next node the same order
        shifted by one core, so the ranks that talk to each other (the same local rank on
        different nodes) sit on different host CPUs instead of stacking on one."""
        order = self.cores_near(hca, self.cores)
        return [[order[(node + rank) % len(order)] for rank in range(count)]
                for node in range(nodes)]

    def closest_gpu(self, hca: Hca) -> Gpu | None:
        """The GPU with the best PCIe affinity to the HCA (PIX before PXB before PHB …)."""
        if not self.gpus:
            return None

        def rank(gpu: Gpu) -> tuple[int, int]:
            affinity = gpu.affinity.get(hca.name, "SYS")
            order = AFFINITY_ORDER.index(affinity) if affinity in AFFINITY_ORDER else 99
            return (order, gpu.index)

        return min(self.gpus, key=rank)

    def every_gpu_shares_a_switch_with_an_hca(self) -> bool:
        """Each GPU is PIX or PXB to some HCA: where NCCL (NCCL_NET_GDR_LEVEL's default,
        PXB) and the MPIs use GPUDirect RDMA without being asked."""
        return bool(self.gpus) and all(
            any(gpu.affinity.get(hca.name) in ("PIX", "PXB") for hca in self.hcas)
            for gpu in self.gpus)

    def gpus_for_ranks(self, count: int) -> list[Gpu]:
        """Without an HCA to follow: local rank i gets the node's i-th GPU (round robin),
        so two ranks of a node talk between two GPUs where it has two."""
        return [self.gpus[rank % len(self.gpus)] for rank in range(count)] if self.gpus \
            else []

    def cores_near_gpus(self, gpus: list[Gpu]) -> list[int]:
        """One core per rank, each on its GPU's NUMA domain where it has a free one."""
        taken: list[int] = []
        for gpu in gpus:
            domains = sorted(self.numa, key=lambda d: (abs(d.id - gpu.numa), d.id))
            free = [c for d in domains for c in d.cpus if c not in taken]
            if not free:
                raise PerfguardError(f"{len(gpus)} ranks: the node has {self.cores} cores")
            taken.append(free[0])
        return taken


@dataclass(frozen=True)
class Partition:
    name: str
    descr: str
    access: tuple[str, ...]
    environs: tuple[str, ...]
    features: tuple[str, ...]
    max_jobs: int
    nodes: int
    mpi_flavour: str
    srun_options: tuple[str, ...]
    provider: dict[str, Any]
    node: NodeTopology
    #: sbatch options only measuring jobs add, e.g. a Slurm license of count 1 so that
    #: benchmarks never overlap one another while other jobs run beside them.
    measurement_options: tuple[str, ...] = ()
    #: The nodes are virtual nodes on one host and share its CPUs (the embedded cluster,
    #: or a site's test setup): ranks on different nodes must not be pinned to one CPU.
    nodes_share_host: bool = False
    #: Environment every job of the partition gets (e.g. OMPI_MCA_mpi_yield_when_idle=1
    #: where nodes share a host, or busy-polling ranks starve each other).
    env_vars: tuple[tuple[str, str], ...] = ()
    #: Shell lines first in every job script (ReFrame's ``prepare_cmds``), e.g. Lmod's
    #: bash init so that the batch shell has ``module`` for the provider's modules.
    prepare_cmds: tuple[str, ...] = ()
    #: GPUs are Slurm GRES (``--gres=gpu:N``, ``--gpu-bind``); false: not managed by
    #: Slurm, each rank's GPU is chosen by ``CUDA_VISIBLE_DEVICES`` alone.
    gres_gpus: bool = True

    @property
    def cpus_per_node(self) -> int:
        return self.node.cores


@dataclass(frozen=True)
class System:
    name: str
    descr: str
    hostnames: tuple[str, ...]
    partitions: tuple[Partition, ...]
    path: Path
    #: ``CHECK.VARIABLE`` → value, the file's ``check_variables``: what a night costs on
    #: this system (iterations, warm-up, time limits), passed to every run as ReFrame's
    #: ``-S`` before the command's own ``-S`` (which wins).
    check_variables: tuple[tuple[str, str], ...] = ()
    #: ReFrame's modules system for the system's jobs (``lmod``: a provider's
    #: ``modules`` become ``module load`` lines); ``nomod``: none.
    modules_system: str = "nomod"

    @property
    def setvars(self) -> tuple[str, ...]:
        """``check_variables`` as ReFrame's ``-S`` values (a list joined by commas)."""
        return tuple(f"{name}={value}" for name, value in self.check_variables)

    def partition(self, name: str) -> Partition:
        for part in self.partitions:
            if part.name == name:
                return part
        raise PerfguardError(f"{self.path}: no partition {name!r}")


def slurm_partition(access: tuple[str, ...]) -> str | None:
    """The Slurm partition a ReFrame partition's ``access`` options name (``-p X``,
    ``--partition=X``); None: Slurm's default partition."""
    for index, option in enumerate(access):
        if option.startswith("--partition="):
            return option.split("=", 1)[1]
        if option.startswith("-p") and len(option) > 2:
            return option[2:]
        if option in ("-p", "--partition") and index + 1 < len(access):
            return access[index + 1]
    return None


# --- loading --------------------------------------------------------------------
def parse_cpu_list(text: str | int | list, where: str) -> tuple[int, ...]:
    """'0-13,28-41' → (0, 1, …, 13, 28, …, 41)."""
    if isinstance(text, int):
        return (text,)
    if isinstance(text, list):
        return tuple(int(c) for c in text)
    cpus: list[int] = []
    try:
        for part in str(text).split(","):
            if "-" in part:
                low, high = part.split("-")
                cpus.extend(range(int(low), int(high) + 1))
            elif part.strip():
                cpus.append(int(part))
    except ValueError as exc:
        raise PerfguardError(f"{where}: bad CPU list {text!r}") from exc
    return tuple(cpus)


def _require(data: dict, key: str, where: str) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise PerfguardError(f"{where}: missing '{key}'")
    return data[key]


def _node(data: dict, where: str) -> NodeTopology:
    numa = tuple(Numa(int(_require(d, "id", f"{where}.numa[{i}]")),
                      parse_cpu_list(_require(d, "cpus", f"{where}.numa[{i}]"),
                                     f"{where}.numa[{i}].cpus"))
                 for i, d in enumerate(data.get("numa") or []))
    hcas = tuple(Hca(name=str(_require(h, "name", f"{where}.hcas[{i}]")),
                     port=int(h.get("port", 1)), link_layer=str(h.get("link_layer", "InfiniBand")),
                     rate_gbps=float(h.get("rate_gbps", 0)),
                     numa=int(_require(h, "numa", f"{where}.hcas[{i}]")),
                     gid_index=h.get("gid_index"), speed=str(h.get("speed", "")))
                 for i, h in enumerate(data.get("hcas") or []))
    gpus = tuple(Gpu(index=int(_require(g, "index", f"{where}.gpus[{i}]")),
                     model=str(g.get("model", "")), numa=int(g.get("numa", 0)),
                     affinity={str(k): str(v) for k, v in (g.get("affinity") or {}).items()},
                     bus_id=str(g.get("bus_id", "")))
                 for i, g in enumerate(data.get("gpus") or []))
    numa_ids = {d.id for d in numa}
    for hca in hcas:
        if numa_ids and hca.numa not in numa_ids:
            raise PerfguardError(f"{where}: HCA {hca.name} on NUMA {hca.numa}, which the "
                                 f"node does not have ({sorted(numa_ids)})")
    for gpu in gpus:
        unknown = set(gpu.affinity) - {h.name for h in hcas}
        bad = {v for v in gpu.affinity.values() if v not in AFFINITY_ORDER}
        if unknown or bad:
            raise PerfguardError(f"{where}: GPU {gpu.index} affinity names unknown HCAs "
                                 f"{sorted(unknown)} or levels {sorted(bad)} "
                                 f"(levels: {', '.join(AFFINITY_ORDER)})")
    memory = data.get("memory_mib")
    return NodeTopology(numa, hcas, gpus, int(memory) if memory else None)


def _partition(data: dict, where: str) -> Partition:
    name = str(_require(data, "name", where))
    where = f"{where} ({name})"
    provider = data.get("binary_provider") or {"kind": "system"}
    if provider.get("kind") not in PROVIDER_KINDS:
        raise PerfguardError(f"{where}: binary_provider.kind must be one of {PROVIDER_KINDS}")
    node = _node(_require(data, "node", where), f"{where}.node")
    features = list(data.get("features") or [])
    features += [f"hca_{h.name}" for h in node.hcas]
    if node.hcas:
        features.append("hcas")
    if any(h.rdma for h in node.hcas):
        features.append("ib")
    if node.gpus:
        features.append("gpu")
    return Partition(
        name=name, descr=str(data.get("descr", "")),
        access=tuple(data.get("access") or []), environs=tuple(_require(data, "environs", where)),
        features=tuple(dict.fromkeys(features)),
        max_jobs=int(data.get("max_jobs", data.get("nodes", 2))),
        nodes=int(data.get("nodes", 2)), mpi_flavour=str(_require(data, "mpi", where)),
        srun_options=tuple(data.get("srun_options") or ["--mpi=pmix"]), provider=provider,
        node=node, measurement_options=tuple(data.get("measurement_options") or []),
        nodes_share_host=bool(data.get("nodes_share_host", False)),
        gres_gpus=bool(data.get("gres_gpus", True)),
        env_vars=tuple((str(k), str(v)) for k, v in (data.get("env_vars") or {}).items()),
        prepare_cmds=tuple(str(c) for c in data.get("prepare_cmds") or ()))


def load_system(path: Path) -> System:
    data = load_yaml(path, "topology", schema="topology")
    where = str(path)
    try:
        partitions = tuple(_partition(p, f"{where}: partitions[{i}]")
                           for i, p in enumerate(_require(data, "partitions", where)))
        return System(name=str(_require(data, "system", where)),
                      descr=str(data.get("descr", "")),
                      hostnames=tuple(data.get("hostnames") or [".*"]),
                      partitions=partitions, path=Path(path),
                      modules_system=str(data.get("modules_system", "nomod")),
                      check_variables=tuple(
                          (str(name), _setvar_value(value))
                          for name, value in (data.get("check_variables") or {}).items()))
    except (TypeError, ValueError, AttributeError) as exc:
        raise PerfguardError(f"{where}: malformed topology ({exc})") from exc


def _setvar_value(value: Any) -> str:
    """A YAML value as ReFrame's ``-S`` reads it: a list comma-joined, a bool lowercase."""
    if isinstance(value, list):
        return ",".join(_setvar_value(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def named_system(systems: Iterable[System], name: str) -> System | None:
    """The system called ``name`` (``SYSTEM:PARTITION`` too) among these; None where none
    is. A lazy iterable is read only up to it."""
    wanted = name.partition(":")[0]
    return next((s for s in systems if s.name == wanted), None)


def find_system(files: list[Path], name: str) -> System | None:
    """The system called ``name`` (``SYSTEM:PARTITION`` too) among these topology files
    (``paths.topology_files``), every file loaded; None where none is."""
    return named_system(load_systems(files), name)


def load_systems(files: list[Path]) -> list[System]:
    """The systems of these topology files (``paths.site_folder("systems")``)."""
    return [load_system(p) for p in files]


def all_hca_names(files: list[Path]) -> list[str]:
    """Every HCA named in any topology file: the values of the checks' `hca` parameter."""
    names: dict[str, None] = {}
    for system in load_systems(files):
        for part in system.partitions:
            names.update((h.name, None) for h in part.node.hcas)
    return list(names)
