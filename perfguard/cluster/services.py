"""The daemons of the embedded cluster, each with start, liveness and the pids it owns.

Start order is munge → MariaDB → slurmdbd → slurmctld → slurmd nodes, and
PostgreSQL beside them; ``down`` walks the list backwards.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfguard.cluster import cgroups
from perfguard.cluster.configs import (
    SLURMDBD_DB,
    SLURMDBD_DB_USER,
    slurm_conf,
    slurmdbd_conf,
    topology_conf,
)
from perfguard.cluster.layout import (
    CLUSTER_NAME,
    DB_NAME,
    DB_USER,
    GRAFANA_USER,
    ClusterLayout,
)
from perfguard.cluster.procs import (
    POSTGRES_BIN,
    namespace_id,
    pid_alive,
    pids_in_namespace,
    read_pid,
    record_pid,
    run,
    spawn,
    terminate,
    wait_until,
)
from perfguard.errors import PerfguardError

POSTGRES_USER = "postgres"


@dataclass(frozen=True)
class Service:
    name: str
    start: Callable[[ClusterLayout], None]
    pids: Callable[[ClusterLayout], list[int]]
    healthy: Callable[[ClusterLayout], bool] | None = None
    #: Brings a running service up to date (access rules, passwords); idempotent.
    reconcile: Callable[[ClusterLayout], None] | None = None

    def running(self, layout: ClusterLayout) -> bool:
        if self.healthy is not None:
            return self.healthy(layout)
        return bool(self.pids(layout))


def _own_pid(name: str) -> Callable[[ClusterLayout], list[int]]:
    def pids(layout: ClusterLayout) -> list[int]:
        pid = read_pid(layout.pid_file(name))
        return [pid] if pid_alive(pid) else []
    return pids


# --- munge ---------------------------------------------------------------
def start_munge(layout: ClusterLayout) -> None:
    munge_dir = layout.munge_socket.parent
    munge_dir.mkdir(parents=True, exist_ok=True)
    # Like /run/munge: every user's Slurm commands reach the socket; the key stays 0400.
    munge_dir.chmod(0o755)
    key = munge_dir / "munge.key"
    if not key.exists():
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
    spawn(["munged", "--foreground", "--force", f"--socket={layout.munge_socket}",
           f"--key-file={key}", f"--seed-file={munge_dir / 'munge.seed'}",
           f"--pid-file={munge_dir / 'munged.pid'}", f"--log-file={layout.log_file('munged')}"],
          layout.log_file("munged.out"), layout.pid_file("munged"))
    wait_until(lambda: layout.munge_socket.exists(), 20, "munged socket",
               layout.log_file("munged"))


# --- MariaDB (slurmdbd's storage) -----------------------------------------
def _mariadb_password_file(layout: ClusterLayout) -> Path:
    return layout.mariadb_dir / "slurm.password"


def start_mariadb(layout: ClusterLayout) -> None:
    """MariaDB with its temporary files under the state directory, not the host's /tmp:
    two clusters starting in the same second (two test workers) shared it, and one's
    bootstrap failed "Could not remove temporary table '/tmp/#sql-temptable-1618-1-8',
    error: 2" (gone); in the next run, again with two starting together, one slurmdbd
    could not initialise its storage ("We should have gotten a result"). Each now has
    its own."""
    data, tmp = layout.mariadb_dir / "data", layout.mariadb_dir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    if not (data / "mysql").exists():
        data.mkdir(parents=True, exist_ok=True)
        run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
             "--auth-root-authentication-method=socket", "--skip-test-db", f"--tmpdir={tmp}"],
            timeout=180)
    daemon = spawn(["mariadbd", "--no-defaults", f"--datadir={data}", f"--tmpdir={tmp}",
                    f"--socket={layout.mariadb_socket}", f"--port={layout.mariadb_port}",
                    "--bind-address=127.0.0.1", "--user=root", "--skip-name-resolve",
                    f"--pid-file={layout.mariadb_dir / 'mariadbd.pid'}",
                    "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M",
                    f"--log-error={layout.log_file('mariadb')}"],
                   layout.log_file("mariadb.out"), layout.pid_file("mariadb"))
    wait_until(lambda: _mariadb_sql(layout, "SELECT 1", check=False).returncode == 0, 60,
               "MariaDB to accept connections", layout.log_file("mariadb"), daemon=daemon)
    _ensure_slurm_db_user(layout)


def _mariadb_sql(layout: ClusterLayout, sql: str, check: bool = True):
    """SQL on stdin, so that passwords in it never show in `ps`."""
    return run(["mariadb", f"--socket={layout.mariadb_socket}", "-u", "root"],
               check=check, input=sql)


def _ensure_slurm_db_user(layout: ClusterLayout) -> None:
    password_file = _mariadb_password_file(layout)
    if not password_file.exists():
        password_file.write_text(secrets.token_hex(16))
        password_file.chmod(0o600)
    password = password_file.read_text().strip()
    _mariadb_sql(layout, (
        f"CREATE USER IF NOT EXISTS '{SLURMDBD_DB_USER}'@'127.0.0.1' IDENTIFIED BY '{password}';"
        f"ALTER USER '{SLURMDBD_DB_USER}'@'127.0.0.1' IDENTIFIED BY '{password}';"
        f"GRANT ALL ON {SLURMDBD_DB}.* TO '{SLURMDBD_DB_USER}'@'127.0.0.1';"
    ))


# --- Slurm ----------------------------------------------------------------
def write_slurm_configs(layout: ClusterLayout) -> None:
    layout.etc.mkdir(parents=True, exist_ok=True)
    tracking = node_tracking(layout)
    layout.slurm_conf.write_text(slurm_conf(layout, tracking))
    topology = layout.etc / "topology.conf"
    if layout.leaves:
        topology.write_text(topology_conf(layout))
    else:
        topology.unlink(missing_ok=True)
    dbd_conf = layout.etc / "slurmdbd.conf"
    password = _mariadb_password_file(layout).read_text().strip()
    dbd_conf.write_text(slurmdbd_conf(layout, password))
    dbd_conf.chmod(0o600)
    (layout.etc / "cgroup.conf").write_text(tracking.cgroup_conf())
    for sub in ("slurm/ctld", "slurm/d", "shared"):
        (layout.state / sub).mkdir(parents=True, exist_ok=True)


def tracking_file(layout: ClusterLayout) -> Path:
    return layout.etc / "perfguard-tracking"


def choose_tracking(layout: ClusterLayout) -> cgroups.Tracking:
    """What the host allows now (cgroups.detect), kept with the cluster: `cluster up`
    decides once, before any Slurm daemon runs; a restarted node keeps the choice."""
    chosen = cgroups.detect(cgroups.plugin_dirs(layout.slurm_prefix))
    layout.etc.mkdir(parents=True, exist_ok=True)
    tracking_file(layout).write_text(chosen.to_text())
    return chosen


def node_tracking(layout: ClusterLayout) -> cgroups.Tracking:
    """The cluster's choice; a cluster started before perfguard chose keeps linuxproc."""
    kept = tracking_file(layout)
    if kept.exists():
        return cgroups.Tracking.from_text(kept.read_text())
    return cgroups.Tracking(None, "started before perfguard chose cgroups: `perfguard "
                                  "cluster down` and `up` choose")


