"""Issue 67, item 2, as it ran: real OMB 7.4 nightlies of the embedded cluster, ten nights
of history, then node1's and node2's slurmd (and every step they start) at a 30 % CPU
quota for three nights, then two nights without it; the history quiet
(``benchmarks/data/live-quota-quiet``) or moved by the host's load (every node at a 60 %
quota from night 4 on: ``live-quota-moved``; their READMEs say how they were taken).
Each night's report, as `perfguard run` wrote it, goes through `perfguard ingest` into a
new database, and `perfguard verdict` says what an admin reads: no page before the
quota, a page naming node1 and node2 by the quota's second night, pass once it is gone.
The nights are judged by the checkout's code, so a change to the rule that loses this
page fails here."""

from __future__ import annotations

import json
import lzma
import re
from pathlib import Path

import pytest

from tests.conftest import perfguard
from tests.system.test_history_verdicts import ingest

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
PAIR_PAGES = re.compile(r"^ *PAGE +node1:lo, node2:lo: ", re.M)


def _nights(folder: Path, into: Path) -> list[tuple[dict, Path]]:
    """Each recorded night (nights.jsonl) with its report written out, in the order run."""
    nights = []
    for line in (folder / "nights.jsonl").read_text().splitlines():
        entry = json.loads(line)
        report = into / f"night-{entry['night']:02d}.json"
        report.write_bytes(lzma.decompress((folder / f"{report.name}.xz").read_bytes()))
        nights.append((entry, report))
    return nights


@pytest.mark.parametrize("history", ["quiet", "moved"])
def test_the_live_quota_pages_by_its_second_night_naming_the_pair_and_passes_after(
        migrated_dsn: str, tmp_path: Path, history: str) -> None:
    nights = _nights(DATA / f"live-quota-{history}", tmp_path)
    runs = ingest(migrated_dsn, [report for _, report in nights], "--trigger", "nightly")
    assert len(runs) == len(nights), runs
    run_of = {entry["night"]: run for (entry, _), run in zip(nights, runs)}
    quota = [entry["night"] for entry, _ in nights if entry["quota"]]
    assert len(quota) == 3 and quota == list(range(quota[0], quota[0] + 3)), quota
    shown = {}
    for night, run in run_of.items():
        said = perfguard("verdict", str(run), "--dsn", migrated_dsn)
        assert said.returncode in (0, 1) and "Traceback" not in said.stderr, said.stderr
        shown[night] = (said.returncode, said.stdout)
    for night, (code, out) in shown.items():
        if night not in quota:
            assert code == 0 and not PAIR_PAGES.search(out), (night, out)
    paged = [night for night in quota if PAIR_PAGES.search(shown[night][1])]
    assert paged and paged[0] <= quota[1], {n: shown[n][1] for n in quota}
    assert all(shown[night][0] == 1 for night in paged), paged
    explained = perfguard("verdict", str(run_of[paged[0]]), "--explain", "node1", "--dsn",
                          migrated_dsn)
    assert re.search(r"^finding node1:lo, node2:lo \(\w+\): PAGE$", explained.stdout,
                     re.M), explained.stdout
    assert re.search(r"^  outcome: pages: worse; evidence z [\d.]+ ≥ the bar [\d.]+",
                     explained.stdout, re.M), explained.stdout
    # every discount with its number: the nodes' nights taken off, each line's last night
    # taken apart into them and what is left
    for node in ("node1", "node2"):
        assert re.search(rf"^    {node}: [+-]\d+\.\d %(, [+-]\d+\.\d %)* \(its nights' spread "
                         rf"\d+\.\d %\); ", explained.stdout, re.M), explained.stdout
    judged = re.findall(r"^   [* ] .+? \[.+\]: z ", explained.stdout, re.M)
    apart = re.findall(r"^       (?:tonight worse by [+-]\d+\.\d % = .* left [+-]\d+\.\d \(|"
                       r"no nightly moves \(a whole curve\))", explained.stdout, re.M)
    assert judged and len(apart) == len(judged), explained.stdout
