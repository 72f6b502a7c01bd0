"""Configuration files of the embedded cluster's daemons: Jinja2 templates (templates/)
rendered from the layout, as the report is."""

from __future__ import annotations

import functools
import socket

from perfguard.cluster.cgroups import Tracking
from perfguard.cluster.layout import (
    CLUSTER_NAME,
    MEASUREMENT_LICENSE,
    NODE_MEMORY_MIB,
    PARTITION,
    SERVICE_NODE,
    SERVICE_PARTITION,
    ClusterLayout,
)

SLURMDBD_DB = "slurm_acct_db"
SLURMDBD_DB_USER = "slurm"


@functools.cache
def _templates():
    """Imported when a file is rendered, not with the package: `perfguard cluster up` run
    by a user who is not root must say "needs root" on a bare Python, never fail on a
    missing third-party module first."""
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("perfguard.cluster", "templates"),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def _render(template: str, **values) -> str:
    return _templates().get_template(template).render(**values).rstrip("\n") + "\n"


def slurm_conf(layout: ClusterLayout, tracking: Tracking) -> str:
    host_cpus = len(layout.host_cpus)
    domains = layout.numa_domains
    nodes = [{"name": node.name, "port": node.port,
              "reserved": [c for c in range(host_cpus) if c not in node.cpus]}
             for node in layout.slurmd_specs()]
    return _render("slurm.conf.j2", layout=layout, host=socket.gethostname(),
                   cluster_name=CLUSTER_NAME, nodes=nodes, host_cpus=host_cpus,
                   sockets=len(domains), cores_per_socket=len(domains[0]),
                   memory_mib=NODE_MEMORY_MIB, license=MEASUREMENT_LICENSE,
                   partition=PARTITION, service_partition=SERVICE_PARTITION,
                   service_node=SERVICE_NODE, tracking=tracking)


def topology_conf(layout: ClusterLayout) -> str:
    """Slurm's tree: the leaf switches with their nodes under one spine."""
    return _render("topology.conf.j2", leaves=layout.leaf_nodes())


def slurmdbd_conf(layout: ClusterLayout, db_password: str) -> str:
    return _render("slurmdbd.conf.j2", layout=layout, host=socket.gethostname(),
                   db_user=SLURMDBD_DB_USER, db_password=db_password, db_name=SLURMDBD_DB)
