"""docs/writing-checks.md's "Running it" block, as written there, on the embedded cluster:
the system `local`, a threshold for one variant (`--param`), the MPI launch every check
gets, the first runs not yet judged from history, and `site show` naming the site."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import TEST_STATE, job_file, perfguard
from tests.system.test_site_checks import GUIDE, guide_files


def running_block() -> str:
    section = GUIDE.read_text().split("\n## Running it:", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)
    return block


def test_the_guides_running_block(layout, migrated_dsn: str, tmp_path: Path) -> None:
    site = tmp_path / "site"
    guide_files(site)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-xc", running_block()], capture_output=True, text=True,
        timeout=1800, env={**os.environ, "PERFGUARD_SITE": str(site),
                           "PERFGUARD_STATE_DIR": str(TEST_STATE), "PERFGUARD_DSN": migrated_dsn,
                           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-5000:]
    assert f"site directory: {site}\n" in done.stdout
    first = re.findall(r"\(report (\S+\.json)\)", said)[0]
    assert "set: #1 local:*:*:SiteTriadCheck %mib=64 triad" in done.stdout  # the variant's
    triads = [line.split() for line in done.stdout.splitlines()
              if line.strip().startswith("triad")]
    assert triads[0][3:5] == ["-", "-"] and "inconclusive: not yet judged: history 0 of 8 " \
        "runs" in " ".join(triads[0]), triads  # the first run: no threshold, no history
    assert triads[1][3:7] == ["1,000", "[500,", "-]", "pass:"], triads  # the threshold's
    script = job_file(Path(first), "SiteTriadCheck", "rfm_job.sh")
    assert re.search(r"^srun .*--mpi=pmix .*--kill-on-bad-exit=1", script, re.M), script
    # `uses_mpi = False`, as the page says to write it: neither MPI option on the step
    check = site / "checks" / "triad.py"
    check.write_text(check.read_text().replace("    num_tasks = 1\n",
                                               "    num_tasks = 1\n    uses_mpi = False\n"))
    dry = perfguard("run", "-n", "SiteTriadCheck", "--dry-run", state=TEST_STATE,
                    env={"PERFGUARD_SITE": str(site), "PERFGUARD_DSN": migrated_dsn})
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-2000:]
    report = json.loads(Path(re.findall(r"(\S+\.json)", dry.stdout + dry.stderr)[-1]).read_text())
    [stage] = [case["stagedir"] for case in report["runs"][0]["testcases"]
               if case["name"].startswith("SiteTriadCheck")]
    steps = [line for line in (Path(stage) / "rfm_job.sh").read_text().splitlines()
             if line.startswith("srun ")]
    assert steps and not any("--mpi=pmix" in s or "--kill-on-bad-exit" in s for s in steps), steps
    print(said)
