"""README's first command: `perfguard demo` brings up the embedded cluster, runs the demo
checks through Slurm into PostgreSQL and prints the verdict and the HTML report's path,
on a cluster of its own (its state and ports), as a new machine runs it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.conftest import TEST_PORT_BASE, TEST_ROOT, perfguard


def test_the_demo_runs_the_checks_and_writes_its_report() -> None:
    state = TEST_ROOT / "demo"
    perfguard("cluster", "down", "--purge", state=state)  # what a try before left
    try:
        demo = perfguard("demo", "--port-base", str(TEST_PORT_BASE + 1700), state=state)
        assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
        # the first run has no history: PASS on its thresholds, or nothing judged where
        # the host's load disturbed it (its CPU-wait bars), never a failure
        assert re.search(r"^verdict: \d+ pass, 0 fail, 0 regression, 0 test-failed",
                         demo.stdout, re.M), demo.stdout
        [outcome] = re.findall(r"^run 1: ([A-Z-]+)", demo.stdout, re.M)
        assert outcome in ("PASS", "NOTHING-JUDGED"), demo.stdout
        [report] = re.findall(r"^HTML report: (\S+)$", demo.stdout, re.M)
        assert "<html" in Path(report).read_text()
        assert Path(report).with_suffix(".md").is_file()
        again = perfguard("verdict", "demo", state=state)  # stored: the label names it
        assert again.returncode == 0 and f"run 1: {outcome}" in again.stdout, \
            again.stdout + again.stderr
    finally:
        perfguard("cluster", "down", "--purge", state=state)
        shutil.rmtree(state, ignore_errors=True)
