"""What a fabric sweep costs: time per pair measurement and per round, by node count.

    sudo .venv/bin/python benchmarks/sweep_cost.py [--nodes 4] [--repeat 2] [--smoke]

On its own embedded cluster (state ``.state-sweep``, ports 18800+), runs the real
`perfguard sweep --nodes node[1-k]` (ucx_perftest tag_bw 1 MiB × 1000 and tag_lat 8 B ×
10000 per pair, every pair as its own server/client job steps) for k = 2 … --nodes and
reads the FabricSweepCheck job's run time from the ReFrame report. The embedded cluster
runs one pair at a time (its virtual nodes share the host's cores), so the time per
pair measurement is what one round takes on a fabric where a round's pairs run at once.
Prints a table and the projection for 16, 128 and 512 nodes (docs/sweep.md).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfguard import cluster  # noqa: E402
from perfguard.site.context import Context  # noqa: E402
from perfguard.store import db  # noqa: E402
from perfguard.sweep.analysis import cost  # noqa: E402

STATE = ROOT / ".state-sweep"
PORT_BASE = 18800


def sweep_once(nodes: int) -> tuple[float, float]:
    """(wall seconds of `perfguard sweep`, seconds the sweep job ran)."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "perfguard.cli", "--state-dir", str(STATE),
                             "sweep", "--nodes", f"node[1-{nodes}]"], capture_output=True,
                            text=True, cwd=ROOT)
    wall = time.monotonic() - started
    found = re.search(r"perfguard sweep on local: run (\d+)", result.stdout)
    if found is None:
        raise SystemExit(f"sweep of {nodes} nodes failed:\n{result.stdout}\n{result.stderr}")
    with db.connect(Context.resolve(STATE).dsn) as conn:
        [report] = conn.execute("SELECT report_path FROM run WHERE id = %s",
                                (int(found[1]),)).fetchone()
    [case] = [c for c in json.loads(Path(report).read_text())["runs"][0]["testcases"]
              if c["name"].startswith("FabricSweepCheck")]
    return wall, case["time_run"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--smoke", action="store_true",
                        help="2 nodes once: that the script runs (the test suite's size)")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.repeat = 2, 1
    layout = cluster.up(STATE, nodes=args.nodes, port_base=PORT_BASE)
    with db.connect(layout.dsn) as conn:
        db.upgrade(conn)
    rows, per_pair = [], []
    try:
        for nodes in range(2, args.nodes + 1):
            runs = [sweep_once(nodes) for _ in range(args.repeat)]
            measurements = nodes + nodes * (nodes - 1) // 2  # loopbacks + pairs
            job = statistics.median(r[1] for r in runs)
            per_pair.append(job / measurements)
            rows.append((nodes, cost(nodes, 0)[0], measurements,
                         statistics.median(r[0] for r in runs), job, job / measurements))
    finally:
        cluster.down(STATE)
        cluster.purge(STATE)  # its state and /var/lib/perfguard data
    print("| nodes | rounds (incl. loopback) | pair measurements | `perfguard sweep` wall s "
          "| sweep job s | s per pair measurement |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| {} | {} | {} | {:.1f} | {:.1f} | {:.2f} |".format(*row))
    round_s = statistics.median(per_pair)
    print(f"\nprojection, a round's pairs at once ({round_s:.2f} s per round):")
    for nodes in (16, 128, 512):
        rounds, seconds = cost(nodes, round_s)
        print(f"  {nodes} nodes: {rounds} rounds, {seconds / 60:.1f} min")


if __name__ == "__main__":
    main()
