"""How long ReFrame takes to load the check library, as `perfguard run` launches it and
as the plain ``reframe`` does.

    .venv/bin/python benchmarks/check_loading.py [--system ndr4x4] [--repeat 5] [--smoke]

Every `perfguard run`, nightly and upgrade check starts with ReFrame loading every check
file and instantiating every variant for the system's partitions, before anything is
submitted. ReFrame 4.10 spends most of that in deprecation warnings it then ignores
(perfguard/run/reframe_cli.py); perfguard launches ReFrame through
``python -m perfguard.run.reframe_cli``, which asks for them only where they would show.
Each launcher lists the whole library (``-l``) for a shipped example system (no cluster
needed) ``--repeat`` times, alternating; the table gives the median CPU and wall seconds
and the variants found (the same for both: the same checks are loaded). ``--smoke``: one
repetition each (tests/system/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAUNCHERS = {"reframe (stock)": [str(Path(sys.executable).with_name("reframe"))],
             "perfguard's launcher": [sys.executable, "-m", "perfguard.run.reframe_cli"]}


def list_checks(launcher: list[str], system: str, state: Path) -> tuple[float, float, str]:
    """CPU seconds, wall seconds and ReFrame's "Found N check(s)" line of one listing."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [*launcher, "-C", str(ROOT / "site_config" / "settings.py"),
         "-c", str(ROOT / "reframe_tests"), "-R", "--system", system, "-l"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PERFGUARD_STATE_DIR": str(state), "RFM_COLORIZE": "n"})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = next((line for line in result.stdout.splitlines() if line.startswith("Found")), "")
    if result.returncode != 0 or not found:
        sys.exit(f"{launcher[-1]}: listing failed ({result.returncode}): "
                 f"{(result.stdout + result.stderr)[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="ndr4x4", help="a shipped example system")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one repetition each")
    args = parser.parse_args()
    repeat = 1 if args.smoke else args.repeat
    timings: dict[str, list[tuple[float, float, str]]] = {name: [] for name in LAUNCHERS}
    with tempfile.TemporaryDirectory(prefix="perfguard-loading-") as state:
        (Path(state) / "log").mkdir()
        for _ in range(repeat):
            for name, launcher in LAUNCHERS.items():
                timings[name].append(list_checks(launcher, args.system, Path(state)))
    print(f"loading the check library for {args.system}, median of {repeat}")
    print("| launcher | CPU s | wall s | found |")
    print("|---|---|---|---|")
    for name, runs in timings.items():
        print(f"| {name} | {statistics.median(r[0] for r in runs):.2f} | "
              f"{statistics.median(r[1] for r in runs):.2f} | {runs[0][2]} |")


if __name__ == "__main__":
    main()
