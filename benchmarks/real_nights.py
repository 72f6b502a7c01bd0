"""Real nights that cannot flatter: recorded nightlies replayed through perfguard's own
ingest and judge, as they were and with faults injected into their real values.

    .venv/bin/python benchmarks/real_nights.py [--dsn ADMIN_DSN] [--data DIR]
        [--shuffle SEED] [--smoke]

``benchmarks/data/real-nights/`` holds real `perfguard run -t nightly` nights of the
embedded cluster (OMB 7.4 from a prefix, Debian's ucx_perftest; how they were taken, the
host's load before and after each: its README.md). Each night's ReFrame report is
replayed in the order the nights ran into a new database (``--dsn``: any PostgreSQL whose
role may create databases; default the embedded cluster's), or in a random order
(``--shuffle``: the nights recorded minutes apart made as independent as a site's a day
apart, ``shuffled``), through
``perfguard.store.ingest.ingest_report`` and ``run_findings.judge_and_record``, what `perfguard
run` and `perfguard ingest` do. A **page** is what docs/verdicts.md says pages: a run whose
stored outcome is FAIL because a finding paged (history), as `perfguard verdict` would say
it; a FAIL from a test case that failed (a benchmark that crashed) is counted apart.

Faults (benchmarks/run_quality.py's, in the real values from a start night on, each start
and node a trial, each in a copy of the database as it was the night before): one node's
lines at half bandwidth (every bandwidth figure and curve point of the test cases that ran
on it); the same on 2 of 3 nights (run_quality's ``INTERMITTENT`` patterns); a driver
update adding 0.3 µs to every latency of 8 KiB and less, its fingerprint change (UCX's
version on every node) recorded from that night on. Reported as run_quality reports them:
paged within 1, 2 and 3 nights, the cause named (a finding that paged names the node, or
for the driver its fingerprint change: the change's own finding, or a finding that says
it came on its nodes in the runs before). Himeno is not in the embedded system's nightly
selection (`-t nightly`), so its fault has no line to hit and is said so.

Updates that changed nothing: the nights replayed once more into a database of their own,
every node's UCX version changed every ``run_quality.UPDATE_EVERY`` nights from night
``HISTORY`` + 1 and kept, the values as measured; an update pages when a finding names
it, or one the night did not page without it, on its night or the two after (a site
checks its upgrades with the nightly: a page for one that changed nothing is a false
page then).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import lzma
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import run_quality as rq  # noqa: E402
from ingest import create_database, drop_database  # noqa: E402

from perfguard import paths  # noqa: E402
from perfguard.judge import findings as fd  # noqa: E402
from perfguard.judge import run_findings  # noqa: E402
from perfguard.judge import verdict as vd  # noqa: E402
from perfguard.states import DISTURBED  # noqa: E402
from perfguard.store import db, queries  # noqa: E402
from perfguard.store.ingest import RunMeta, ingest_report  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "real-nights"
#: Units of the figures a bandwidth fault halves, and of the latencies a driver slows.
BANDWIDTH_UNITS = {"MB/s", "MiB/s", "GB/s", "GiB/s"}
LATENCY_UNITS = {"us"}
#: A driver fault slows the latencies of this size and less (run_quality's "small").
SMALL = 8192
#: The first night judged against history: 8 history runs and the 3 recent ones, this
#: one included ("not yet judged: history n of 8" before it; docs/verdicts.md).
JUDGED_FROM = 10
#: The earliest night a fault starts on: the findings' night effects want 8 nights of
#: history in common (``effect_nights``) besides.
HISTORY = 18
QUIET = 1.5


@dataclass(frozen=True)
class Night:
    number: int
    report: dict
    load_before: float
    load_after: float

    @property
    def quiet(self) -> bool:
        return max(self.load_before, self.load_after) < QUIET


def load_nights(folder: Path = DATA) -> list[Night]:
    """The recorded nights in the order they ran (nights.jsonl), each with its report."""
    nights = []
    for line in (folder / "nights.jsonl").read_text().splitlines():
        entry = json.loads(line)
        path = folder / f"night-{entry['night']:02d}.json.xz"
        if entry.get("exit") not in (0, 1) or not path.exists():
            continue  # a night that stored no report: said in the README
        nights.append(Night(entry["night"], json.loads(lzma.decompress(path.read_bytes())),
                            float(entry["loadavg_before"].split()[0]),
                            float(entry["loadavg_after"].split()[0])))
    return sorted(nights, key=lambda n: n.report["session_info"]["time_start_unix"])


#: A report's own times: its run's place among the nights (``started_at``).
SESSION_TIMES = ("time_start", "time_start_unix", "time_end", "time_end_unix")


def shuffled(nights: list[Night], seed: int) -> list[Night]:
    """The nights in a random order, each taking the start and end time of the night
    whose place it takes (the judge orders history by them): nights as independent of
    their neighbours as a site's a day apart, each night's lines as measured together.
    Recorded back to back, a state of the host that lasts minutes spans several nights
    and is confirmed as a level; in a random order it is the one night it would be."""
    order = nights[:]
    random.Random(seed).shuffle(order)
    moved = []
    for slot, night in zip(nights, order):
        report = copy.deepcopy(night.report)
        report["session_info"].update({key: slot.report["session_info"][key]
                                       for key in SESSION_TIMES
                                       if key in slot.report["session_info"]})
        moved.append(dataclasses.replace(night, report=report))
    return moved


def cases(report: dict) -> list[dict]:
    return [case for run in report["runs"] for case in run["testcases"]]


def nodes_of(case: dict) -> list[str]:
    return list(case.get("perfguard_nodelist") or case.get("job_nodelist") or [])


def scale(case: dict, change: Callable[[str, str, float | None, float], float]) -> None:
    """Applies ``change(metric, unit, size, value)`` to every key figure and curve point
    of a test case, in place (a key figure's size: the curve point it equals)."""
    for key, entry in (case.get("perfvalues") or {}).items():
        if entry and entry[0] is not None:
            entry[0] = change(key.rsplit(":", 1)[-1], entry[4], None, entry[0])
    for series in case.get("perfguard_samples") or []:
        sizes = (series.get("coords") or {}).get("size") or [None] * len(series["values"])
        series["values"] = [change(series["metric"], series["unit"], size, value)
                            for size, value in zip(sizes, series["values"])]


def bandwidth_nodes(nights: list[Night]) -> list[str]:
    """The nodes a bandwidth figure ran on (the trials of the node faults): a node only
    the collectives take has no line a bandwidth fault could move."""
    return sorted({node for night in nights for case in cases(night.report)
                   for node in nodes_of(case)
                   if any(entry and entry[4] in BANDWIDTH_UNITS
                          for entry in (case.get("perfvalues") or {}).values())})


def half_bandwidth(node: str) -> Callable[[dict, int], None]:
    """One node's lines at half bandwidth (an HCA, a cable at half width)."""
    def apply(report: dict, night: int) -> None:
        for case in cases(report):
            if node in nodes_of(case):
                scale(case, lambda m, unit, size, v: v * 0.5 if unit in BANDWIDTH_UNITS else v)
    return apply


def driver_latency(report: dict, night: int) -> None:
    """+0.3 µs on every latency of 8 KiB and less (a key figure: its small size), and the
    driver's version changed in every node's fingerprint."""
    def slower(metric: str, unit: str, size: float | None, value: float) -> float:
        small = size is None or size <= SMALL
        return value + 0.3 if unit in LATENCY_UNITS and "latency" in metric and small \
            else value

    for case in cases(report):
        scale(case, slower)
    updated(report, "driver update")


def updated(report: dict, update: str) -> None:
    """Every node's fingerprint as after ``update`` of UCX (its version string grows by
    it; the values are left as they are)."""
    for case in cases(report):
        for facts in (case.get("perfguard_fingerprints") or {}).values():
            if isinstance(facts, dict) and "ucx" in facts:
                facts["ucx"] = f"{facts['ucx']} + {update}"


@dataclass(frozen=True)
class Trial:
    fault: str
    start: int  # index into the nights
    apply: Callable[[dict, int], None]
    shows: tuple[int, ...]
    named: Callable[[dict], bool]


def trials(nights: list[Night], starts: list[int], nodes: list[str]) -> list[Trial]:
    """Every fault at every start night, the node faults on every node that has lines."""
    out = []
    for start in starts:
        for node in nodes:
            def names(row: dict, node: str = node) -> bool:
                return node in fd.subject_names(row["subject"])
            out.append(Trial("HCA at half bandwidth", start, half_bandwidth(node), (1,), names))
            for pattern in rq.INTERMITTENT:
                out.append(Trial("HCA half, 2 of 3 nights", start, half_bandwidth(node),
                                 pattern, names))
        out.append(Trial("driver +0.3 µs small latency", start, driver_latency, (1,),
                         lambda row: "+ driver update" in row["summary"]))
    return out


@dataclass
class Judged:
    run_id: int
    outcome: str
    paged: list[dict]
    test_failed: bool
    #: Test cases measured on contended CPUs (docs/verdicts.md, "Disturbed"): not judged.
    disturbed: int = 0


def replay(conn: psycopg.Connection, report: dict, folder: Path) -> Judged:
    """One night through the real ingest and judge, as `perfguard ingest` does."""
    path = folder / f"{report['session_info']['uuid']}.json"
    path.write_text(json.dumps(report))
    result = ingest_report(conn, path, RunMeta("nightly"))
    lines = run_findings.judge_and_record(conn, result.run_id)
    found = queries.rows(conn, "findings_of_run", (result.run_id,))
    outcome = vd.outcome(conn, result.run_id)
    return Judged(result.run_id, outcome.word, [f for f in found if f["paged"]],
                  any(line.status == "test-failed" for line in lines),
                  len({vd.variant_name(line.check, line.params) for line in lines
                       if line.status == DISTURBED}))


def clone(admin: str, template: str) -> tuple[str, str]:
    """A copy of a database (the state of the night before a fault's first): PostgreSQL
    copies it file by file, far faster than replaying its nights again."""
    name = f"perfguard_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    return name, make_conninfo(admin, dbname=name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="admin DSN of a PostgreSQL whose role may create "
                                      "databases (default: the embedded cluster's)")
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded nights")
    parser.add_argument("--smoke", action="store_true",
                        help="the first 13 nights, a fault from the 11th, one node (the "
                             "suite's size)")
    parser.add_argument("--shuffle", type=int, metavar="SEED",
                        help="replay the nights in a random order drawn from SEED, each in "
                             "the time slot of the night it replaces")
    args = parser.parse_args()
    admin = args.dsn or embedded_admin()
    nights = load_nights(args.data)
    if args.shuffle is not None:
        nights = shuffled(nights, args.shuffle)
    started = time.monotonic()
    if args.smoke:
        nights, starts = nights[:13], [JUDGED_FROM]
    else:
        last = len(nights) - 3
        starts = sorted({min(max(HISTORY, s), last) for s in (40, last - 10, last)})
    nodes = bandwidth_nodes(nights)
    if args.smoke:
        nodes = nodes[:1]
    base, dsn = create_database(admin)
    snapshots: dict[int, str] = {}
    clean: list[Judged] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for index, night in enumerate(nights):
                if index in starts:
                    snapshots[index] = snapshot(admin, base)
                with db.connect(dsn) as conn:
                    if index == 0:
                        db.upgrade(conn)
                    clean.append(replay(conn, night.report, Path(tmp)))
            clean_s = time.monotonic() - started
            rows = detect(admin, nights, trials(nights, starts, nodes), snapshots, Path(tmp),
                          clean)
            update_nights = starts if args.smoke else list(
                range(HISTORY, len(nights), rq.UPDATE_EVERY))
            upgraded = updates(admin, nights, update_nights, Path(tmp), clean)
    finally:
        for name in [base, *snapshots.values()]:
            drop_database(admin, name, checkpoint=False)
    print_tables(nights, clean, rows, clean_s, time.monotonic() - started, args.data,
                 upgraded, "in order" if args.shuffle is None
                 else f"in a random order (seed {args.shuffle})")
    return 0


