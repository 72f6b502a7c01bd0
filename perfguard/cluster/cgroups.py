"""How the embedded cluster's slurmd track a job's processes and bind its tasks: with
cgroups, as real sites run Slurm (``proctrack/cgroup``, ``task/cgroup,task/affinity`` and
``ConstrainCores``: a slurmd killed under ``proctrack/linuxproc`` left its ranks running),
where the host's cgroups allow, else ``proctrack/linuxproc`` and ``task/affinity`` with the
reason said (``perfguard cluster status``).

Every virtual node is a slurmd of one host, and every embedded cluster on the host names
its nodes node1, node2, …: Slurm's cgroups (``slurm_node1/uid_0/job_12`` under each
hierarchy, with job ids that restart at 1 in every cluster) would be shared by two clusters
running side by side, and one cluster's step end would signal the other's tasks. So each
node's slurmd runs in a cgroup of its own (``perfguard-PORTBASE/NODE`` under the cgroup of
``cluster up``) and in its own cgroup namespace, where its hierarchies are mounted afresh:
what Slurm creates at its ``/sys/fs/cgroup/cpuset/slurm_node1`` lies inside that node's
cgroup on the host.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

#: The cgroup v1 hierarchies Slurm uses here: freezer (proctrack/cgroup) and cpuset
#: (task/cgroup's ConstrainCores). Memory and devices are not constrained.
V1_CONTROLLERS = ("cpuset", "freezer")
#: Slurm's plugins the cgroup choice needs, as its plugin directory names them.
PLUGINS = {"cgroup/v1": ("proctrack_cgroup.so", "task_cgroup.so", "cgroup_v1.so")}
#: ``PERFGUARD_CLUSTER_CGROUP=off``: the fallback, whatever the host allows; ``on``: cgroups
#: where the host allows them. Unset: DEFAULT.
SWITCH = "PERFGUARD_CLUSTER_CGROUP"
DEFAULT = "on"
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Tracking:
    """The plugins chosen and why: ``cgroup`` is "cgroup/v1", or None for the fallback."""
    cgroup: str | None
    reason: str
    #: (controller, where the nodes' cgroups go on the host): the cgroup of `cluster up`
    #: in that controller's v1 hierarchy, so a limit the host sets there still holds.
    mounts: tuple[tuple[str, str], ...] = ()

    @property
    def proctrack(self) -> str:
        return "proctrack/cgroup" if self.cgroup else "proctrack/linuxproc"

    @property
    def task_plugin(self) -> str:
        return "task/cgroup,task/affinity" if self.cgroup else "task/affinity"

    def cgroup_conf(self) -> str:
        """cgroup.conf: the plugin chosen named (the nodes' fresh mounts hold only its
        hierarchies) and cores constrained; the fallback as before (Slurm's default,
        autodetect, used by no plugin of it). RAM and devices are not constrained."""
        if not self.cgroup:
            return "CgroupPlugin=autodetect\n"
        return f"CgroupPlugin={self.cgroup}\nConstrainCores=yes\n"

    def said(self) -> str:
        """One line for `perfguard cluster status`."""
        return f"{self.proctrack}, {self.task_plugin}" + (
            " with ConstrainCores" if self.cgroup else "") + f" ({self.reason})"

    def to_text(self) -> str:
        return "\n".join([self.cgroup or "-", self.reason,
                          *(f"{c} {m}" for c, m in self.mounts)]) + "\n"

    @classmethod
    def from_text(cls, text: str) -> Tracking:
        lines = text.splitlines()
        mounts = tuple(tuple(line.split(" ", 1)) for line in lines[2:] if line.strip())
        return cls(None if lines[0] == "-" else lines[0], lines[1], mounts)


def mount_table(text: str | None = None) -> list[tuple[str, str, set[str]]]:
    """(mount point, filesystem type, options and super options) of each mount
    (/proc/self/mountinfo)."""
    if text is None:
        text = Path("/proc/self/mountinfo").read_text()
    found = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 3:
            continue
        options = set(fields[5].split(",")) | set(tail[2].split(","))
        found.append((fields[4], tail[0], options))
    return found


def detect(plugin_dirs: list[Path], mountinfo: str | None = None,
           environ: dict[str, str] | None = None, root: Path = CGROUP_ROOT) -> Tracking:
    """What the host allows: cgroup v1 with the cpuset and freezer hierarchies mounted
    and Slurm's cgroup plugins installed, else the fallback with the reason."""
    environ = os.environ if environ is None else environ
    wanted = environ.get(SWITCH, "").lower() or DEFAULT
    if wanted in ("off", "no", "0"):
        return Tracking(None, f"{SWITCH}={environ.get(SWITCH, DEFAULT)}")
    mounts = mount_table(mountinfo)
    at_root = [fs for point, fs, _ in mounts if point == str(root)]
    if not at_root:
        return Tracking(None, f"no cgroup filesystem mounted at {root}")
    if at_root[-1] == "cgroup2":
        return Tracking(None, f"cgroup v2 host ({root} is cgroup2): Slurm's cgroup/v2 "
                              f"has systemd (D-Bus) make a scope per node, named by the "
                              f"node alone (two clusters' node1 would share it); not "
                              f"tried with virtual nodes")
    v1 = {}
    for controller in V1_CONTROLLERS:
        points = [point for point, fs, opts in mounts if fs == "cgroup" and controller in opts]
        if not points:
            return Tracking(None, f"no cgroup v1 {controller} hierarchy mounted "
                                  f"(proctrack/cgroup needs freezer, ConstrainCores cpuset)")
        v1[controller] = str(Path(points[-1]) / own_cgroup(controller).lstrip("/"))
    missing = _missing_plugins(plugin_dirs, PLUGINS["cgroup/v1"])
    if missing:
        return Tracking(None, missing)
    if shutil.which("unshare") is None or not Path("/proc/self/ns/cgroup").exists():
        return Tracking(None, "no cgroup namespaces (unshare --cgroup): the nodes of "
                              "clusters side by side would share Slurm's cgroups")
    return Tracking("cgroup/v1", "cgroup v1: " + ", ".join(v1) + "; each node in a "
                    "cgroup and cgroup namespace of its own, under " + ", ".join(
                        v1.values()), tuple(v1.items()))


