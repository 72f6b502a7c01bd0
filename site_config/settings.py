"""ReFrame configuration for perfguard.

System ``local`` is the embedded cluster: it is filled from the ``cluster.json``
that `perfguard cluster up` writes, so partitions, nodes and CPUs are those of
the cluster that is actually running. Real sites add their systems as topology
files beside this one (see docs/).
"""

import json
import os
from pathlib import Path

from perfguard.contract.topology import load_system, load_systems
from perfguard.paths import TESTS_DIR, embedded_topology_file, site_folder
from perfguard.paths import state_dir as _state_dir


def _cluster_record() -> dict:
    record = _state_dir() / "cluster.json"
    if record.exists():
        return json.loads(record.read_text())
    # No cluster yet: a placeholder so `reframe --show-config` and listing still work.
    return {"shared": str(_state_dir() / "shared"), "nodes_detail": []}


def _embedded_providers() -> list[dict]:
    """$PERFGUARD_REPLAY (recorded outputs, tests only: what it has no recording of comes
    from Debian's packages), else $PERFGUARD_PREFIX (e.g. an OMB installation) and
    $PERFGUARD_SPACK_ENV (a stack of spack_envs/, with the Spack configuration scope
    $PERFGUARD_SPACK_CONFIG if set), then Debian's packages."""
    if os.environ.get("PERFGUARD_REPLAY"):
        return [{"kind": "replay", "path": os.environ["PERFGUARD_REPLAY"]}, {"kind": "system"}]
    prefix = os.environ.get("PERFGUARD_PREFIX")
    stack = os.environ.get("PERFGUARD_SPACK_ENV")
    spack = {"kind": "spack", "env": stack, "config": os.environ.get("PERFGUARD_SPACK_CONFIG")}
    # $PERFGUARD_PREFIX_MODULES: the prefix's modules ("omb/7.4", space- or comma-
    # separated), loaded in each job from the caller's MODULEPATH (needs Lmod: _lmod_init)
    modules = os.environ.get("PERFGUARD_PREFIX_MODULES", "").replace(",", " ").split()
    return [*([{"kind": "prefix", "path": prefix, **({"modules": modules} if modules else {})}]
              if prefix else []),
            *([{k: v for k, v in spack.items() if v}] if stack else []), {"kind": "system"}]


#: Debian's Lmod (install.sh installs package lmod).
DEBIAN_LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")


def _lmod_init() -> Path | None:
    """Lmod's bash init where the host has Lmod: that of the Lmod ``$LMOD_CMD`` names (a
    shell that initialised Lmod; a site's own build), else Debian's. The file, not the
    shell's state, decides: CI and cron shells never source /etc/profile.d/lmod.sh, so
    ``$LMOD_CMD`` alone would miss the Lmod that install.sh put there, and a job needs
    the init file anyway (its batch shell has no ``module`` until it sources one)."""
    lmod_cmd = os.environ.get("LMOD_CMD")
    candidates = [Path(lmod_cmd).parent.parent / "init" / "bash"] if lmod_cmd else []
    return next((p for p in [*candidates, DEBIAN_LMOD_INIT] if p.is_file()), None)


def partition_config(system, part, **overrides) -> dict:
    """A ReFrame partition from a topology partition (site files and the embedded one)."""
    config = {
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
        "resources": [{"name": "_rfm_gpu", "options": ["--gres=gpu:{num_gpus_per_node}"]}],
        "env_vars": [list(pair) for pair in part.env_vars],
        "prepare_cmds": list(part.prepare_cmds),
        "extras": {
            "topology_file": str(system.path),
            "srun_options": list(part.srun_options),
            "measurement_options": list(part.measurement_options),
            "num_nodes": part.nodes,
            "mpi_flavour": part.mpi_flavour,
            "binary_provider": dict(part.provider),
            "nodes_share_host": part.nodes_share_host,
            "gres_gpus": part.gres_gpus,
            "memory_mib": part.node.memory_mib,
        },
    }
    extras = overrides.pop("extras", {})
    config.update(overrides)
    config["extras"].update(extras)
    return config


def embedded_system() -> dict:
    """System ``local``: the running embedded cluster, from the topology `cluster up` wrote."""
    cluster = _cluster_record()
    shared = Path(cluster["shared"])
    system = {
        "name": "local",
        "descr": "perfguard embedded Slurm cluster (virtual nodes on one host)",
        "hostnames": [".*"],
        "stagedir": str(shared / "stage"),
        "outputdir": str(shared / "output"),
        "resourcesdir": str(shared / "resources"),
    }
    topology_file = embedded_topology_file()
    if topology_file is None:
        return {**system, "partitions": [{
            "name": "compute", "scheduler": "local", "launcher": "local",
            "environs": ["gnu-openmpi"], "descr": "no embedded cluster is up"}]}
    topology = load_system(topology_file)
    node_cpus = {n["name"]: n["cpus"] for n in cluster["nodes_detail"]}
    lmod = _lmod_init()  # a provider's modules load in the job where the host has Lmod
    if lmod is not None:
        system["modules_system"] = "lmod"
    return {**system, "partitions": [partition_config(
        topology, part,
        time_limit="10m",
        **({"prepare_cmds": [f"source {lmod}", *part.prepare_cmds]} if lmod else {}),
        extras={"node_cpus": node_cpus, "binary_provider": _embedded_providers()},
    ) for part in topology.partitions]}


def topology_systems() -> list:
    """One ReFrame system per topology file in site_config/systems/."""
    return [{
        "name": system.name,
        "descr": system.descr,
        "hostnames": list(system.hostnames),
        "modules_system": system.modules_system,
        "stagedir": str(_state_dir() / "shared" / "stage"),
        "outputdir": str(_state_dir() / "shared" / "output"),
        "partitions": [partition_config(system, part) for part in system.partitions],
    } for system in load_systems(site_folder("systems"))]


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
            "check_search_path": [str(TESTS_DIR)],
            "check_search_recursive": True,
            # `module load` lines are written into the job, never tried in ReFrame's own
            # process: a login node need not have the compute nodes' modules, and a
            # module that does not load is found in the job, on the node, and named
            # there (MeasuredCheck.first_in_the_job), not a failure before submission
            "resolve_module_conflicts": False,
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