def updates(admin: str, nights: list[Night], on: list[int], folder: Path,
            clean: list[Judged]) -> list[tuple[Night, int | None]]:
    """The nights replayed again into a database of their own, every node's fingerprint
    updated on each night of ``on`` (an update that changed nothing, as a site installs
    one every few nights) and kept from then on: each update night, with the first of it
    and the two nights after it (the update still among their recent nights) that paged
    for the update (a finding naming it, or one the night did not page without it:
    ``clean``), 1-3, or None."""
    name, dsn = create_database(admin)
    firsts: dict[int, int | None] = {}
    try:
        with db.connect(dsn) as conn:
            db.upgrade(conn)
            for index, night in enumerate(nights):
                report = copy.deepcopy(night.report)
                version = sum(index >= first for first in on)
                if version:
                    updated(report, f"update {version}")
                judged = replay(conn, report, folder)
                since = max((first for first in on if first <= index), default=None)
                if since is None or index - since >= 3 or firsts.get(since):
                    continue
                anyway = {(f["kind"], f["subject"]) for f in clean[index].paged}
                own = [f for f in judged.paged if "+ update" in f["subject"]
                       or (f["kind"], f["subject"]) not in anyway]
                firsts[since] = index - since + 1 if own else None
    finally:
        drop_database(admin, name, checkpoint=False)
    return [(nights[first], firsts.get(first)) for first in on]


