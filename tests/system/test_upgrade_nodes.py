"""Issue 68: `perfguard upgrade-check --nodes` measures every upgraded node and judges each
against its own level before the upgrade and its peers; a rolling upgrade's --summary.
docs/operations.md's rolling upgrade is run command by command on the embedded cluster:
a firmware string the test sets per node (each virtual node's own /tmp holds its sysfs
tree) is the upgrade, and one upgraded node is throttled to a fifth of a core."""

from __future__ import annotations

import getpass
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from perfguard.cluster import faults
from perfguard.cluster.layout import ClusterLayout
from perfguard.errors import PerfguardError
from tests.conftest import TEST_STATE, perfguard

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
REPLAY = ROOT / "tests" / "data" / "replay"
#: What every upgrade check of the suite adds to the doc's commands: the sanity check as
#: the acceptance suite (as the suite's other upgrade checks), the replayed Himeno's size.
SHORTER = " -t sanity --himeno-size XS"


def rolling_block() -> list[str]:
    """The commands of docs/operations.md's rolling upgrade, in order."""
    section = OPERATIONS.read_text().split("\n## Every upgraded node, one row each\n", 1)[1] \
        .split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def set_firmware(layout: ClusterLayout, tree: str, nodes: list[str], version: str) -> None:
    """The HCA firmware each node's fingerprint reads ($PERFGUARD_SYSFS in its own /tmp)."""
    for node in nodes:
        hca = layout.node_tmp(node) / tree / "class" / "infiniband" / "mlx5_0"
        hca.mkdir(parents=True, exist_ok=True)
        (hca / "fw_ver").write_text(f"{version}\n")


def node_state(layout: ClusterLayout, node: str) -> tuple[str, str]:
    listed = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"], text=True,
                            capture_output=True, env=layout.client_env(), check=True)
    state, reason = listed.stdout.strip().split("|", 1)
    return state, reason


def row(stdout: str, node: str) -> str:
    """The node's row of the answer's table (the sweep's matrix has node lines too)."""
    table = stdout.split("\nnode ", 1)[1].split("\n\n", 1)[0]
    found = [line for line in table.splitlines() if re.match(rf"{node}\s", line)]
    assert len(found) == 1, stdout[-5000:]
    return found[0]


