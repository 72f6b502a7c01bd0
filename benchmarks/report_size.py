"""How big the HTML report is, and how long it takes to write and to render, for a run of
2,000 test cases with history.

    .venv/bin/python benchmarks/report_size.py [--nights 9] [--smoke]
    (as root, like the README's commands; prefix sudo otherwise)

On the embedded PostgreSQL (state ``.state-report``, ports 18800+;
PERFGUARD_BENCH_STATE and PERFGUARD_BENCH_PORT_BASE move it: the suite's workers each
their own): ingests ``--nights``
nightly runs of the ingest benchmark's synthetic report (2,000 test cases, 2 key figures
and a 123-point curve each: 250,000 samples per run) through the real ingest (and judges
each run, as `perfguard ingest` does), with 1 % noise, the last night 8 % slower on one
variant in ten; then times `perfguard report` (build + write) and Debian's headless
Chromium loading the file (Playwright: until the load event, then every SVG laid out).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest import synthetic_report  # noqa: E402

from perfguard import cluster  # noqa: E402
from perfguard.judge import run_findings  # noqa: E402
from perfguard.present import htmlreport  # noqa: E402
from perfguard.store import db  # noqa: E402
from perfguard.store.ingest import RunMeta, ingest_report  # noqa: E402

STATE = Path(os.environ.get("PERFGUARD_BENCH_STATE", ROOT / ".state-report"))
PORT_BASE = int(os.environ.get("PERFGUARD_BENCH_PORT_BASE", "18800"))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def night(report: dict, index: int, rng: random.Random, slower: bool) -> dict:
    copy = json.loads(json.dumps(report))
    copy["session_info"]["uuid"] = f"00000000-0000-4000-8000-{index:012d}"
    copy["session_info"]["time_start_unix"] = time.time() - (30 - index) * 86400
    for number, case in enumerate(copy["runs"][0]["testcases"]):
        case["perfguard_better"] = {"latency": "lower", "bandwidth": "higher"}
        factor = 0.92 if slower and number % 10 == 0 else 1.0
        for entry in case["perfvalues"].values():
            entry[0] *= rng.gauss(1, 0.01) * (factor if entry[4] == "MB/s" else 1)
        for series in case["perfguard_samples"]:
            series["values"] = [v * rng.gauss(1, 0.01) * factor for v in series["values"]]
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=9)
    parser.add_argument("--smoke", action="store_true",
                        help="2 nights of 200 test cases: that the script runs (the test "
                             "suite's size)")
    args = parser.parse_args()
    layout = cluster.up(STATE, nodes=2, port_base=PORT_BASE)
    rng = random.Random(1)
    base = synthetic_report(time.time())
    if args.smoke:
        args.nights = 2
        base["runs"][0]["testcases"] = base["runs"][0]["testcases"][:200]
    try:
        with db.connect(layout.dsn) as conn, tempfile.TemporaryDirectory() as tmp:
            db.upgrade(conn)
            ingest_seconds = []
            for index in range(args.nights):
                path = Path(tmp) / f"night{index}.json"
                path.write_text(json.dumps(night(base, index, rng, index == args.nights - 1)))
                started = time.perf_counter()
                result = ingest_report(conn, path, RunMeta("nightly"))
                stored = time.perf_counter()
                # what `perfguard ingest` does next
                run_findings.judge_and_record(conn, result.run_id)
                ingest_seconds.append(time.perf_counter() - stored)
                print(f"night {index}: run {result.run_id}, {result.testcases} test cases, "
                      f"ingest {stored - started:.1f} s, judge and record "
                      f"{ingest_seconds[-1]:.1f} s", flush=True)
            out = STATE / "bench-report.html"
            started = time.perf_counter()
            report = htmlreport.write(conn, result.run_id, out)
            write_s = time.perf_counter() - started
        load_s, laid_out_s, svgs = render(out)
        print(f"\n| test cases | verdict lines | on top | curves drawn | file | write | "
              f"Chromium load | all SVG laid out |\n|---|---|---|---|---|---|---|---|\n"
              f"| {result.testcases} | {len(report.lines)} | {len(report.top)} | "
              f"{len(report.curves)} (+{report.curves_left_out} not drawn) | "
              f"{out.stat().st_size / 1e6:.2f} MB | {write_s:.1f} s | {load_s:.2f} s | "
              f"{laid_out_s:.2f} s ({svgs} SVG) |")
        print(f"judge and record per night: median "
              f"{sorted(ingest_seconds)[len(ingest_seconds) // 2]:.1f} s")
    finally:
        cluster.down(STATE)
        cluster.purge(STATE)  # its state and /var/lib/perfguard data


def render(path: Path) -> tuple[float, float, int]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        started = time.perf_counter()
        page.goto(path.as_uri(), wait_until="load")
        load = time.perf_counter() - started
        svgs = page.evaluate("() => Array.from(document.querySelectorAll('svg'))"
                             ".map(s => s.getBoundingClientRect().width).length")
        laid_out = time.perf_counter() - started
        browser.close()
    return load, laid_out, svgs


if __name__ == "__main__":
    main()