def snapshot(admin: str, base: str) -> str:
    name, _ = clone(admin, base)
    return name


def detect(admin: str, nights: list[Night], chosen: list[Trial], snapshots: dict[int, str],
           folder: Path, clean: list[Judged]) -> dict[str, list[tuple[int | None, bool]]]:
    """Per fault, each trial's (first night paged 1-3, or None; whether the cause was
    named by a finding that paged). The fault's pages are those that name its cause or
    that the same night did not page without it (``clean``): a night that pages for its
    own noise is no page of the fault (run_quality.fault_trials, likewise)."""
    out: dict[str, list[tuple[int | None, bool]]] = {}
    for trial in chosen:
        name, dsn = clone(admin, snapshots[trial.start])
        first, named = None, False
        try:
            with db.connect(dsn) as conn:
                for offset in range(3):
                    index = trial.start + offset
                    if index >= len(nights):
                        break
                    report = copy.deepcopy(nights[index].report)
                    if rq.shows_on(trial.shows, trial.start, index + 1)[index]:
                        trial.apply(report, index)
                    judged = replay(conn, report, folder)
                    anyway = {(f["kind"], f["subject"]) for f in clean[index].paged}
                    own = [f for f in judged.paged
                           if trial.named(f) or (f["kind"], f["subject"]) not in anyway]
                    if own:
                        first, named = offset + 1, any(trial.named(f) for f in own)
                        break
        finally:
            drop_database(admin, name, checkpoint=False)
        out.setdefault(trial.fault, []).append((first, named))
    return out