def start_slurmdbd(layout: ClusterLayout) -> None:
    write_slurm_configs(layout)
    daemon = spawn(["slurmdbd", "-D"], layout.log_file("slurmdbd.out"),
                   layout.pid_file("slurmdbd"), env=layout.client_env())
    wait_until(lambda: _sacctmgr(layout, "show", "cluster", check=False).returncode == 0, 60,
               "slurmdbd to answer", layout.log_file("slurmdbd"), daemon=daemon)
    clusters = _sacctmgr(layout, "-n", "-P", "show", "cluster", "format=cluster").stdout.split()
    if CLUSTER_NAME not in clusters:
        _sacctmgr(layout, "-i", "add", "cluster", CLUSTER_NAME)


def _sacctmgr(layout: ClusterLayout, *args: str, check: bool = True):
    return run(["sacctmgr", *args], env=layout.client_env(), check=check, timeout=30)


def start_slurmctld(layout: ClusterLayout) -> None:
    write_slurm_configs(layout)
    daemon = spawn(["slurmctld", "-D", "-i"], layout.log_file("slurmctld.out"),
                   layout.pid_file("slurmctld"), env=layout.client_env())
    wait_until(lambda: run(["scontrol", "ping"], env=layout.client_env(),
                           check=False).stdout.count("UP") > 0,
               60, "slurmctld to answer `scontrol ping`", layout.log_file("slurmctld"),
               daemon=daemon)
    _require_multiple_slurmd(layout)


