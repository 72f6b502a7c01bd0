"""ReFrame configuration for perfguard.

System ``local`` is the embedded cluster: it is filled from the ``cluster.json``
that `perfguard cluster up` writes, so partitions, nodes and CPUs are those of
the cluster that is actually running. Real sites add their systems as topology
files beside this one (see docs/).
"""

import json
import os
from pathlib import Path

from perfguard.paths import REPO_ROOT, SITE_CONFIG_DIR
from perfguard.paths import state_dir as _state_dir
from perfguard.topology import load_systems


def _cluster_record() -> dict:
    record = _state_dir() / "cluster.json"
    if record.exists():
        return json.loads(record.read_text())
    # No cluster yet: a placeholder so `reframe --show-config` and listing still work.
    return {"shared": str(_state_dir() / "shared"), "nodes_detail": [], "slurm_conf": ""}


def embedded_system() -> dict:
    cluster = _cluster_record()
    shared = Path(cluster["shared"])
    node_cpus = {n["name"]: n["cpus"] for n in cluster["nodes_detail"]}
    cpus_per_node = min((len(c) for c in node_cpus.values()), default=1)
    return {
        "name": "local",
        "descr": "perfguard embedded Slurm cluster (virtual nodes on one host)",
        "hostnames": [".*"],
        "stagedir": str(shared / "stage"),
        "outputdir": str(shared / "output"),
        "resourcesdir": str(shared / "resources"),
        "partitions": [
            {
                "name": "compute",
                "descr": "virtual slurmd nodes, one CPU set each, Open MPI over PMIx",
                "scheduler": "slurm",
                "launcher": "srun",
                "access": ["--partition=compute"],
                "environs": ["gnu-openmpi"],
                "max_jobs": 4,
                "time_limit": "10m",
                "processor": {"num_cpus": cpus_per_node, "num_cpus_per_core": 1,
                              "num_sockets": 1, "num_cpus_per_socket": cpus_per_node},
                "env_vars": [
                    # Virtual nodes share the host's cores: busy-polling ranks must yield.
                    ["OMPI_MCA_mpi_yield_when_idle", "1"],
                ],
                "extras": {
                    "srun_options": ["--mpi=pmix"],
                    "mpi_flavour": "openmpi-ucx",
                    "node_cpus": node_cpus,
                    "num_nodes": len(node_cpus),
                    # $PERFGUARD_PREFIX (e.g. an OMB installation) first, then Debian's.
                    "binary_provider": [
                        *([{"kind": "prefix", "path": os.environ["PERFGUARD_PREFIX"]}]
                          if os.environ.get("PERFGUARD_PREFIX") else []),
                        {"kind": "system"},
                    ],
                },
                "features": ["embedded", "mpi", "ucx"],
            }
        ],
    }


def topology_systems() -> list:
    """One ReFrame system per topology file in site_config/systems/."""

    systems = []
    for system in load_systems(SITE_CONFIG_DIR / "systems"):
        partitions = []
        for part in system.partitions:
            partitions.append({
                "name": part.name,
                "descr": part.descr,
                "scheduler": "slurm",
                "launcher": "srun",
                "access": list(part.access),
                "environs": list(part.environs),
                "max_jobs": part.max_jobs,
                "features": list(part.features),
                "processor": {"num_cpus": part.cpus_per_node, "num_cpus_per_core": 1,
                              "num_sockets": len(part.node.numa),
                              "num_cpus_per_socket": len(part.node.numa[0].cpus)},
                "devices": [{"type": "gpu", "arch": "cuda", "num_devices": len(part.node.gpus)}]
                           if part.node.gpus else [],
                "resources": [{"name": "_rfm_gpu",
                               "options": ["--gres=gpu:{num_gpus_per_node}"]}],
                "extras": {
                    "topology_file": str(system.path),
                    "srun_options": list(part.srun_options),
                    "num_nodes": part.nodes,
                    "mpi_flavour": part.mpi_flavour,
                    "binary_provider": dict(part.provider),
                },
            })
        systems.append({
            "name": system.name,
            "descr": system.descr,
            "hostnames": list(system.hostnames),
            "stagedir": str(_state_dir() / "shared" / "stage"),
            "outputdir": str(_state_dir() / "shared" / "output"),
            "partitions": partitions,
        })
    return systems


site_configuration = {
    "systems": [embedded_system(), *topology_systems()],
    "environments": [
        {
            "name": "gnu-openmpi",
            "cc": "mpicc",
            "cxx": "mpicxx",
            "ftn": "mpif90",
            "features": ["mpi", "openmpi"],
        },
        {
            "name": "gnu-mvapich2",
            "cc": "mpicc",
            "cxx": "mpicxx",
            "ftn": "mpif90",
            "features": ["mpi", "mvapich2"],
        },
    ],
    "general": [
        {
            "check_search_path": [str(REPO_ROOT / "reframe_tests")],
            "check_search_recursive": True,
        }
    ],
    # perfguard's PostgreSQL is the results store, not ReFrame's sqlite file.
    "storage": [{"enable": False}],
    "logging": [
        {
            "level": "debug",
            "handlers": [
                {"type": "stream", "name": "stdout", "level": "info",
                 "format": "%(message)s"},
                {"type": "file", "name": str(_state_dir() / "log" / "reframe.log"),
                 "level": "debug", "format": "[%(asctime)s] %(levelname)s: %(message)s",
                 "append": True},
            ],
        }
    ],
}
