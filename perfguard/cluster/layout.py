"""The embedded cluster's shape: where every file lives, which ports, which CPUs per node.

``up`` writes the layout to ``cluster.json`` in the state directory; ``status``,
``down``, the ReFrame site config and the CLI read it back from there, so every
consumer sees the cluster that is actually running.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path

from perfguard.errors import PerfguardError

CLUSTER_NAME = "perfguard"
PARTITION = "compute"
DEFAULT_NODES = 4
DEFAULT_PORT_BASE = 16800
DB_NAME = "perfguard"
DB_USER = "perfguard"


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
        ports.update({f"slurmd {n.name}": n.port for n in self.node_specs()})
        return ports

    # --- nodes -------------------------------------------------------------
    def node_specs(self) -> list[NodeSpec]:
        """Each virtual node gets its own CPUs; nodes share CPUs only when the host runs out.

        With 2 host CPUs and 4 nodes, node1/node3 get CPU 0 and node2/node4 CPU 1,
        so the two ranks of a 2-node job never busy-poll on the same core.
        """
        cpus = self.host_cpus
        per_node = max(1, len(cpus) // self.nodes)
        specs = []
        for index in range(self.nodes):
            start = (index * per_node) % len(cpus)
            mine = tuple(cpus[(start + k) % len(cpus)] for k in range(per_node))
            specs.append(NodeSpec(f"node{index + 1}", self.port_base + 21 + index, mine))
        return specs

    @property
    def node_range(self) -> str:
        return f"node[1-{self.nodes}]" if self.nodes > 1 else "node1"

    # --- files -------------------------------------------------------------
    @property
    def etc(self) -> Path:
        return self.state / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

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

    # --- client side -------------------------------------------------------
    @property
    def dsn(self) -> str:
        return f"postgresql://{DB_USER}@127.0.0.1:{self.postgres_port}/{DB_NAME}"

    def client_env(self) -> dict[str, str]:
        """Environment for Slurm clients (sinfo, sbatch, sacct) and for perfguard itself."""
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.slurm_conf)
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
        self.state.mkdir(parents=True, exist_ok=True)
        tmp = self.record.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.record)

    @classmethod
    def load(cls, state: Path) -> ClusterLayout | None:
        record = state / "cluster.json"
        if not record.exists():
            return None
        try:
            data = json.loads(record.read_text())
            return cls(state=Path(data["state"]), nodes=int(data["nodes"]),
                       port_base=int(data["port_base"]),
                       host_cpus=tuple(int(c) for c in data["host_cpus"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise PerfguardError(f"{record}: unreadable cluster record ({exc}); "
                                 f"remove it after stopping any daemons by hand") from exc