def multiple_slurmd(config: str) -> bool:
    """Whether ``scontrol show config`` says Slurm was built with --enable-multiple-slurmd
    (Debian's 22.05 is; SchedMD's source is not unless configured so). 22.05 prints
    "Yes", 25.11 "yes"."""
    return re.search(r"^MULTIPLE_SLURMD\s*=\s*yes\s*$", config, re.M | re.I) is not None


def _require_multiple_slurmd(layout: ClusterLayout) -> None:
    """The virtual nodes share one munged: a Slurm built without multiple-slurmd
    support refuses the second decode of a job launch's credential when it is forwarded
    to the next node (25.11: "_verify_signature: failed decode", srun: "Header lengths
    are longer than data received"), so every multi-node step fails on some node."""
    shown = run(["scontrol", "show", "config"], env=layout.client_env(), check=False).stdout
    if multiple_slurmd(shown):
        return
    where = layout.slurm_prefix or "on the PATH"
    raise PerfguardError(
        f"the Slurm {where} was built without multiple-slurmd support, which the "
        f"embedded cluster's virtual nodes need (one munged for all of them); configure "
        f"it with --enable-multiple-slurmd and rebuild (docs/adopting.md, \"Which Slurm\")")


def start_nodes(layout: ClusterLayout) -> None:
    """Start every node whose slurmd is not running (all at first, a dead one when
    healing), then wait until every node is back in service."""
    dead = [node for node in layout.slurmd_specs() if not node_pids(layout, node.name)]
    live = {namespace_id(read_pid(layout.pid_file(f"slurmd-{node.name}")))
            for node in layout.slurmd_specs() if node not in dead}
    for node in dead:  # all before any new node: a new namespace may reuse a dead one's number
        _clear_dead_node(layout, node.name, live)
    tracking = node_tracking(layout)
    for node in dead:
        tmp = layout.node_tmp(node.name)
        tmp.mkdir(parents=True, exist_ok=True)
        tmp.chmod(0o1777)
        # SlurmdSpoolDir=…/%n: 25.11's slurmd no longer creates it ("Domain socket
        # directory …: No such file or directory", and no slurmstepd socket there)
        (layout.state / "slurm" / "d" / node.name).mkdir(parents=True, exist_ok=True)
        if tracking.cgroup:
            cgroups.prepare_node(tracking, layout.port_base, node.name)
        script = "; ".join([
            f"hostname {node.name}",
            f"mount --bind {tmp} /tmp",
            f"mount --bind {_node_hosts_file(layout)} /etc/hosts",
            cgroups.node_command(tracking, layout.port_base, node.name,
                                 f"slurmd -D -N {node.name}"),
        ])
        pid = spawn(["unshare", "--uts", "--mount", "--propagation", "private",
                     "sh", "-c", script],
                    layout.log_file(f"slurmd-{node.name}.out"),
                    layout.pid_file(f"slurmd-{node.name}"), env=layout.client_env())
        wait_until(lambda p=pid: namespace_id(p) != namespace_id(os.getpid()), 10,
                   f"{node.name} namespace")
        (layout.run_dir / f"slurmd-{node.name}.uts").write_text(namespace_id(pid) or "")
    wait_until(lambda: _all_nodes_idle(layout), 90, "all nodes idle in `sinfo`",
               layout.logs / "slurmd-node1.log")


def _node_hosts_file(layout: ClusterLayout) -> Path:
    """The host's /etc/hosts plus every node name on 127.0.0.1: each slurmd binds to
    what its name resolves to (CommunicationParameters=NoInAddrAny), i.e. loopback."""
    hosts = layout.etc / "hosts"
    names = " ".join(n.name for n in layout.slurmd_specs())
    host_entries = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
    hosts.write_text(host_entries.rstrip("\n")
                     + f"\n# perfguard virtual nodes\n127.0.0.1 {names}\n")
    return hosts


