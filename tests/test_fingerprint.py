"""Fingerprints: collected in real jobs on the nodes, parsed, stored, and diffed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg

from perfguard.judge.fingerprint import Change, compact_nodes, diff, flatten
from perfguard.store.ingest import RunMeta, ingest_paths
from reframe_tests.common.fingerprints import SCRIPT, parse
from tests.conftest import perfguard


def test_script_on_this_host_never_fails_and_reports_basics() -> None:
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0
    [facts] = parse(result.stdout, "abc").values()
    assert facts["kernel"] == subprocess.run(["uname", "-r"], capture_output=True,
                                             text=True).stdout.strip()
    assert facts["spack_lock_hash"] == "abc" and facts["hcas"] == [] and facts["gpus"] == []


def test_parse_hca_and_gpu_facts() -> None:
    text = ("perfguard-fp\tgpu3\thca.mlx5_0.fw\t28.39.1002\n"
            "perfguard-fp\tgpu3\thca.mlx5_0.port1.state\t4: ACTIVE\n"
            "perfguard-fp\tgpu3\tgpu.0.model\tNVIDIA H100 80GB HBM3\n"
            "perfguard-fp\tgpu3\tgpu_driver\t550.54.15\n"
            "srun: warning: something unrelated\n")
    facts = parse(text)["gpu3"]
    assert facts["hcas"] == [{"name": "mlx5_0", "fw": "28.39.1002", "port1.state": "4: ACTIVE"}]
    assert facts["gpus"] == [{"index": 0, "model": "NVIDIA H100 80GB HBM3"}]
    assert flatten(facts)["hca mlx5_0 fw"] == "28.39.1002"


def test_diff_groups_nodes_like_slurm() -> None:
    before = {f"node{i}": {"hca mlx5_0 fw": "28.39"} for i in range(1, 5)}
    after = {**before, "node3": {"hca mlx5_0 fw": "28.41"}, "node4": {"hca mlx5_0 fw": "28.41"}}
    assert diff(before, after) == [Change("hca mlx5_0 fw", "28.39", "28.41", ("node3", "node4"))]
    assert diff(before, after)[0].render() == "hca mlx5_0 fw: 28.39 → 28.41 on node[3-4]"
    assert compact_nodes(["node1", "node2", "node3", "node7", "login"]) == "login,node[1-3,7]"
    assert compact_nodes(["nid001", "nid002", "nid010"]) == "nid[001-002,010]"


def test_fingerprints_from_a_real_run_and_cli_diff(migrated_dsn: str, demo_report: Path,
                                                   tmp_path: Path) -> None:
    report = json.loads(demo_report.read_text())
    nodes = {n for run in report["runs"] for case in run["testcases"]
             for n in (case.get("perfguard_fingerprints") or {})}
    # collected inside the jobs, on the virtual nodes the jobs ran on
    assert len(nodes) >= 2 and nodes <= {f"node{i}" for i in range(1, 5)}
    ingest_paths(tmp_path, migrated_dsn, [demo_report], RunMeta(labels=("before",)))
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
