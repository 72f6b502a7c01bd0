"""Pinning from the topology: cores on the HCA's NUMA domain, the GPU closest to the HCA,
the HCA and GPUDirect through the MPI flavour's knobs (site_config/mpi_flavours.yaml).

The HCAs come from every topology file ReFrame's systems come from (the site's, the
shipped examples, the embedded cluster's): the checks know no particular cluster. For a
partition without a topology file nothing is pinned beyond ``--cpu-bind=cores``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from perfguard.contract import (
    Hca,
    NodeTopology,
    Partition,
    all_hca_names,
    load_system,
    site_file,
    topology_files,
)

#: The value of a check's ``hca`` parameter that means: no HCA pinning.
AUTO_HCA = "auto"
#: Values of the checks' ``hca`` parameter: every HCA any topology file names, and the
#: embedded cluster's network (loopback).
HCA_CHOICES = list(dict.fromkeys([AUTO_HCA, *all_hca_names(topology_files())]))


@functools.cache
def mpi_flavours() -> dict:
    return yaml.safe_load(site_file("mpi_flavours.yaml").read_text())


@functools.cache
def _system(path: str):
    return load_system(Path(path))


def partition_topology(partition) -> Partition | None:
    """The topology of a ReFrame partition, or None where there is no topology file."""
    path = partition.extras.get("topology_file")
    return _system(path).partition(partition.name) if path else None


def hca_valid_systems(hca: str, extra_features: str = "") -> list[str]:
    """Only partitions that have this HCA; 'auto' only those that have none."""
    base = f"+hca_{hca}" if hca != AUTO_HCA else "+mpi -hcas"
    return [f"{base} {extra_features}".strip()]


def with_feature(valid_systems: list[str], feature: str) -> list[str]:
    """The check's system specs narrowed to partitions with ``feature`` (``sharp``,
    ``ucx``): one place for a variant that needs what only some fabrics have."""
    return [f"{spec} +{feature}" for spec in valid_systems]


def flavour_env(flavour: str, hca: Hca | None, gpudirect: bool | None,
                device_buffers: bool) -> dict[str, str]:
    """The env vars that select ``hca`` and switch GPUDirect for one MPI flavour."""
    table = mpi_flavours()[flavour]
    env: dict[str, str] = {}
    if hca is not None:
        env.update(for_hca(table["hca"], hca))
    if device_buffers:
        env.update(table.get("device_buffers") or {})
        if hca is None:  # no HCA whose transport carries device memory: say which one
            env.update(table.get("device_buffers_without_hca") or {})
    if gpudirect is not None:
        env.update(table["gdr_on" if gpudirect else "gdr_off"])
    return env


def for_hca(knobs: dict[str, str], hca: Hca) -> dict[str, str]:
    """A flavour's knobs with {hca}, {port} and {device} (UCX's name of the port) filled."""
    device = f"{hca.name}:{hca.port}" if hca.rdma else hca.name
    return {k: str(v).format(hca=hca.name, port=hca.port, device=device)
            for k, v in knobs.items()}


def sharp_env(flavour: str, hca: Hca, requested: bool) -> dict[str, str] | None:
    """The env vars that ask ``flavour`` for in-network collectives on ``hca`` (or for
    software ones), or None where the flavour has no trace that proves which ran."""
    table = mpi_flavours()[flavour]
    if not table.get("sharp_proof"):
        return None
    return for_hca(table["sharp_on" if requested else "sharp_off"], hca)


def map_cpu(cores: list[int]) -> str:
    return "map_cpu:" + ",".join(str(c) for c in cores)


@dataclass(frozen=True)
class Plan:
    """What pinning to one HCA means for a job: its ranks' cores (empty: Slurm's
    ``--cpu-bind=cores``), one core map per node where virtual nodes share a host, the
    GPUs of the local ranks, and the MPI flavour's env vars."""
    topology: Partition | None
    cores: list[int] = field(default_factory=list)
    node_cores: list[list[int]] = field(default_factory=list)
    gpus: list = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def plan(partition, hca_name: str, ranks_per_node: int, num_tasks: int,
         gpudirect: bool | None, device_buffers: bool, flavour: str | None = None) -> Plan:
    """Cores on the HCA's NUMA domain, the GPU closest to it for device buffers, the
    flavour's knobs for HCA and GPUDirect. Without a topology file nothing is pinned;
    with ``auto`` (no HCA to follow) device buffers still get a GPU per rank, each rank's
    core on its GPU's NUMA domain. More ranks than cores: the shape check skips it."""
    topology = partition_topology(partition)
    flavour = flavour or partition.extras.get("mpi_flavour", "openmpi-ucx")
    if topology is None:
        return Plan(None, env=flavour_env(flavour, None, gpudirect, device_buffers))
    node: NodeTopology = topology.node
    if hca_name == AUTO_HCA:
        env = flavour_env(flavour, None, gpudirect, device_buffers)
        if device_buffers and node.gpus and ranks_per_node <= node.cores:
            gpus = node.gpus_for_ranks(ranks_per_node)
            return Plan(topology, node.cores_near_gpus(gpus), gpus=gpus, env=env)
        return Plan(topology, env=env)
    hca = node.hca(hca_name)
    if ranks_per_node > node.cores:
        return Plan(topology)
    nodes = -(-num_tasks // ranks_per_node)
    node_cores = []
    if nodes > 1 and partition.extras.get("nodes_share_host"):
        # Virtual nodes on one host: one core map per node, or every node's rank 0 would
        # sit on the same host CPU and the "inter-node" ranks take turns on it.
        node_cores = node.cores_per_node_sharing_a_host(hca, ranks_per_node, nodes)
    gpu = node.closest_gpu(hca)
    return Plan(topology, node.cores_near(hca, ranks_per_node), node_cores,
                [gpu] * ranks_per_node if gpu is not None and device_buffers else [],
                flavour_env(flavour, hca, gpudirect, device_buffers))


@dataclass(frozen=True)
class GpuBinding:
    rank_gpus: list[list]
    first: int
    #: ``--gpu-bind=map_gpu:…`` where GPUs are Slurm GRES (Slurm then sets each task's
    #: CUDA_VISIBLE_DEVICES), else empty.
    srun_option: str
    #: CUDA_VISIBLE_DEVICES in local-rank order (the MPI libraries and OMB take device
    #: ``local rank % visible devices``), which alone selects them where not GRES.
    visible: str


def gpu_binding(topology: Partition, gpus: list) -> GpuBinding:
    """Each local rank on its GPU."""
    indices = [str(gpu.index) for gpu in gpus]
    option = ""
    if topology.gres_gpus:
        # Slurm reuses the map for the next tasks: one GPU for all is one entry
        mapped = indices[:1] if len(set(indices)) == 1 else indices
        option = f"--gpu-bind=map_gpu:{','.join(mapped)}"
    return GpuBinding([[gpu.index, gpu.bus_id] for gpu in gpus], gpus[0].index, option,
                      ",".join(dict.fromkeys(indices)))


def hca_rate_gbps(partition, hca_name: str) -> float | None:
    topology = partition_topology(partition)
    if topology is None or hca_name == AUTO_HCA:
        return None
    return topology.node.hca(hca_name).data_rate_gbps
