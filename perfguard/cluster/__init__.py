"""The embedded default: a real local Slurm cluster and a real local PostgreSQL."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from perfguard.cluster import cgroups
from perfguard.cluster.layout import ClusterLayout
from perfguard.cluster.procs import (
    EPHEMERAL_PORTS_FILE,
    ephemeral_ports,
    port_in_use,
    require_binaries,
    require_root,
    run,
    terminate,
)
from perfguard.cluster.services import (
    SERVICES,
    choose_tracking,
    dead_nodes,
    node_states,
    node_tracking,
)
from perfguard.errors import PerfguardError


@dataclass
class ComponentStatus:
    name: str
    running: bool
    pids: list[int]
    detail: str = ""


def current_layout(state: Path) -> ClusterLayout:
    layout = ClusterLayout.load(state)
    if layout is None:
        raise PerfguardError(f"no embedded cluster under {state}: run `perfguard cluster up`")
    return layout


def up(state: Path, nodes: int, port_base: int, leaves: int = 0,
       slurm_prefix: Path | str | None = None) -> ClusterLayout:
    """Start whatever is not running: everything at first, exactly the dead daemons
    (one node's slurmd, a stopped PostgreSQL) later; a second call is a no-op.

    ``slurm_prefix``: a Slurm built from source (its bin/ and sbin/) instead of the
    distribution's on the PATH; None: the one this state directory last ran (its
    slurmctld state and slurmdbd's database are that version's: Debian's 22.05 started
    on a 25.11 state refused it, and its slurmdbd converted the database back, which
    25.11 then refused: "Database schema is too old for this version of Slurm to
    upgrade"), else the distribution's."""
    if not 0 <= leaves <= nodes:
        raise PerfguardError(f"--leaves {leaves}: a leaf switch needs a node (0 to {nodes})")
    recorded = ClusterLayout.load(state)
    prefix = slurm_prefix_to_run(slurm_prefix, recorded)
    require_root()
    wanted = ClusterLayout(state, nodes=nodes, port_base=port_base, leaves=leaves,
                           slurm_prefix=prefix)
    require_binaries(wanted.slurm_dirs())
    _require_visible_from_nodes(state)
    layout = recorded or wanted
    if any(s.running(layout) for s in SERVICES) and _shape(layout) != _shape(wanted):
        raise PerfguardError(
            f"a cluster with {layout.nodes} nodes on port base {layout.port_base} "
            f"({layout.leaves or 'no'} leaf switches, "
            f"{layout.slurm_prefix or 'the Slurm on the PATH'}) is running under {state}; "
            f"run `perfguard cluster down` before changing its shape or its Slurm")
    layout = wanted
    _check_ports(layout)
    layout.save()
    if not any(s.running(layout) for s in SERVICES if s.name.startswith("slurm")):
        choose_tracking(layout)
    started = []
    try:
        for service in SERVICES:
            if not service.running(layout):
                started.append(service)
                service.start(layout)
            elif service.reconcile is not None:
                service.reconcile(layout)
    except (PerfguardError, KeyboardInterrupt):
        _stop(layout, started)
        raise
    return layout


def _stop(layout: ClusterLayout, services: list) -> list[str]:
    """Stop ``services``, newest first, and return the names of those that were running:
    what a failed or interrupted `up` started is not left running (a test session whose
    slurmdbd did not start left its MariaDB running after the session had ended)."""
    stopped = []
    for service in reversed(services):
        pids = service.pids(layout)
        if pids:
            terminate(pids, timeout=30 if service.name == "postgresql" else 15)
            stopped.append(service.name)
    return stopped


def slurm_prefix_to_run(given: Path | str | None, recorded: ClusterLayout | None) -> str:
    """The Slurm prefix `up` runs: the one given, else the one the state directory last
    ran ("": the distribution's)."""
    if given is None:
        return recorded.slurm_prefix if recorded is not None else ""
    return str(Path(given).resolve()) if str(given) else ""


def _shape(layout: ClusterLayout) -> tuple:
    """What a running cluster cannot change without a restart."""
    return layout.nodes, layout.port_base, layout.leaves, layout.slurm_prefix


def _require_visible_from_nodes(state: Path) -> None:
    """Every virtual node mounts a private /tmp, hiding anything the host keeps there."""
    resolved = state.resolve()
    if resolved == Path("/tmp") or Path("/tmp") in resolved.parents:
        raise PerfguardError(
            f"state directory {resolved} is under /tmp, which each virtual node replaces with "
            f"its own private /tmp; use a directory elsewhere (--state-dir or "
            f"PERFGUARD_STATE_DIR)")


def _check_ports(layout: ClusterLayout) -> None:
    """A port taken by someone else is an error that names the port and its user;
    the ports of our own running daemons (a live node beside a dead one) are ours."""
    _refuse_ephemeral_ports(layout)
    dead = set(dead_nodes(layout))
    ours = {s.name for s in SERVICES if s.running(layout)}
    ours |= {f"slurmd {n.name}" for n in layout.slurmd_specs() if n.name not in dead}
    for name, port in layout.all_ports().items():
        if name in ours or name.split()[0] in ours:
            continue
        if port_in_use(port):
            raise PerfguardError(
                f"port {port} (for {name}) is already in use by another program; "
                f"stop it or pick other ports with `perfguard cluster up --port-base N`")


def _refuse_ephemeral_ports(layout: ClusterLayout) -> None:
    """Ports among the kernel's ephemeral ones are refused before anything starts: a
    connection may hold one when its daemon starts, tonight or at the next restart."""
    ephemeral = ephemeral_ports()
    ports = layout.all_ports().values()
    if ephemeral is None or not any(port in ephemeral for port in ports):
        return
    highest_base = ephemeral.start - 1 - (max(ports) - layout.port_base)
    raise PerfguardError(
        f"ports {min(ports)}-{max(ports)} (port base {layout.port_base}) reach into the "
        f"kernel's ephemeral ports {ephemeral.start}-{ephemeral.stop - 1} "
        f"({EPHEMERAL_PORTS_FILE}), which any outgoing connection may take before a daemon "
        f"listens on them; pick a port base of at most {highest_base} for "
        f"{layout.nodes} nodes with `perfguard cluster up --port-base N`")


def down(state: Path) -> list[str]:
    """Stop every process the cluster started, newest first; return what was stopped."""
    layout = ClusterLayout.load(state)
    if layout is None:
        return []
    stopped = _stop(layout, list(SERVICES))
    tracking = node_tracking(layout)
    if tracking.cgroup:  # the nodes' cgroups, empty once their tasks are gone
        cgroups.remove_node_dirs(tracking, layout.port_base)
    return stopped


def purge(state: Path) -> list[Path]:
    """After `down`: remove what the cluster keeps outside the state directory (the
    PostgreSQL data under /var/lib/perfguard when the state directory sits where the
    postgres user cannot enter) and the state directory itself. Returns what went."""
    layout = ClusterLayout.load(state)
    if layout is not None and any(s.pids(layout) for s in SERVICES):
        raise PerfguardError(f"the cluster of {state} still runs: `perfguard cluster down` "
                             f"first")
    removed = []
    outside = state / "postgres"
    if outside.is_symlink():
        home = outside.resolve().parent  # /var/lib/perfguard/state-<digest>
        shutil.rmtree(home, ignore_errors=True)
        removed.append(home)
    if state.exists():
        shutil.rmtree(state, ignore_errors=True)
        removed.append(state)
    return removed


def slurm_version(layout: ClusterLayout) -> str:
    """The cluster's Slurm as its clients name it ("slurm 25.11.7")."""
    shown = run(["sinfo", "--version"], env=layout.client_env(), check=False)
    return shown.stdout.strip() or "Slurm of unknown version"


def _nodes_detail(layout: ClusterLayout) -> str:
    dead = dead_nodes(layout)
    states = node_states(layout)
    detail = ", ".join(f"{n}={s}" for n, s in sorted(states.items()))
    if dead:
        detail = (f"slurmd of {', '.join(dead)} not running (`perfguard cluster up` restarts "
                  f"it); " + detail)
    return detail


def status(state: Path) -> list[ComponentStatus]:
    layout = current_layout(state)
    result = []
    for service in SERVICES:
        running = service.running(layout)
        detail = ""
        if service.name == "slurmd":
            detail = _nodes_detail(layout) + f"; {node_tracking(layout).said()}"
        elif service.name == "slurmctld":
            detail = slurm_version(layout) + (f" from {layout.slurm_prefix}"
                                               if layout.slurm_prefix else "")
        elif service.name == "postgresql":
            detail = layout.dsn
        result.append(ComponentStatus(service.name, running, service.pids(layout), detail))
    return result