def _clear_dead_node(layout: ClusterLayout, node: str, live: set[str | None]) -> None:
    """What a dead slurmd left in its namespace (slurmstepd, job tasks) goes with it,
    unless the kernel gave that namespace's number to a live node (``live``) since."""
    uts_file = layout.run_dir / f"slurmd-{node}.uts"
    uts = uts_file.read_text().strip() if uts_file.exists() else ""
    if uts and uts != namespace_id(os.getpid()) and uts not in live:
        terminate(_cluster_pids(layout, uts), timeout=5)
    uts_file.unlink(missing_ok=True)


def dead_nodes(layout: ClusterLayout) -> list[str]:
    """Nodes whose slurmd is not running."""
    return [n.name for n in layout.slurmd_specs()
            if not pid_alive(read_pid(layout.pid_file(f"slurmd-{n.name}")))]


def node_pids(layout: ClusterLayout, node: str) -> list[int]:
    """The node's slurmd plus everything running in its namespace (slurmstepd, job tasks)."""
    pid = read_pid(layout.pid_file(f"slurmd-{node}"))
    if not pid_alive(pid):
        return []
    uts_file = layout.run_dir / f"slurmd-{node}.uts"
    uts = uts_file.read_text().strip() if uts_file.exists() else ""
    others = _cluster_pids(layout, uts) if uts else []
    return [pid] + [p for p in others if p != pid]


def _cluster_pids(layout: ClusterLayout, uts: str) -> list[int]:
    """Processes of a node namespace that belong to this cluster. The kernel reuses the
    number of a namespace that ended: a recorded one may now be another cluster's node
    (the soak or a benchmark running beside the tests), whose processes carry another
    SLURM_CONF (slurmd, its slurmstepds and job tasks all inherit it)."""
    mine = f"SLURM_CONF={layout.slurm_conf}".encode()
    found = []
    for pid in pids_in_namespace(uts):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mine in environ:
            found.append(pid)
    return found


def node_states(layout: ClusterLayout) -> dict[str, str]:
    result = run(["sinfo", "-h", "-N", "-o", "%N %T"], env=layout.client_env(), check=False)
    if result.returncode != 0:
        return {}
    return dict(line.split()[:2] for line in result.stdout.splitlines() if line.strip())


def _all_nodes_idle(layout: ClusterLayout) -> bool:
    states = node_states(layout)
    names = {n.name for n in layout.slurmd_specs()}
    if set(states) != names:
        return False
    stuck = [n for n, s in states.items() if s.startswith(("down", "drain"))]
    if stuck:
        run(["scontrol", "update", f"NodeName={','.join(stuck)}", "State=RESUME"],
            env=layout.client_env(), check=False)
    return all(s in ("idle", "mixed", "allocated") for s in states.values())


def nodes_running(layout: ClusterLayout) -> bool:
    return all(node_pids(layout, n.name) for n in layout.slurmd_specs())


def nodes_pids(layout: ClusterLayout) -> list[int]:
    return [p for n in layout.slurmd_specs() for p in node_pids(layout, n.name)]


# --- PostgreSQL -------------------------------------------------------------
def _as_postgres(argv: list[str], **kwargs):
    return run(["runuser", "-u", POSTGRES_USER, "--", *argv], **kwargs)


def _postgres_home(layout: ClusterLayout) -> Path:
    """A directory the postgres user can reach: STATE/postgres, or — when the state dir
    sits below a directory postgres may not enter (a checkout in /root) — one under
    /var/lib/perfguard that STATE/postgres links to."""
    wanted = layout.postgres_dir
    if wanted.is_symlink() or run(["runuser", "-u", POSTGRES_USER, "--", "test", "-x",
                                   str(layout.state)], check=False).returncode == 0:
        return wanted.resolve()
    digest = hashlib.sha256(str(layout.state).encode()).hexdigest()[:12]
    home = Path("/var/lib/perfguard") / f"state-{digest}" / "postgres"
    home.mkdir(parents=True, exist_ok=True)
    for directory in (home.parent.parent, home.parent):
        directory.chmod(0o755)
    if wanted.exists() and not wanted.is_symlink():
        shutil.rmtree(wanted)
    wanted.symlink_to(home)
    return home


#: Every role needs its password (scram-sha-256); only the OS user postgres may
#: administer, over the Unix socket in a directory only it can write.
PG_HBA = """\
# Generated by `perfguard cluster up`; edits are overwritten.
local   all   postgres                  peer
local   all   all                       scram-sha-256
host    all   all       127.0.0.1/32    scram-sha-256
host    all   all       ::1/128         scram-sha-256
"""