@pytest.mark.alone
def test_the_rolling_upgrade_of_operations_md(layout: ClusterLayout, migrated_dsn: str,
                                              tmp_path: Path) -> None:
    """Before: every node measured (its level). Batch 1, node3 and node4 upgraded (their
    firmware string changes), node4 throttled, inside a maintenance reservation, drained by
    the admin: node4 is named in its row with its loopback figure and its own level, drained
    with a `perfguard:` reason; node3 passed and was resumed; the summary gives node1 and
    node2 not yet measured. Batch 2: node1 and node2 pass; the summary has every node."""
    commands = rolling_block()
    assert [c.split()[:2] for c in commands] == [
        ["perfguard", "upgrade-check"], ["scontrol", "create"], ["scontrol", "update"],
        ["perfguard", "upgrade-check"], ["perfguard", "upgrade-check"],
        ["scontrol", "update"], ["perfguard", "upgrade-check"],
        ["perfguard", "upgrade-check"], ["scontrol", "delete"]]
    tree = f"pg-sysfs-{uuid.uuid4().hex[:8]}"
    label = "fw-28.41"
    env = {**os.environ, "SLURM_CONF": str(layout.slurm_conf), "USER": getpass.getuser(),
           "PERFGUARD_STATE_DIR": str(TEST_STATE), "PERFGUARD_DSN": migrated_dsn,
           "PERFGUARD_REPLAY": str(REPLAY), "PERFGUARD_SYSFS": f"/tmp/{tree}",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}

    def shell(command: str) -> subprocess.CompletedProcess:
        if command.startswith("perfguard upgrade-check") and "--summary" not in command:
            command += SHORTER
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                              env=env, timeout=900)

    set_firmware(layout, tree, ["node1", "node2", "node3", "node4"], "28.39.1002")
    try:
        before = shell(commands[0])
        assert before.returncode == 0, before.stdout[-4000:] + before.stderr[-2000:]
        for command in commands[1:3]:
            done = shell(command)
            assert done.returncode == 0, done.stderr
        set_firmware(layout, tree, ["node3", "node4"], "28.41.1000")
        try:
            with faults.throttled(layout, ["node4"], 0.2):
                batch = shell(commands[3])
        except PerfguardError as error:
            if "no cgroup v1 cpu controller" not in str(error):
                raise
            pytest.skip(str(error))
        out = batch.stdout
        assert batch.returncode == 1, out[-5000:] + batch.stderr[-2000:]
        node4, node3 = row(out, "node4"), row(out, "node3")
        assert re.match(r"node4\s+hca mlx5_0 fw 28\.39\.1002 → 28\.41\.1000\s+FAIL\s+"
                        r"loopback bandwidth lo \S+ MiB/s, its own level before the upgrade "
                        r"\S+ MiB/s \(median of 1 earlier value\(s\)", node4), \
            node4 + "\n" + out[-6000:]  # the sweep's and loopbacks' lines, when it misses
        figure, level = (float(v) for v in re.search(
            r"lo (\S+) MiB/s, its own level before the upgrade (\S+) MiB/s", node4).groups())
        assert figure < 0.6 * level, node4
        assert re.match(r"node3\s+hca mlx5_0 fw 28\.39\.1002 → 28\.41\.1000\s+PASS\s+", node3)
        assert "node3: GPU checks not run: no GPU (Slurm's GRES (null))" in out
        assert "resumed: node3" in out and "drained: node4 (reason 'perfguard: " in out
        assert re.search(r"1 of 2 node\(s\) passed; failed: node4 \(answer after \d+ s\)", out)
        state, reason = node_state(layout, "node4")
        assert "drain" in state and reason.startswith("perfguard: upgrade-check run "), reason
        assert "drain" not in node_state(layout, "node3")[0]
        html = Path(re.search(r"HTML report: (\S+)", out)[1]).read_text()
        assert '<tr data-node="node4" data-passed="false">' in html
        assert '<tr data-node="node3" data-passed="true">' in html

        summary = shell(commands[4])
        assert summary.returncode == 1, summary.stdout + summary.stderr
        lines = summary.stdout.splitlines()
        assert lines[0] == f"upgrade {label}: 4 node(s)"
        assert [re.split(r"\s{2,}", line)[:2] for line in lines[1:5]] == [
            ["node1", "not yet measured"], ["node2", "not yet measured"],
            ["node3", "measured and passed"], ["node4", "failed"]], lines

        shell(commands[5])
        set_firmware(layout, tree, ["node1", "node2"], "28.41.1000")
        second = shell(commands[6])
        assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-2000:]
        assert "2 of 2 node(s) passed" in second.stdout and "resumed: node[1-2]" in second.stdout
        summary = shell(commands[7])
        assert summary.returncode == 1
        assert [re.split(r"\s{2,}", line)[1] for line in summary.stdout.splitlines()[1:5]] == [
            "measured and passed", "measured and passed", "measured and passed", "failed"]
        assert summary.stdout.splitlines()[-1] == \
            "3 measured and passed, 1 failed, 0 not yet measured"
        with psycopg.connect(migrated_dsn) as conn:
            stored = conn.execute("SELECT node, passed, drained FROM upgrade_node WHERE "
                                  "label = %s ORDER BY id", (label,)).fetchall()
        assert stored == [("node3", True, False), ("node4", False, True),
                          ("node1", True, False), ("node2", True, False)]
    finally:
        released = shell(commands[-1])
        for node in ("node1", "node2", "node3", "node4"):
            subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"],
                           capture_output=True, env=layout.client_env())
    assert released.returncode == 0, released.stderr


def test_drained_nodes_without_resume_stop_the_check_before_anything_runs(
        layout: ClusterLayout, migrated_dsn: str) -> None:
    subprocess.run(["scontrol", "update", "NodeName=node2", "State=DRAIN",
                    "Reason=admin: new DIMMs"], check=True, env=layout.client_env())
    try:
        done = perfguard("upgrade-check", "--nodes", "node[1-2]", "--dsn", migrated_dsn,
                         state=TEST_STATE)
        assert done.returncode == 2, done.stdout[-2000:] + done.stderr
        assert "--nodes names drained nodes (node2: admin: new DIMMs)" in done.stderr
        assert "nothing was run" in done.stderr and "[ReFrame Setup]" not in done.stdout
        peers = perfguard("upgrade-check", "--nodes", "node1", "--peers", "node2", "--dsn",
                          migrated_dsn, state=TEST_STATE)
        assert peers.returncode == 2 and "--peers names drained nodes (node2)" in peers.stderr
        alone = perfguard("upgrade-check", "--drain", "--baseline", "1", "--dsn",
                          migrated_dsn, state=TEST_STATE)
        assert alone.returncode == 2 and "go with --nodes" in alone.stderr
        nothing = perfguard("upgrade-check", "--summary", "no-such-upgrade", "--dsn",
                            migrated_dsn, state=TEST_STATE)
        assert nothing.returncode == 2
        assert "no upgrade check carried --label 'no-such-upgrade'" in nothing.stderr
    finally:
        subprocess.run(["scontrol", "update", "NodeName=node2", "State=RESUME"],
                       capture_output=True, env=layout.client_env())
