"""Pinning from the topology: cores on the HCA's NUMA domain, the GPU closest to the HCA,
the HCA and GPUDirect through the MPI flavour's knobs (site_config/mpi_flavours.yaml).

The HCAs come from every topology file ReFrame's systems come from (the site's, the
shipped examples, the embedded cluster's): the checks know no particular cluster. For a
partition without a topology file nothing is pinned beyond ``--cpu-bind=cores``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import reframe as rfm
import yaml
from reframe.core.builtins import variable

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


class HcaPinning(rfm.RegressionTestPlugin):
    """Turns an ``hca`` choice into srun binding, GPU selection and MPI env vars.

    A check calls ``pin_to_hca(self.hca, ranks_per_node, gpudirect, device_buffers)``
    after setup; afterwards ``cpu_bind``, ``env_vars`` and ``pinned_cores`` say what
    was applied and the sanity check compares srun's report with ``pinned_cores``.
    """

    #: Cores each node's ranks were pinned to (local rank order); empty: not pinned.
    pinned_cores = variable(list, value=[])
    #: The GPU index exposed to the ranks; -1 when none.
    pinned_gpu = variable(int, value=-1)
    #: Each local rank's GPU (index, PCI bus id), as the topology chose them.
    rank_gpus = variable(list, value=[])

    def pin_to_hca(self, hca_name: str, ranks_per_node: int, gpudirect: bool | None = None,
                   device_buffers: bool = False, flavour: str | None = None) -> None:
        """``flavour`` overrides the partition's MPI flavour (UCX tools use UCX's knobs)."""
        topology = partition_topology(self.current_partition)
        flavour = flavour or self.current_partition.extras.get("mpi_flavour", "openmpi-ucx")
        if topology is None:
            self.env_vars.update(flavour_env(flavour, None, gpudirect, device_buffers))
            return
        node: NodeTopology = topology.node
        if hca_name == AUTO_HCA:
            if device_buffers and node.gpus and ranks_per_node <= node.cores:
                # no HCA to follow: each rank on a GPU of its own where there are several,
                # its core on that GPU's NUMA domain
                gpus = node.gpus_for_ranks(ranks_per_node)
                self.pin_cores(node.cores_near_gpus(gpus))
                self.pin_gpus(topology, gpus)
            self.env_vars.update(flavour_env(flavour, None, gpudirect, device_buffers))
            return
        hca = node.hca(hca_name)
        if ranks_per_node > node.cores:
            return  # the shape check skips it: more ranks than the node has cores
        self.pin_cores(node.cores_near(hca, ranks_per_node))
        nodes = -(-(self.num_tasks or 1) // ranks_per_node)
        if nodes > 1 and self.current_partition.extras.get("nodes_share_host"):
            # Virtual nodes on one host: one core map per node, or every node's rank 0
            # would sit on the same host CPU and the "inter-node" ranks take turns on it.
            self.node_cores = node.cores_per_node_sharing_a_host(hca, ranks_per_node, nodes)
        gpu = node.closest_gpu(hca)
        if gpu is not None and device_buffers:
            self.pin_gpus(topology, [gpu] * ranks_per_node)
        self.env_vars.update(flavour_env(flavour, hca, gpudirect, device_buffers))

    def pin_cores(self, cores: list[int]) -> None:
        self.pinned_cores = cores
        self.cpu_bind = map_cpu(cores)
        self.exclusive_access = True

    def pin_gpus(self, topology: Partition, gpus: list) -> None:
        """Each local rank on its GPU: ``--gpu-bind=map_gpu`` where GPUs are Slurm GRES
        (Slurm then sets each task's CUDA_VISIBLE_DEVICES), and CUDA_VISIBLE_DEVICES
        listing them in local-rank order (the MPI libraries and OMB take device
        ``local rank % visible devices``), which alone selects them where they are not."""
        self.rank_gpus = [[gpu.index, gpu.bus_id] for gpu in gpus]
        self.pinned_gpu = gpus[0].index
        indices = [str(gpu.index) for gpu in gpus]
        if topology.gres_gpus:
            # Slurm reuses the map for the next tasks: one GPU for all is one entry
            mapped = indices[:1] if len(set(indices)) == 1 else indices
            self.num_gpus_per_node = len(topology.node.gpus)
            self.srun_extra = [*self.srun_extra, f"--gpu-bind=map_gpu:{','.join(mapped)}"]
        self.env_vars["CUDA_VISIBLE_DEVICES"] = ",".join(dict.fromkeys(indices))

    def hca_rate_gbps(self, hca_name: str) -> float | None:
        topology = partition_topology(self.current_partition)
        if topology is None or hca_name == AUTO_HCA:
            return None
        return topology.node.hca(hca_name).data_rate_gbps
