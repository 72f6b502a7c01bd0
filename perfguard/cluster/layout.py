"""The embedded cluster's shape: where every file lives, which ports, which CPUs per node.

``up`` writes the layout to ``cluster.json`` in the state directory; ``status``,
``down``, the ReFrame site config and the CLI read it back from there, so every
consumer sees the cluster that is actually running.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote

from perfguard.errors import PerfguardError
from perfguard.secrets import write_private

CLUSTER_NAME = "perfguard"
PARTITION = "compute"
#: Where a scheduled nightly's driver job runs, never on a node it measures (a site's
#: login or service partition): one virtual node of its own, shared by such jobs.
SERVICE_PARTITION = "service"
SERVICE_NODE = "service1"
#: The service node's slurmd port, below the compute nodes' (every daemon's is lower).
SERVICE_NODE_PORT = 39
DEFAULT_NODES = 4
#: Memory each virtual node declares to Slurm (RealMemory) and in its topology.
NODE_MEMORY_MIB = 2048
DEFAULT_PORT_BASE = 16800
#: slurmd of node K listens on port_base + FIRST_NODE_PORT + K - 1: after every daemon's
#: port (PostgreSQL is +32), so 64 nodes and more never take another daemon's port.
FIRST_NODE_PORT = 40
DB_NAME = "perfguard"
DB_USER = "perfguard"
GRAFANA_USER = "perfguard_grafana"


#: The Slurm license (count 1) every measuring job of the embedded cluster holds.
MEASUREMENT_LICENSE = "perfguard_host"

#: The virtual nodes' network: the host's loopback, which the embedded topology
#: describes as the nodes' one "HCA" so that pinning to it is exercised for real.
EMBEDDED_HCA = "lo"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    port: int
    cpus: tuple[int, ...]


@dataclass(frozen=True)
class ClusterLayout:
    state: Path
    nodes: int = DEFAULT_NODES
    port_base: int = DEFAULT_PORT_BASE
    host_cpus: tuple[int, ...] = field(
        default_factory=lambda: tuple(sorted(os.sched_getaffinity(0))))
    #: Sockets (= NUMA domains) per virtual node; the host's CPUs are split among them.
    sockets: int = 2
    #: Leaf switches in Slurm's tree topology (topology.conf), the nodes dealt out in
    #: order; 0: no topology (Slurm's flat default).
    leaves: int = 0
    #: Where a Slurm built from source is installed (its bin/ and sbin/ come first on
    #: every daemon's and client's PATH); "": the distribution's Slurm on the PATH.
    slurm_prefix: str = ""

    # --- ports -------------------------------------------------------------
    @property
    def mariadb_port(self) -> int:
        return self.port_base + 6

    @property
    def slurmctld_port(self) -> int:
        return self.port_base + 17

    @property
    def slurmdbd_port(self) -> int:
        return self.port_base + 19

    @property
    def postgres_port(self) -> int:
        return self.port_base + 32

    def all_ports(self) -> dict[str, int]:
        ports = {
            "mariadb": self.mariadb_port,
            "slurmctld": self.slurmctld_port,
            "slurmdbd": self.slurmdbd_port,
            "postgresql": self.postgres_port,
        }
        ports.update({f"slurmd {n.name}": n.port for n in self.slurmd_specs()})
        return ports

    # --- nodes -------------------------------------------------------------
    @property
    def numa_domains(self) -> tuple[tuple[int, ...], ...]:
        """Every node has all host CPUs, split into ``sockets`` NUMA domains in order.

        On a 2-CPU host with 2 sockets: NUMA 0 = CPU 0, NUMA 1 = CPU 1. Nodes share the
        host's CPUs (Slurm accounts each node's cores separately), so ranks on
        different nodes may share a core: `OMPI_MCA_mpi_yield_when_idle=1` keeps
        busy-polling ranks from starving each other.
        """
        cpus = self.host_cpus
        sockets = max(1, min(self.sockets, len(cpus)))
        per_socket = len(cpus) // sockets
        return tuple(cpus[s * per_socket:(s + 1) * per_socket] for s in range(sockets))

    def node_specs(self) -> list[NodeSpec]:
        """The compute nodes: what the checks measure."""
        cpus = tuple(c for domain in self.numa_domains for c in domain)
        return [NodeSpec(f"node{index + 1}", self.port_base + FIRST_NODE_PORT + index, cpus)
                for index in range(self.nodes)]

    def slurmd_specs(self) -> list[NodeSpec]:
        """Every slurmd the cluster runs: the compute nodes and the service node."""
        cpus = tuple(c for domain in self.numa_domains for c in domain)
        return [*self.node_specs(),
                NodeSpec(SERVICE_NODE, self.port_base + SERVICE_NODE_PORT, cpus)]

    def topology(self) -> dict:
        """The embedded system in the topology-file format of site_config/systems/.

        The nodes' network (loopback) is their one HCA, on the last NUMA domain, so a
        check pinned to it binds to cores Slurm would not pick by itself.
        """
        domains = self.numa_domains
        return {
            "system": "local",
            "descr": "perfguard embedded Slurm cluster (virtual nodes on one host)",
            "partitions": [{
                "name": PARTITION,
                "descr": f"{self.nodes} virtual slurmd nodes, {len(domains)} NUMA domains "
                         f"of {len(domains[0])} core(s) each, Open MPI over PMIx and TCP",
                "access": [f"--partition={PARTITION}"],
                "environs": ["gnu-openmpi"],
                "features": ["embedded", "mpi", "ucx"],
                "nodes": self.nodes,
                "max_jobs": 4,
                # One measurement at a time: the virtual nodes share the host's CPUs, and
                # benchmarks side by side measured each other (latency 0.34–24 µs).
                "measurement_options": [f"--licenses={MEASUREMENT_LICENSE}"],
                "mpi": "openmpi-tcp",
                # Virtual nodes on one host: spread pinned ranks over its CPUs, and let
                # busy-polling ranks yield, or they starve each other.
                "nodes_share_host": True,
                "env_vars": {"OMPI_MCA_mpi_yield_when_idle": "1"},
                "srun_options": ["--mpi=pmix"],
                "node": {
                    "memory_mib": NODE_MEMORY_MIB,
                    "numa": [{"id": i, "cpus": list(d)} for i, d in enumerate(domains)],
                    "hcas": [{"name": EMBEDDED_HCA, "port": 1, "link_layer": "loopback",
                              "numa": len(domains) - 1}],
                },
            }],
        }

    @property
    def node_range(self) -> str:
        return f"node[1-{self.nodes}]" if self.nodes > 1 else "node1"

    def leaf_nodes(self) -> dict[str, list[str]]:
        """Leaf switch → its nodes: ``leaves`` consecutive blocks, as even as they go."""
        names = [n.name for n in self.node_specs()]
        count = max(1, min(self.leaves, len(names)))
        size, extra = divmod(len(names), count)
        out, start = {}, 0
        for leaf in range(count):
            end = start + size + (leaf < extra)
            out[f"leaf{leaf + 1}"] = names[start:end]
            start = end
        return out

    # --- files -------------------------------------------------------------
    @property
    def etc(self) -> Path:
        return self.state / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def topology_file(self) -> Path:
        return self.etc / "topology.yaml"

    @property
    def logs(self) -> Path:
        return self.state / "log"

    @property
    def run_dir(self) -> Path:
        return self.state / "run"

    @property
    def munge_socket(self) -> Path:
        return self.state / "munge" / "munge.socket"

    @property
    def mariadb_dir(self) -> Path:
        return self.state / "mariadb"

    @property
    def mariadb_socket(self) -> Path:
        return self.mariadb_dir / "mariadb.sock"

    @property
    def postgres_dir(self) -> Path:
        return self.state / "postgres"

    @property
    def shared(self) -> Path:
        """The cluster's 'shared filesystem': stage and output dirs seen by every node."""
        return self.state / "shared"

    def node_tmp(self, node: str) -> Path:
        return self.state / "nodes" / node / "tmp"

    def pid_file(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    # --- secrets -----------------------------------------------------------
    @property
    def secrets(self) -> Path:
        return self.state / "secrets"

    @property
    def pgpass(self) -> Path:
        """libpq password file (0600): the passwords of perfguard's and Grafana's roles."""
        return self.secrets / "pgpass"

    def role_passwords(self) -> dict[str, str]:
        """Each role's password, generated at the first start and kept 0600."""
        known = {}
        if self.pgpass.exists():
            for line in self.pgpass.read_text().splitlines():
                *_, role, password = line.split(":")
                known[role] = password
        if set(known) >= {DB_USER, GRAFANA_USER}:
            return known
        for role in (DB_USER, GRAFANA_USER):
            known.setdefault(role, secrets.token_urlsafe(24))
        self.secrets.mkdir(parents=True, exist_ok=True)
        self.secrets.chmod(0o700)
        write_private(self.pgpass, "".join(f"127.0.0.1:*:*:{role}:{password}\n"
                                           for role, password in known.items()))
        return known

    # --- client side -------------------------------------------------------
    @property
    def dsn(self) -> str:
        return self.dsn_for(DB_NAME)

    def dsn_for(self, database: str, role: str = DB_USER) -> str:
        """A DSN that names the password file, never the password."""
        passfile = quote(str(self.pgpass), safe="/")
        return (f"postgresql://{role}@127.0.0.1:{self.postgres_port}/{database}"
                f"?passfile={passfile}")

    def slurm_dirs(self) -> list[Path]:
        """The directories the cluster's Slurm programs are taken from before the PATH:
        the prefix's bin/ (sbatch, srun, sacct, scrontab) and sbin/ (the daemons)."""
        if not self.slurm_prefix:
            return []
        prefix = Path(self.slurm_prefix)
        return [prefix / "bin", prefix / "sbin"]

    def slurm_environ(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: ours) with this cluster's slurm.conf and Slurm programs:
        the one place every daemon, client, ReFrame job and scheduled nightly finds
        them, so a Slurm built from source (``slurm_prefix``) is used everywhere."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.slurm_conf)
        dirs = [str(d) for d in self.slurm_dirs()]
        if dirs:
            rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep)
                    if p and p not in dirs]
            env["PATH"] = os.pathsep.join(dirs + rest)
        return env

    def client_env(self) -> dict[str, str]:
        """Environment for Slurm clients (sinfo, sbatch, sacct) and for perfguard itself."""
        env = self.slurm_environ()
        env["PERFGUARD_DSN"] = self.dsn
        return env

    # --- persistence -------------------------------------------------------
    @property
    def record(self) -> Path:
        return self.state / "cluster.json"

    def save(self) -> None:
        data = asdict(self)
        data["state"] = str(self.state)
        data["host_cpus"] = list(self.host_cpus)
        data["hostname"] = socket.gethostname()
        data["dsn"] = self.dsn
        data["slurm_conf"] = str(self.slurm_conf)
        data["shared"] = str(self.shared)
        data["nodes_detail"] = [
            {"name": n.name, "port": n.port, "cpus": list(n.cpus)} for n in self.node_specs()
        ]
        data["topology_file"] = str(self.topology_file)
        self.state.mkdir(parents=True, exist_ok=True)
        tmp = self.record.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.record)
        import yaml  # not at import time: `cluster` runs on the distribution's python too

        self.etc.mkdir(parents=True, exist_ok=True)
        self.topology_file.write_text(
            "# Generated by `perfguard cluster up`: the embedded nodes' topology.\n"
            + yaml.safe_dump(self.topology(), sort_keys=False))

    @classmethod
    def load(cls, state: Path) -> ClusterLayout | None:
        record = state / "cluster.json"
        if not record.exists():
            return None
        try:
            data = json.loads(record.read_text())
            return cls(state=Path(data["state"]), nodes=int(data["nodes"]),
                       port_base=int(data["port_base"]),
                       host_cpus=tuple(int(c) for c in data["host_cpus"]),
                       sockets=int(data.get("sockets", 2)),
                       leaves=int(data.get("leaves", 0)),
                       slurm_prefix=str(data.get("slurm_prefix") or ""))
        except (ValueError, KeyError, TypeError) as exc:
            raise PerfguardError(f"{record}: unreadable cluster record ({exc}); "
                                 f"remove it after stopping any daemons by hand") from exc
