"""A sweep that follows the leaf switches: what it costs, and that it blames a slowed
leaf (once, not as its nodes) and nobody on a clean fabric.

    .venv/bin/python benchmarks/leaf_sweep.py [--nodes 12] [--leaves 4] [--smoke]
    (as root, like the README's commands; prefix sudo otherwise)

On its own embedded cluster (state ``.state-test/leaves`` beside the suite's, or
PERFGUARD_BENCH_STATE; ports PERFGUARD_TEST_PORT_BASE - 2000) of ``--nodes`` virtual nodes
on ``--leaves`` leaf switches in Slurm's tree topology (topology.conf), it runs the real
`perfguard sweep` twice: clean (with ``-S FabricSweepCheck.time_limit=20m``, a limit the
job must get), then with the second leaf's nodes throttled to a fifth of a core
(`perfguard sweep --drain`). For each it prints the wall time, the sweep job's own time,
the pairs measured within a leaf and across the spine, and whom it blamed. Slurm's
topology drives the rounds: every leaf's pairs at once, then one pair per leaf pair.

Sizes: 12 nodes on 4 leaves of 3 (about 7 min on the idle 2-core box, 4 loopback and
pair rounds a leaf; it was tests/system/test_leaf_sweep.py's, issue 51 moved it here);
``--smoke`` 6 nodes on 2 leaves of 3 (a leaf is blamed as a whole from three nodes on:
perfguard.judge.sweep; tests/system/test_leaf_sweep.py runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from perfguard import cluster  # noqa: E402
from perfguard.cluster import faults  # noqa: E402
from perfguard.cluster.layout import ClusterLayout  # noqa: E402
from perfguard.contract import switches  # noqa: E402
from perfguard.errors import PerfguardError  # noqa: E402
from perfguard.judge import run_findings  # noqa: E402
from perfguard.store import db  # noqa: E402

STATE = Path(os.environ.get("PERFGUARD_BENCH_STATE", ROOT / ".state-test" / "leaves"))
PORT_BASE = int(os.environ.get("PERFGUARD_TEST_PORT_BASE", "17800")) - 2000


def sweep(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    """`perfguard sweep ARGS` on the benchmark's cluster: its wall time and result."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perfguard.cli", "--state-dir", str(STATE),
                           "sweep", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=3600)
    return time.monotonic() - started, done


def describe(layout: ClusterLayout, label: str, wall: float,
             done: subprocess.CompletedProcess) -> None:
    """One sweep's line: exit, times, pairs within and across leaves, blame."""
    found = re.search(r"run (\d+), (\d+) nodes", done.stdout)
    if found is None:
        raise SystemExit(f"{label} sweep printed no run:\n{done.stdout}\n{done.stderr}")
    run_id = int(found[1])
    with psycopg.connect(layout.dsn) as conn:
        pairs = {(s, c) for s, c in conn.execute(
            "SELECT server, client FROM sweep_pair WHERE run_id = %s AND metric = "
            "'bandwidth' AND server <> client", (run_id,)).fetchall()}
        [report] = conn.execute("SELECT report_path FROM run WHERE id = %s", (run_id,)) \
            .fetchone()
        stored = {leaf: sorted(nodes) for leaf, nodes in
                  run_findings.leaves(conn, run_id).items()}
    [case] = [c for c in json.loads(Path(report).read_text())["runs"][0]["testcases"]
              if c["name"].startswith("FabricSweepCheck")]
    script = (Path(case["outputdir"]) / "rfm_job.sh").read_text()
    limit = re.search(r"^#SBATCH --time=(\S+)", script, re.M)
    leaves = switches.leaf_of(layout.leaf_nodes())
    within = sum(1 for s, c in pairs if leaves[s] == leaves[c])
    crossing = {tuple(sorted((leaves[s], leaves[c]))) for s, c in pairs
                if leaves[s] != leaves[c]}
    every_leaf_pair = sorted(crossing) == list(combinations(sorted(set(leaves.values())), 2))
    print(f"| {label} | {done.returncode} | {wall:.0f} | {case['time_run']:.0f} | "
          f"{limit[1] if limit else '-'} | {within} | {len(pairs) - within} "
          f"({'every leaf pair' if every_leaf_pair else 'NOT every leaf pair'}) |", flush=True)
    tree = {leaf: sorted(nodes) for leaf, nodes in layout.leaf_nodes().items()}
    print(f"  {label}: leaf switches stored with the run for its verdict: {len(stored)}, "
          + ("Slurm's tree" if stored == tree else f"NOT Slurm's tree {tree}: {stored}"))
    summary = [line for line in done.stdout.splitlines()
               if "leaf switches" in line or line.startswith("blamed") or "drained" in line]
    for line in summary:
        print(f"  {label}: {line[:300]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=12)
    parser.add_argument("--leaves", type=int, default=4)
    parser.add_argument("--smoke", action="store_true",
                        help="6 nodes on 2 leaves: the test suite's size")
    args = parser.parse_args()
    nodes, leaves = (6, 2) if args.smoke else (args.nodes, args.leaves)
    layout = cluster.up(STATE, nodes=nodes, port_base=PORT_BASE, leaves=leaves)
    ok = False
    try:
        with psycopg.connect(layout.dsn) as conn:
            db.upgrade(conn)
        print(f"{nodes} nodes on {leaves} leaves: {layout.leaf_nodes()}")
        print("| sweep | exit | wall s | sweep job s | job time limit | pairs within a leaf "
              "| pairs across the spine |")
        print("|---|---|---|---|---|---|---|", flush=True)
        describe(layout, "clean", *sweep("-S", "FabricSweepCheck.time_limit=20m"))
        slowed = layout.leaf_nodes()["leaf2"]
        try:
            with faults.throttled(layout, slowed, 0.2, period_us=10_000):
                describe(layout, "leaf2 throttled", *sweep("--drain"))
        except PerfguardError as error:  # no cgroup v1 cpu controller here
            print(f"leaf2 throttled: not run ({error})")
        ok = True
    finally:
        cluster.down(STATE)
        if ok:  # its job outputs and logs are kept where it failed
            cluster.purge(STATE)


if __name__ == "__main__":
    main()
