"""Bounded soak: nightly-shaped runs while PostgreSQL restarts and nodes die.

    .venv/bin/python benchmarks/soak.py [--runs 6] [--seed 1] [--smoke]
    (as root, like the README's commands; prefix sudo otherwise)

On its own embedded cluster (state ``.state-soak``, ports 19800+; PERFGUARD_BENCH_STATE
and PERFGUARD_BENCH_PORT_BASE move it), runs ``--runs``
times `perfguard run -t nightly` with the recorded outputs replayed (every check class,
real Slurm jobs, real ReFrame, real ingest) while a fault thread, at random moments,
either stops PostgreSQL or SIGKILLs every process of one virtual node, then heals the
cluster with `perfguard cluster up`. Afterwards `perfguard ingest --spool` stores
what waited. Reports: runs attempted / stored at once / spooled then stored /
rejected / lost (must be 0), and the time each heal took. ``--smoke`` (the test
suite's size): one run of the MPI sanity check, PostgreSQL killed in its first seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfguard import cluster  # noqa: E402
from perfguard.cluster import services  # noqa: E402
from perfguard.cluster.layout import ClusterLayout  # noqa: E402
from perfguard.store.spool import rejected, spooled  # noqa: E402

STATE = Path(os.environ.get("PERFGUARD_BENCH_STATE", ROOT / ".state-soak"))
PORT_BASE = int(os.environ.get("PERFGUARD_BENCH_PORT_BASE", "19800"))
REPLAY = ROOT / "tests" / "data" / "replay"


def perfguard(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfguard.cli", "--state-dir", str(STATE),
                           *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PERFGUARD_REPLAY": str(REPLAY)})


def kill_postgres(layout: ClusterLayout) -> str:
    [postgres] = [s for s in services.SERVICES if s.name == "postgresql"]
    for pid in postgres.pids(layout):
        os.kill(pid, signal.SIGKILL)
    return "PostgreSQL killed"


def kill_node(layout: ClusterLayout, rng: random.Random) -> str:
    node = rng.choice(layout.node_specs()).name
    for pid in services.node_pids(layout, node):
        os.kill(pid, signal.SIGKILL)
    return f"{node} killed"


def inject_faults(layout: ClusterLayout, rng: random.Random, stop: threading.Event,
                  heals: list[tuple[str, float]], smoke: bool = False) -> None:
    """Faults at random moments until stopped; at the smoke size one PostgreSQL kill
    within the first seconds (so the run's report goes through the spool)."""
    while not stop.wait(rng.uniform(1, 3) if smoke else rng.uniform(8, 30)):
        fault = (kill_postgres(layout) if smoke or rng.random() < 0.5
                 else kill_node(layout, rng))
        time.sleep(rng.uniform(1, 6))  # down for a while, as in life
        started = time.monotonic()
        healed = perfguard("cluster", "up", "--nodes", str(layout.nodes), "--port-base",
                           str(PORT_BASE))
        heals.append((fault, time.monotonic() - started if healed.returncode == 0
                      else float("inf")))
        print(f"  fault: {fault}; healed in {heals[-1][1]:.1f} s", flush=True)
        if smoke:
            return


def sessions_in(report: Path) -> str | None:
    try:
        return json.loads(report.read_text())["session_info"]["uuid"]
    except (OSError, ValueError, KeyError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true",
                        help="one run of the MPI sanity check and one PostgreSQL kill: that "
                             "the script runs (the test suite's size)")
    args = parser.parse_args()
    checks = ("-t", "nightly")
    if args.smoke:
        args.runs, checks = 1, ("-n", "MpiHelloCheck")
    layout = cluster.up(STATE, nodes=4, port_base=PORT_BASE)
    assert perfguard("db", "upgrade").returncode == 0
    rng = random.Random(args.seed)
    heals: list[tuple[str, float]] = []
    stop = threading.Event()
    faults = threading.Thread(target=inject_faults, args=(layout, rng, stop, heals,
                                                          args.smoke))
    before = set((STATE / "reports").glob("*.json")) if (STATE / "reports").exists() else set()
    faults.start()
    outcomes = []
    try:
        for index in range(args.runs):
            started = time.monotonic()
            result = perfguard("run", *checks, "--trigger", "nightly",
                               "-S", "UcxPerftestCheck.iterations=2000")
            stored = "perfguard verdict for run" in result.stdout
            outcomes.append(stored)
            print(f"run {index + 1}: {'stored' if stored else 'not stored'} "
                  f"(exit {result.returncode}, {time.monotonic() - started:.0f} s)", flush=True)
    finally:
        stop.set()
        faults.join()
    cluster.up(STATE, nodes=4, port_base=PORT_BASE)
    waiting = len(spooled(STATE))
    drain_started = time.monotonic()
    drained = perfguard("ingest", "--spool")
    drain_time = time.monotonic() - drain_started
    reports = [p for p in (STATE / "reports").glob("*.json") if p not in before]
    sessions = {s for s in map(sessions_in, reports) if s}
    with psycopg.connect(layout.dsn) as conn:
        in_db = {str(u) for (u,) in conn.execute(
            "SELECT session_uuid FROM run WHERE session_uuid = ANY(%s::uuid[])",
            (list(sessions),))}
    lost = args.runs - len(in_db) - len(rejected(STATE))
    recovery = [t for _, t in heals]
    print(f"\nruns attempted {args.runs}; stored at once {sum(outcomes)}; spooled "
          f"{waiting}, stored by `ingest --spool` (exit {drained.returncode}, "
          f"{drain_time:.1f} s); rejected {len(rejected(STATE))}; reports written "
          f"{len(sessions)}; in the database {len(in_db)}; lost {lost}")
    if recovery:
        print(f"faults {len(heals)}: heal time median {statistics.median(recovery):.1f} s, "
              f"max {max(recovery):.1f} s")
    cluster.down(STATE)
    cluster.purge(STATE)  # its state and /var/lib/perfguard data
    return 0 if lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