def start_postgres(layout: ClusterLayout) -> None:
    _require_postgres_user()
    pg = _postgres_home(layout)
    data = pg / "data"
    if not (data / "PG_VERSION").exists():
        pg.mkdir(parents=True, exist_ok=True)
        shutil.chown(pg, POSTGRES_USER, POSTGRES_USER)
        _as_postgres([str(POSTGRES_BIN / "initdb"), "-D", str(data), "-U", "postgres",
                      "--auth-local=peer", "--auth-host=scram-sha-256", "--encoding=UTF8",
                      "--no-instructions"], timeout=180)
    _write_pg_hba(data)
    log = layout.log_file("postgresql")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    shutil.chown(log, POSTGRES_USER, POSTGRES_USER)
    user = pwd.getpwnam(POSTGRES_USER)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [str(POSTGRES_BIN / "postgres"), "-D", str(data), "-p", str(layout.postgres_port),
             "-k", str(pg), "-c", "listen_addresses=127.0.0.1", "-c", "shared_buffers=512MB",
             "-c", "max_wal_size=2GB", "-c", "fsync=on",
             "-c", "password_encryption=scram-sha-256"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, user=user.pw_uid, group=user.pw_gid,
        )
    record_pid(layout.pid_file("postgresql"), proc.pid)
    wait_until(lambda: _psql(layout, "SELECT 1", check=False).returncode == 0, 60,
               "PostgreSQL to accept connections", log)
    _ensure_database(layout)


def _write_pg_hba(data: Path) -> bool:
    """Write the access rules; True when they changed (a running server must reload)."""
    hba = data / "pg_hba.conf"
    if hba.exists() and hba.read_text() == PG_HBA:
        return False
    hba.write_text(PG_HBA)
    shutil.chown(hba, POSTGRES_USER, POSTGRES_USER)
    hba.chmod(0o600)
    return True


def reconcile_postgres(layout: ClusterLayout) -> None:
    """A server started by an older perfguard (trust) gets passwords and the rules now."""
    if _write_pg_hba(_postgres_home(layout) / "data"):
        _psql(layout, "SELECT pg_reload_conf()")
    _ensure_database(layout)


def _require_postgres_user() -> None:
    try:
        pwd.getpwnam(POSTGRES_USER)
    except KeyError as exc:
        raise PerfguardError("system user 'postgres' is missing: install the Debian package "
                             "postgresql with `./install.sh`") from exc


def _psql(layout: ClusterLayout, sql: str, db: str = "postgres", check: bool = True):
    """SQL as the postgres superuser over its socket (peer auth), on stdin."""
    return _as_postgres(["psql", "-h", str(layout.postgres_dir.resolve()), "-p",
                         str(layout.postgres_port), "-d", db, "-v", "ON_ERROR_STOP=1", "-tA",
                         "-f", "-"], check=check, input=sql)


def _ensure_database(layout: ClusterLayout) -> None:
    """perfguard's role (owner of its database, may create test databases) and Grafana's
    read-only role, each with the password kept in the state directory's pgpass."""
    passwords = layout.role_passwords()
    for role, options in ((DB_USER, "LOGIN CREATEROLE CREATEDB"), (GRAFANA_USER, "LOGIN")):
        if not _psql(layout, f"SELECT 1 FROM pg_roles WHERE rolname='{role}'").stdout.strip():
            _psql(layout, f"CREATE ROLE {role}")
        _psql(layout, f"ALTER ROLE {role} {options} PASSWORD '{passwords[role]}'")
    if not _psql(layout, f"SELECT 1 FROM pg_database WHERE datname='{DB_NAME}'").stdout.strip():
        _psql(layout, f"CREATE DATABASE {DB_NAME} OWNER {DB_USER}")


SERVICES = [
    Service("munge", start_munge, _own_pid("munged")),
    Service("mariadb", start_mariadb, _own_pid("mariadb")),
    Service("slurmdbd", start_slurmdbd, _own_pid("slurmdbd")),
    Service("slurmctld", start_slurmctld, _own_pid("slurmctld")),
    Service("slurmd", start_nodes, nodes_pids, nodes_running),
    Service("postgresql", start_postgres, _own_pid("postgresql"),
            reconcile=reconcile_postgres),
]
