"""The embedded cluster's process tracking (issue 69 item 3): proctrack/cgroup and
task/cgroup,task/affinity with ConstrainCores where the host's cgroups allow, each node in
a cgroup and cgroup namespace of its own; else linuxproc and affinity with the reason.
Mount tables of a cgroup v1 host (this firecracker VM's, verbatim) and of v2 hosts."""

from __future__ import annotations

from pathlib import Path

from perfguard.cluster import cgroups
from perfguard.cluster.cgroups import Tracking, detect

V1_HOST = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
ON = {cgroups.SWITCH: "on"}
V2_HOST = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate\n"


def plugins(tmp_path: Path, *names: str) -> list[Path]:
    for name in names:
        (tmp_path / name).touch()
    return [tmp_path]


def test_a_v1_host_with_slurms_plugins_gets_cgroups(tmp_path: Path) -> None:
    found = detect(plugins(tmp_path, *cgroups.PLUGINS["cgroup/v1"]), V1_HOST, ON)
    assert found.cgroup == "cgroup/v1"
    assert found.proctrack == "proctrack/cgroup"
    assert found.task_plugin == "task/cgroup,task/affinity"
    assert found.cgroup_conf() == "CgroupPlugin=cgroup/v1\nConstrainCores=yes\n"
    assert [c for c, _ in found.mounts] == ["cpuset", "freezer"]
    assert found.said().startswith("proctrack/cgroup, task/cgroup,task/affinity with "
                                   "ConstrainCores (cgroup v1: cpuset, freezer; each node")
    assert Tracking.from_text(found.to_text()) == found


def test_what_the_host_lacks_is_the_reason_for_the_fallback(tmp_path: Path) -> None:
    every = plugins(tmp_path, *cgroups.PLUGINS["cgroup/v1"])
    no_freezer = "".join(line + "\n" for line in V1_HOST.splitlines() if "freezer" not in line)
    lacking = detect(every, no_freezer, ON)
    assert lacking.cgroup is None and lacking.proctrack == "proctrack/linuxproc"
    assert lacking.task_plugin == "task/affinity"
    assert lacking.reason.startswith("no cgroup v1 freezer hierarchy mounted"), lacking
    assert lacking.cgroup_conf() == "CgroupPlugin=autodetect\n"
    v2 = detect(every, V2_HOST, ON)
    assert v2.cgroup is None and v2.reason.startswith("cgroup v2 host"), v2
    bare = detect(every, "", ON)
    assert bare.reason == "no cgroup filesystem mounted at /sys/fs/cgroup"
    (tmp_path / "other").mkdir()
    built = detect(plugins(tmp_path / "other", "proctrack_cgroup.so"), V1_HOST, ON)
    assert built.cgroup is None and "task_cgroup.so" in built.reason, built
    off = detect(every, V1_HOST, {cgroups.SWITCH: "off"})
    assert off.cgroup is None and off.reason == f"{cgroups.SWITCH}=off"
    said = lacking.said()
    assert said.startswith("proctrack/linuxproc, task/affinity (no cgroup v1 freezer"), said


def test_each_node_starts_in_its_own_cgroups_and_namespace() -> None:
    """The node joins PORTBASE/NODE cgroups, then unshares its cgroup namespace and
    mounts the hierarchies afresh: Slurm's slurm_node1 lies in the node's cgroup."""
    chosen = Tracking("cgroup/v1", "v1", (("cpuset", "/sys/fs/cgroup/cpuset/a"),
                                          ("freezer", "/sys/fs/cgroup/freezer")))
    line = cgroups.node_command(chosen, 56000, "node2", "slurmd -D -N node2", V1_HOST)
    assert line.startswith("echo $$ > /sys/fs/cgroup/cpuset/a/perfguard-56000/node2/"
                           "cgroup.procs; echo $$ > /sys/fs/cgroup/freezer/perfguard-56000/"
                           "node2/cgroup.procs; exec unshare --cgroup sh -c '"), line
    assert "mount -t cgroup -o cpuset cgroup /sys/fs/cgroup/cpuset" in line
    assert line.endswith("&& exec slurmd -D -N node2'")
    # the host's CPU hierarchy, not joined: a quota's throttled time is read there
    assert "{ mkdir -p /sys/fs/cgroup/cpu && mount -t cgroup -o cpu cgroup " \
           "/sys/fs/cgroup/cpu || true; } &&" in line
    assert "cpu/perfguard-56000" not in line
    debian = V1_HOST.replace("/sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu",
                             "/sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct")
    assert cgroups.cpu_hierarchy(debian) == [("cpu,cpuacct", "cpu,cpuacct")]
    assert cgroups.cpu_hierarchy(V2_HOST) == []
    fallback = Tracking(None, "why")
    assert cgroups.node_command(fallback, 56000, "node2", "slurmd") == "exec slurmd"


def test_own_cgroup_is_read_per_controller() -> None:
    text = "4:memory:/process_api/b5\n3:cpuset:/\n1:cpu,cpuacct:/x\n0::/\n"
    assert cgroups.own_cgroup("memory", text) == "/process_api/b5"
    assert cgroups.own_cgroup("cpuacct", text) == "/x"
    assert cgroups.own_cgroup("freezer", text) == "/"