def _missing_plugins(plugin_dirs: list[Path], wanted: tuple[str, ...]) -> str:
    """'' where one of ``plugin_dirs`` holds every plugin, else what lacks which."""
    for directory in plugin_dirs:
        if all((directory / name).exists() for name in wanted):
            return ""
    where = ", ".join(map(str, plugin_dirs)) or "no Slurm plugin directory found"
    return f"Slurm's {', '.join(wanted)} not found ({where})"


def plugin_dirs(slurm_prefix: str) -> list[Path]:
    """Where Slurm's plugins are: the prefix's lib/slurm (a build from source), else
    Debian's /usr/lib/<multiarch>/slurm-wlm (and other distributions' lib64/slurm)."""
    if slurm_prefix:
        return [Path(slurm_prefix) / "lib" / "slurm", Path(slurm_prefix) / "lib64" / "slurm"]
    found = sorted(Path("/usr/lib").glob("*/slurm-wlm"))
    return found + [p for p in (Path("/usr/lib64/slurm"), Path("/usr/lib/slurm"))
                    if p.is_dir()]


def own_cgroup(controller: str, proc_cgroup: str | None = None) -> str:
    """This process's cgroup in ``controller``'s v1 hierarchy ("/" or "/a/b")."""
    if proc_cgroup is None:
        proc_cgroup = Path("/proc/self/cgroup").read_text()
    for line in proc_cgroup.splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return "/"


def node_dirs(tracking: Tracking, port_base: int, node: str) -> list[Path]:
    """The node's own cgroup in each hierarchy."""
    return [Path(base) / f"perfguard-{port_base}" / node for _, base in tracking.mounts]


def prepare_node(tracking: Tracking, port_base: int, node: str) -> list[Path]:
    """Create the node's cgroups (a cpuset level gets its parent's CPUs and memory
    nodes: a new cpuset has none, and no task may join it)."""
    made = node_dirs(tracking, port_base, node)
    for directory in made:
        for level in (directory.parent, directory):
            level.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (level / name).exists() and not (level / name).read_text().strip():
                    (level / name).write_text((level.parent / name).read_text())
    return made


def node_command(tracking: Tracking, port_base: int, node: str, command: str,
                 mountinfo: str | None = None) -> str:
    """The shell lines that start ``command`` (slurmd) in the node's cgroups and a cgroup
    namespace of its own, with its hierarchies mounted afresh in the node's mount
    namespace (so Slurm's /sys/fs/cgroup/cpuset is the node's cgroup), and the host's CPU
    hierarchy beside them, as a real node has it: a job reads there how long a CPU quota
    held it back (cpu_wait.sh), which PSI counts as waiting for a CPU."""
    if not tracking.cgroup:
        return f"exec {command}"
    joins = [f"echo $$ > {d}/cgroup.procs" for d in node_dirs(tracking, port_base, node)]
    mounts = ["mount -t tmpfs perfguard-cgroup /sys/fs/cgroup"] + [
        f"mkdir -p /sys/fs/cgroup/{c} && mount -t cgroup -o {c} cgroup /sys/fs/cgroup/{c}"
        for c, _ in tracking.mounts] + [  # seen, not needed: a node starts without it
        f"{{ mkdir -p /sys/fs/cgroup/{at} && mount -t cgroup -o {c} cgroup "
        f"/sys/fs/cgroup/{at} || true; }}" for c, at in cpu_hierarchy(mountinfo)]
    inner = " && ".join([*mounts, f"exec {command}"])
    return "; ".join(joins) + f"; exec unshare --cgroup sh -c '{inner}'"


def cpu_hierarchy(mountinfo: str | None = None) -> list[tuple[str, str]]:
    """[(its controllers, its directory)] for the host's v1 hierarchy that holds the cpu
    controller ("cpu" or "cpu,cpuacct" as the distribution mounts it), if any."""
    for point, fs, options in mount_table(mountinfo):
        if fs == "cgroup" and "cpu" in options:
            return [(",".join(sorted(options & {"cpu", "cpuacct"})), Path(point).name)]
    return []


def remove_node_dirs(tracking: Tracking, port_base: int) -> list[Path]:
    """After `cluster down`: the clusters' cgroups, deepest first (Slurm's job cgroups
    are gone with their tasks; a cgroup that still has one stays)."""
    removed = []
    for directory in node_dirs(tracking, port_base, "x"):
        top = directory.parent
        if not top.is_dir():
            continue
        for level in sorted((p for p in top.rglob("*") if p.is_dir()),
                            key=lambda p: len(p.parts), reverse=True) + [top]:
            try:
                level.rmdir()
                removed.append(level)
            except OSError:
                pass
    return removed