def print_tables(nights: list[Night], clean: list[Judged], rows: dict, clean_s: float,
                 total_s: float, folder: Path = Path("benchmarks/data/real-nights"),
                 upgraded: list[tuple[Night, int | None]] = (), order: str = "in order"
                 ) -> None:
    judged = list(zip(nights, clean))[JUDGED_FROM:]
    pages = [(n, j) for n, j in judged if j.paged]
    failed = [(n, j) for n, j in judged if j.test_failed]
    quiet = sum(n.quiet for n, _ in judged)
    disturbed = [(n, j) for n, j in judged if j.disturbed]
    print(f"perfguard on {len(nights)} real nights ({folder}), replayed "
          f"{order} through the real ingest and judge\n")
    print("| nights | judged against history | quiet / busy | false pages | nights with a "
          "test-failed case | nights with disturbed test cases (test cases) | replay |\n"
          "|---|---|---|---|---|---|---|")
    print(f"| {len(nights)} | {len(judged)} | {quiet} / {len(judged) - quiet} | {len(pages)} | "
          f"{len(failed)} | {len(disturbed)} ({sum(j.disturbed for _, j in disturbed)}) | "
          f"{clean_s:.0f} s |")
    for night, j in pages:
        print(f"  page on night {night.number} (run {j.run_id}, load "
              f"{night.load_before:.1f}/{night.load_after:.1f}): "
              + "; ".join(f"{f['subject']} ({f['summary']})" for f in j.paged))
    print("\n" + rq.FAULT_HEADER)
    for fault, results in rows.items():
        within = rq.FAULTS[fault][1]
        shares = tuple(sum(f is not None and f <= k for f, _ in results) / len(results)
                       for k in (1, 2, 3))
        named = sum(n for _, n in results) / len(results)
        print(rq.fault_row("real nights", fault, shares, named, within, len(results)))
    print("| real nights | Himeno node 20 % slower | - | - | - | - | not run: no Himeno line "
          "in `-t nightly` |")
    print_updates(upgraded)
    print(f"\ntotal {total_s:.0f} s")


def print_updates(upgraded: list[tuple[Night, int | None]]) -> None:
    """The updates that changed nothing: how many paged for the update on its night or
    within the two after."""
    shares = [sum(first is not None and first <= k for _, first in upgraded)
              for k in (1, 2, 3)]
    print(f"\nUpdates that changed nothing (every node's UCX version, the values as "
          f"measured; pages the nights did not have without it): {len(upgraded)} "
          f"update(s), paged on the update's night {shares[0]}, within 2 nights "
          f"{shares[1]}, within 3 {shares[2]}"
          + "".join(f"\n  paged: the update of night {night.number}, on its night {first}"
                    for night, first in upgraded if first is not None))


def embedded_admin() -> str:
    from perfguard.cluster.layout import ClusterLayout

    layout = ClusterLayout.load(paths.state_dir())
    if layout is None:
        sys.exit("no embedded cluster: run `perfguard cluster up` or pass --dsn")
    return layout.dsn_for("postgres")


if __name__ == "__main__":
    sys.exit(main())
