"""Fingerprints: collected in real jobs on the nodes, parsed, stored, and diffed."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from perfguard.judge import fingerprint
from perfguard.store.ingest import RunMeta, ingest_paths
from tests.conftest import TEST_STATE, perfguard
from tests.facts import H100


def test_fingerprints_from_a_real_run_and_cli_diff(migrated_dsn: str, demo_report: Path,
                                                   tmp_path: Path) -> None:
    report = json.loads(demo_report.read_text())
    nodes = {n for run in report["runs"] for case in run["testcases"]
             for n in (case.get("perfguard_fingerprints") or {})}
    # collected inside the jobs, on the virtual nodes the jobs ran on
    assert len(nodes) >= 2 and nodes <= {f"node{i}" for i in range(1, 5)}
    ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta(labels=("before",)))
    # the virtual nodes run on one kernel: the same boot id, so one host (what a node
    # finding on them says); a boot id is no environment change between runs
    boot_ids = {fp["boot_id"] for run in report["runs"] for case in run["testcases"]
                for fp in (case.get("perfguard_fingerprints") or {}).values()}
    assert boot_ids == {Path("/proc/sys/kernel/random/boot_id").read_text().strip()}
    with psycopg.connect(migrated_dsn, row_factory=dict_row) as conn:
        run_id = conn.execute("SELECT id FROM run").fetchone()["id"]
        shared = fingerprint.hosts_sharing(fingerprint.fingerprint_rows(conn, run_id))
    assert shared == {node: tuple(sorted(nodes - {node})) for node in nodes}, shared
    upgraded = sorted(nodes)[-1]
    for run in report["runs"]:  # the same nodes, UCX upgraded on one of them
        for case in run["testcases"]:
            if upgraded in (case.get("perfguard_fingerprints") or {}):
                case["perfguard_fingerprints"][upgraded]["ucx"] = "Version 1.17.0"
    report["session_info"]["uuid"] = "00000000-0000-4000-8000-0000000000aa"
    after = tmp_path / "after.json"
    after.write_text(json.dumps(report))
    ingest_paths(tmp_path, migrated_dsn, [after], RunMeta(labels=("after",)))
    with psycopg.connect(migrated_dsn) as conn:
        stored = conn.execute("SELECT count(DISTINCT node_id) FROM fingerprint").fetchone()[0]
    assert stored == len(nodes)
    result = perfguard("fingerprint", "diff", "before", "after", "--dsn", migrated_dsn)
    assert result.returncode == 0
    assert result.stdout.strip().endswith(f"→ Version 1.17.0 on {upgraded}")


def test_a_downtrained_gpu_link_is_named_in_verdict_report_and_diff(migrated_dsn: str,
                                                                     tmp_path: Path) -> None:
    """Real jobs on the test cluster, their nodes seen through the recorded H100 node's
    nvidia-smi and sysfs: after a GPU link trained at x8 of x16, the run's verdict and
    report name it, and the fingerprint diff shows the change."""
    shared = TEST_STATE / "shared" / f"sysfs-{tmp_path.name}"  # every node sees it
    shutil.rmtree(shared, ignore_errors=True)  # a test state kept from an earlier session
    shutil.copytree(H100 / "sys", shared / "healthy")
    shutil.copytree(H100 / "sys", shared / "downtrained")
    link = shared / "downtrained/bus/pci/devices/0000:00:06.0/current_link_width"
    link.write_text("8\n")
    runs = []
    for tree, label in (("healthy", "links-before"), ("downtrained", "links-after")):
        env = {"PATH": f"{H100 / 'bin'}:{os.environ['PATH']}",
               "PERFGUARD_SYSFS": str(shared / tree)}
        result = perfguard("run", "--dsn", migrated_dsn, "-n", "MpiHelloCheck", "--label",
                           label, state=TEST_STATE, env=env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        runs.append(result.stdout)
    assert "PCIe links below" not in runs[0]
    named = re.search(r"gpu 0 on (node\S+): PCIe link 32\.0 GT/s x8, maximum 32\.0 GT/s x16",
                      runs[1])
    assert named, runs[1][-2000:]
    run_id = runs[1].split("perfguard verdict for run ")[1].split()[0]
    verdict = perfguard("verdict", run_id, "--dsn", migrated_dsn)
    assert named.group(0) in verdict.stdout
    html = tmp_path / "report.html"
    perfguard("report", run_id, "-o", str(html), "--markdown", str(html.with_suffix(".md")),
              "--dsn", migrated_dsn, check=True)
    assert "PCIe links below their maximum" in html.read_text()
    assert "PCIe link 32.0 GT/s x8" in html.with_suffix(".md").read_text()
    changed = perfguard("fingerprint", "diff", "links-before", "links-after", "--dsn",
                        migrated_dsn)
    assert re.search(r"gpu 0 pcie_width: 16 → 8 on node", changed.stdout), changed.stdout
