"""What a fabric sweep costs by node count, what slurmctld spends on it, and that it
blames a throttled node and nobody else at that size.

    .venv/bin/python benchmarks/sweep_cost.py [--nodes 16,32,64] [--repeat 1]
        [--throttle node37] [--smoke]
    (as root, like the README's commands; prefix sudo otherwise)

On its own embedded cluster (state ``.state-sweep``, ports 18800+, as many virtual nodes
as the largest count; PERFGUARD_BENCH_STATE and PERFGUARD_BENCH_PORT_BASE move it), runs the real
`perfguard sweep --nodes node[1-k]` for each k
(ucx_perftest tag_bw 1 MiB × 1000 and tag_lat 8 B × 10000 per pair; a round is one
server step and one client step) and reads from the ReFrame report and Slurm: the sweep
job's run time, its job steps (sacct), and the CPU seconds slurmctld and all slurmd
spent meanwhile (/proc). The embedded cluster runs one pair at a time (its virtual nodes
share the host's cores), so the time per pair measurement is what one round takes on a
fabric where a round's pairs run at once. With --throttle, one more sweep at the largest
count runs with that node's slurmd limited to a fifth of a core (a CPU cgroup quota) and
prints whom it blamed; every clean sweep prints whom it blamed too (nobody, we hope).
Prints a table and the projection for 128, 512 and 2,048 nodes, every pair and
following leaf switches of 16 and 32 nodes (docs/sweep.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfguard import cluster  # noqa: E402
from perfguard.cluster.faults import throttled  # noqa: E402
from perfguard.cluster.layout import ClusterLayout  # noqa: E402
from perfguard.cluster.procs import read_pid  # noqa: E402
from perfguard.judge.sweep import cost, leaf_cost  # noqa: E402
from perfguard.site.context import Context  # noqa: E402
from perfguard.store import db  # noqa: E402

STATE = Path(os.environ.get("PERFGUARD_BENCH_STATE", ROOT / ".state-sweep"))
PORT_BASE = int(os.environ.get("PERFGUARD_BENCH_PORT_BASE", "18800"))


class Sweep(NamedTuple):
    wall_s: float
    job_s: float
    steps: int
    slurmctld_cpu_s: float
    slurmd_cpu_s: float
    blamed: list[str]


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes have used so far."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / 100  # USER_HZ


def daemon_pids(layout: ClusterLayout) -> tuple[list[int], list[int]]:
    ctld = read_pid(layout.pid_file("slurmctld"))
    slurmd = [read_pid(layout.pid_file(f"slurmd-{n.name}")) for n in layout.node_specs()]
    return [ctld] if ctld else [], [p for p in slurmd if p]


def sweep_once(layout: ClusterLayout, nodes: int) -> Sweep:
    ctld, slurmd = daemon_pids(layout)
    before = cpu_seconds(ctld), cpu_seconds(slurmd)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "perfguard.cli", "--state-dir", str(STATE),
                             "sweep", "--nodes", f"node[1-{nodes}]"], capture_output=True,
                            text=True, cwd=ROOT)
    wall = time.monotonic() - started
    after = cpu_seconds(ctld), cpu_seconds(slurmd)
    found = re.search(r"perfguard sweep on local: run (\d+)", result.stdout)
    if found is None:
        raise SystemExit(f"sweep of {nodes} nodes failed:\n{result.stdout}\n{result.stderr}")
    with db.connect(Context.resolve(STATE).dsn) as conn:
        [report] = conn.execute("SELECT report_path FROM run WHERE id = %s",
                                (int(found[1]),)).fetchone()
    [case] = [c for c in json.loads(Path(report).read_text())["runs"][0]["testcases"]
              if c["name"].startswith("FabricSweepCheck")]
    blamed = [line for line in result.stdout.splitlines() if line.startswith("blamed")]
    return Sweep(wall, case["time_run"], job_steps(layout, case["jobid"]),
                 after[0] - before[0], after[1] - before[1], blamed)


def job_steps(layout: ClusterLayout, job_id: str) -> int:
    """Job steps the sweep job started (sacct; batch and extern steps left out)."""
    listing = subprocess.run(["sacct", "-n", "-P", "-j", str(job_id), "-o", "jobid"],
                             capture_output=True, text=True, env=layout.client_env()).stdout
    return sum(1 for step in listing.split() if re.fullmatch(r"\d+\.\d+", step))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="4",
                        help="node counts to sweep, comma-separated (default 4)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--throttle", help="a node to throttle in one more sweep at the "
                                           "largest count; it must be the one blamed")
    parser.add_argument("--smoke", action="store_true",
                        help="2 nodes once: that the script runs (the test suite's size)")
    args = parser.parse_args()
    counts = [2] if args.smoke else sorted(int(n) for n in args.nodes.split(","))
    repeat = 1 if args.smoke else args.repeat
    layout = cluster.up(STATE, nodes=max(counts), port_base=PORT_BASE)
    with db.connect(layout.dsn) as conn:
        db.upgrade(conn)
    per_pair = []
    print("| nodes | rounds (incl. loopback) | pair measurements | `perfguard sweep` wall s "
          "| sweep job s | s per pair measurement | job steps | slurmctld CPU s "
          "| slurmctld % of wall | all slurmd CPU s | blamed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    try:
        for nodes in counts:
            runs = [sweep_once(layout, nodes) for _ in range(repeat)]
            measurements = nodes + nodes * (nodes - 1) // 2  # loopbacks + pairs
            job = statistics.median(r.job_s for r in runs)
            per_pair.append(job / measurements)
            row = (nodes, cost(nodes, 0)[0], measurements,
                   statistics.median(r.wall_s for r in runs), job, job / measurements,
                   runs[0].steps, runs[0].slurmctld_cpu_s,
                   100 * runs[0].slurmctld_cpu_s / runs[0].wall_s, runs[0].slurmd_cpu_s,
                   "; ".join(b[:200] for b in runs[0].blamed))
            print("| {} | {} | {} | {:.1f} | {:.1f} | {:.2f} | {} | {:.1f} | {:.1f} | {:.1f} "
                  "| {} |".format(*row), flush=True)
        if args.throttle:
            with throttled(layout, [args.throttle], 0.2):
                slow = sweep_once(layout, max(counts))
            print(f"\n{max(counts)} nodes, {args.throttle} throttled to 20 % of a core: "
                  f"sweep job {slow.job_s:.0f} s, wall {slow.wall_s:.0f} s, {slow.steps} "
                  f"job steps")
            for line in slow.blamed or ["blamed: nobody"]:
                print(f"  {line[:300]}", flush=True)
    finally:
        cluster.down(STATE)
        cluster.purge(STATE)  # its state and /var/lib/perfguard data
    round_s = statistics.median(per_pair)
    print(f"\nprojection, a round's pairs at once ({round_s:.2f} s per round):")
    for nodes in (128, 512, 2048):
        rounds, seconds = cost(nodes, round_s)
        print(f"  {nodes} nodes, every pair: {rounds} rounds, {seconds / 60:.1f} min")
        for per_leaf in (16, 32):
            rounds, seconds = leaf_cost([per_leaf] * (nodes // per_leaf), round_s)
            print(f"  {nodes} nodes, {nodes // per_leaf} leaves of {per_leaf}: {rounds} "
                  f"rounds, {seconds / 60:.1f} min")


if __name__ == "__main__":
    main()
