"""Fabric sweep: every node pair once, pair by pair, and who is to blame.

The schedule is the circle method (round-robin tournament): N nodes meet in N−1 rounds
(N rounds when N is odd, one node sitting out each round) of disjoint pairs, so a round
runs its pairs at once and every pair is measured exactly once. Before the rounds, each
node measures its own HCA in loopback.

A pair *fails* a metric when it is worse than the sweep's best pair by ClusterKit's
rules (bandwidth below 93 % of the best, latency above 2.1× the lowest) or misses the
HCA's line rate floor. Failing pairs are measured again (``perfguard sweep`` retests
with half as many pairs at once, so contention is ruled out); only pairs that fail
every time count. Then blame, each decision with its evidence:

- a node that fails in loopback, or with most of its partners (at least two), is the
  bad **node**; if it fails on some of its HCAs but not others, the bad **HCA**;
- a failing pair that no bad node explains is a bad **link** (cable, port, switch path).
"""

from __future__ import annotations

import dataclasses
import os
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from perfguard.contract.rounds import leaf_rounds
from perfguard.judge import rules as judge
from perfguard.judge.fingerprint import compact_nodes, natural_key
from perfguard.store import queries
from perfguard.store.queries import Connection

#: What each metric's better direction is (the sweep check declares the same).
BETTER = {"bandwidth": "higher", "latency": "lower"}


@dataclass(frozen=True)
class Measurement:
    """One pair (server == client: loopback) on one HCA: a metric's value, or None when
    the measurement itself failed (no output, a server that never listened)."""
    hca: str
    server: str
    client: str
    metric: str
    value: float | None
    unit: str = ""

    @property
    def pair(self) -> tuple[str, str]:
        return (min(self.server, self.client), max(self.server, self.client))

    @property
    def loopback(self) -> bool:
        return self.server == self.client


@dataclass(frozen=True)
class Criteria:
    """When a pair fails (site_config/sweep.yaml; ClusterKit's rules by default)."""

    #: ClusterKit: a pair is bad below 93 % of the best bandwidth or above 2.1× the
    #: lowest latency of the sweep.
    bandwidth_fraction: float = 0.93
    latency_factor: float = 2.1
    line_rate_fraction: float = 0.8
    retests: int = 1
    #: Latency a pair may exceed the lowest by in any case (µs): where the lowest is a
    #: tenth of a µs (shared memory), a factor alone is noise. 0 on a fabric.
    latency_slack_us: float = 0.0
    #: `perfguard nightly --budget`'s default (node-hours a night); None: no default.
    nightly_budget: float | None = None
    #: A node's cost in a budget nightly before any was stored (node-hours); None: the
    #: conservative default (judge.coverage.DEFAULT_NODE_HOURS_PER_NODE).
    node_hours_per_node: float | None = None


@dataclass(frozen=True)
class Limit:
    """What a pair of one HCA and metric must reach, and why."""
    value: float
    better: str
    why: str

    def misses(self, value: float | None) -> bool:
        if value is None:
            return True
        return value < self.value if self.better == "higher" else value > self.value


def limits(measurements: Iterable[Measurement], line_rate: dict[str, float] | None = None,
           criteria: Criteria = Criteria()) -> dict[tuple, Limit]:
    """(hca, metric, loopback) → the limit from the best pair of that kind (loopback and
    node pairs are compared among themselves), raised to the line rate floor for
    bandwidth where the topology gives the HCA's rate (in the metric's unit)."""
    best: dict[tuple, Measurement] = {}
    for m in measurements:
        if m.value is None or m.metric not in BETTER:
            continue
        key = (m.hca, m.metric, m.loopback)
        held = best.get(key)
        higher = BETTER[m.metric] == "higher"
        if held is None or (m.value > held.value if higher else m.value < held.value):
            best[key] = m
    result = {}
    for (hca, metric, loop), m in best.items():
        where = f"{m.server}" if loop else f"{m.server}–{m.client}"
        kind = "loopback" if loop else "pair"
        if metric == "bandwidth":
            fraction = criteria.bandwidth_fraction
            limit = Limit(m.value * fraction, "higher",
                          f"{fraction:.0%} of the best {kind} ({where} {m.value:.4g} {m.unit})")
            rate = (line_rate or {}).get(hca.split()[0])
            floor = (rate or 0) * criteria.line_rate_fraction
            if floor > limit.value:
                limit = Limit(floor, "higher", f"{criteria.line_rate_fraction:.0%} of "
                                               f"{hca}'s line rate {rate:.4g} {m.unit}")
        else:
            factor, slack = criteria.latency_factor, criteria.latency_slack_us
            limit = Limit(max(m.value * factor, m.value + slack), "lower",
                          f"{factor:g}× the lowest {kind} ({where} {m.value:.4g} {m.unit})"
                          + (f" or {slack:g} us above it" if slack else ""))
        result[(hca, metric, loop)] = limit
    return result


def failing(measurements: Iterable[Measurement],
            limit_of: dict[tuple, Limit]) -> list[Measurement]:
    """Measurements that miss their limit (a failed measurement always does)."""
    out = []
    for m in measurements:
        if m.metric not in BETTER:
            continue
        limit = limit_of.get((m.hca, m.metric, m.loopback))
        if m.value is None or (limit is not None and limit.misses(m.value)):
            out.append(m)
    return out


@dataclass(frozen=True)
class Finding:
    kind: str  # node, hca, link or leaf
    subject: str
    hca: str
    evidence: str

    @property
    def node(self) -> str | None:
        """The node to take out of service: a bad node, or the node of a bad HCA (a link
        is a cable or switch port, a leaf a switch: no node is to blame)."""
        return None if self.kind in ("link", "leaf") else self.subject.split()[0]


@dataclass
class Sweep:
    """Everything measured (latest value per pair, HCA and metric), the limits from the
    first full sweep, each pair's own limit from its history, and how often each
    failing pair was measured."""
    measurements: list[Measurement]
    limit_of: dict[tuple, Limit]
    attempts: dict[tuple, int] = field(default_factory=dict)
    #: (hca, pair, metric) → the pair's band from earlier sweeps (history_limits)
    pair_limits: dict[tuple, Limit] = field(default_factory=dict)
    #: What the limits were computed by (limits()), to compute them again.
    criteria: Criteria = Criteria()
    line_rate: dict[str, float] | None = None
    #: The pair limits that the conditions of the sweep (or retest) that measured each
    #: pair's latest value leave standing (in_conditions); None: ``measurements``'.
    standing: dict[tuple, Limit] | None = None
    #: Per kind (HCA, metric, loopback): how many pair limits were set aside, and the
    #: median share of their limits the kind's pairs reached, at the sweep or a retest.
    set_aside: dict[tuple, tuple[int, float, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.standing is None:
            self.standing, aside = in_conditions(self.measurements, self.pair_limits)
            self.set_aside = {kind: (*note, "") for kind, note in aside.items()}

    def limit(self, m: Measurement) -> Limit | None:
        """The limit ``m`` misses (the sweep's, else its own history's), or the sweep's."""
        candidates = [self.limit_of.get((m.hca, m.metric, m.loopback)),
                      self.standing.get(_key(m))]
        missed = [c for c in candidates if c is not None and c.misses(m.value)]
        return missed[0] if missed else candidates[0]

    def failing(self) -> list[Measurement]:
        return [m for m in self.measurements if m.metric in BETTER
                and (m.value is None or ((lim := self.limit(m)) is not None
                                         and lim.misses(m.value)))]

    def references(self, suspects: list[Measurement]) -> list[Measurement]:
        """For each kind (HCA, metric, loopback or pair) a suspect belongs to, the best
        measurement of that kind: measured again beside the suspects, it tells a slow pair
        from a slow moment (a loaded host, a noisy neighbour on the fabric)."""
        kinds = {(m.hca, m.metric, m.loopback) for m in suspects}
        best: dict[tuple, Measurement] = {}
        for m in self.measurements:
            kind = (m.hca, m.metric, m.loopback)
            if kind in kinds and m.value is not None and m.metric in BETTER and (
                    kind not in best or (m.value > best[kind].value) ==
                    (BETTER[m.metric] == "higher")):
                best[kind] = m
        return list(best.values())

    def retested(self, again: list[Measurement]) -> Sweep:
        """The retest's values of the suspects (the pairs failing before) replace theirs.
        Its reference pairs, measured beside them under the same conditions, may lower a
        limit (never raise it: a suspect must miss the limit its own retest's reference
        sets) and tell the conditions (in_conditions); they keep their first value, as a
        pair that passed once is never blamed."""
        suspects = frozenset(_key(m) for m in self.failing())
        newer = {_key(m): m for m in again if _key(m) in suspects}
        attempts = {**self.attempts, **{k: self.attempts.get(k, 1) + 1 for k in newer}}
        standing, aside = in_conditions(again, self.pair_limits, suspects)
        return dataclasses.replace(
            self, measurements=[newer.get(_key(m), m) for m in self.measurements],
            limit_of=self._lenient(again, ", at the retest"), attempts=attempts,
            standing={**{k: v for k, v in self.standing.items() if k not in newer},
                      **{k: v for k, v in standing.items() if k in newer}},
            set_aside={**self.set_aside,
                       **{kind: (*note, " at the retest") for kind, note in aside.items()}})

    def without(self, blamed: set[tuple[str, str]]) -> Sweep:
        """The sweep judged by limits that no pair of a blamed (HCA, node) sets, where
        those are more lenient: the 64-node sweep's throttled node had the lowest pair
        latency (0.077 µs) and made a healthy link fail against 4× that."""
        healthy = [m for m in self.measurements
                   if not {(m.hca, m.server), (m.hca, m.client)} & blamed]
        return dataclasses.replace(
            self, limit_of=self._lenient(healthy, ", no blamed node's pair counted"))

    def _lenient(self, measured: list[Measurement], why: str) -> dict[tuple, Limit]:
        """The limits, each replaced by the one ``measured`` sets where that is more
        lenient."""
        limit_of = dict(self.limit_of)
        for kind, now in limits(measured, self.line_rate, self.criteria).items():
            held = limit_of.get(kind)
            if held is None or held.misses(now.value):
                limit_of[kind] = Limit(now.value, now.better, f"{now.why}{why}")
        return limit_of


def _key(m: Measurement) -> tuple:
    return (m.hca, m.pair, m.metric)


def in_conditions(measured: list[Measurement], pair_limits: dict[tuple, Limit],
                  suspects: frozenset[tuple] = frozenset()) -> tuple[dict[tuple, Limit], dict]:
    """The pair limits of ``measured`` that its conditions leave standing, and per kind
    (HCA, metric, loopback) how many were set aside and the median share of its history's
    limit that the kind's pairs reached. A pair's own history judges it only while the
    other pairs of its kind, measured at the same time, meet theirs (by their median): a
    whole sweep off its history (a loaded host, a fabric-wide change) is the verdicts' to
    judge, not a node's or a link's to answer for. The embedded cluster under load
    measured every latency 5–8× its history and blamed two nodes of four. At a retest the
    conditions are read from its reference pairs alone, not from the ``suspects`` (keys)
    measured beside them: a slow leaf's pairs would otherwise excuse each other."""
    reached: dict[tuple, list[tuple[tuple, float]]] = defaultdict(list)
    for m in measured:
        limit = pair_limits.get(_key(m))
        if limit is not None and m.value and limit.value:
            share = m.value / limit.value if limit.better == "higher" else limit.value / m.value
            reached[(m.hca, m.metric, m.loopback)].append((_key(m), share))
    standing, aside = {}, {}
    for kind, shares in reached.items():
        references = [(key, share) for key, share in shares if key not in suspects]
        typical = dict(zip((key for key, _ in references),
                           _medians_of_others([share for _, share in references])))
        conditions = median(share for _, share in references) if references else None
        dropped = 0
        for key, _ in shares:
            judged_by = typical[key] if key in typical else conditions
            if judged_by is None or judged_by >= 1:
                standing[key] = pair_limits[key]
            else:
                dropped += 1
        if dropped:
            aside[kind] = (dropped, conditions)
    return standing, aside


def _medians_of_others(values: list[float]) -> list[float | None]:
    """For each value, the median of the others (None where there are none): in one sort,
    not one per value, for the 2,080 pairs of a 64-node sweep."""
    order = sorted(values)
    rest = len(values) - 1
    if rest < 1:
        return [None] * len(values)
    out = []
    for value in values:
        skip = bisect_left(order, value)

        def at(j: int, skip: int = skip) -> float:
            return order[j] if j < skip else order[j + 1]
        middle = rest // 2
        out.append(at(middle) if rest % 2 else (at(middle - 1) + at(middle)) / 2)
    return out


def _describe(m: Measurement, limit: Limit | None, node: str | None = None) -> str:
    other = m.client if node == m.server else m.server
    who = "loopback" if m.loopback else (f"with {other}" if node else f"{m.server}–{m.client}")
    if m.value is None:
        return f"{m.metric} {who}: measurement failed"
    return f"{m.metric} {who} {m.value:.4g} {m.unit}".rstrip() + \
        (f" (limit {limit.value:.4g}: {limit.why})" if limit else "")


def blame(sweep: Sweep, leaf_of: dict[str, str] | None = None) -> list[Finding]:
    """Nodes, HCAs and links to blame, from the pairs still failing after retests; where
    the switches are known (node → leaf), whole leaves too (see by_leaf)."""
    bad = sweep.failing()
    partners: dict[tuple[str, str], set[str]] = defaultdict(set)  # (hca, node) → partners
    hcas_of: dict[str, set[str]] = defaultdict(set)
    for m in sweep.measurements:
        hcas_of[m.server].add(m.hca)
        hcas_of[m.client].add(m.hca)
        if not m.loopback:
            partners[(m.hca, m.server)].add(m.client)
            partners[(m.hca, m.client)].add(m.server)
    failed_with: dict[tuple[str, str], dict[str, list[Measurement]]] = defaultdict(
        lambda: defaultdict(list))
    for m in bad:
        for node in {m.server, m.client}:
            other = m.client if node == m.server else m.server
            failed_with[(m.hca, node)][other].append(m)
    bad_on: dict[str, dict[str, list[Measurement]]] = defaultdict(dict)  # node → hca → ms
    for hca in sorted({h for h, _ in failed_with}):
        for node in _bad_nodes(hca, failed_with, partners):
            bad_on[node][hca] = [m for ms in failed_with[(hca, node)].values() for m in ms]
    findings = []
    for node, by_hca in sorted(bad_on.items()):
        evidence = {hca: _evidence(sweep, node, ms, partners[(hca, node)])
                    for hca, ms in sorted(by_hca.items())}
        if set(by_hca) == hcas_of[node]:  # every HCA it has: the node itself
            text = "; ".join(f"{hca}: {e}" for hca, e in evidence.items()) \
                if len(evidence) > 1 else next(iter(evidence.values()))
            findings.append(Finding("node", node, ",".join(evidence), text))
        else:
            findings += [Finding("hca", f"{node} {hca}", hca, e) for hca, e in evidence.items()]
    blamed = {(hca, node) for node, by_hca in bad_on.items() for hca in by_hca}
    links: dict[tuple, list[Measurement]] = defaultdict(list)
    healthy = sweep.without(blamed) if blamed else sweep
    still = healthy.failing()
    for m in still:
        if m.loopback or (m.hca, m.server) in blamed or (m.hca, m.client) in blamed:
            continue
        links[(m.hca, m.pair)].append(m)
    for (hca, (a, b)), ms in sorted(links.items()):
        text = "; ".join(_describe(m, healthy.limit(m)) for m in ms)
        tries = sweep.attempts.get(_key(ms[0]), 1)
        findings.append(Finding("link", f"{a}–{b}", hca,
                                f"{text}; both nodes pass with their other partners"
                                + _tries(tries)))
    # a leaf, like a link, is judged by the limits no blamed node's pair set
    return by_leaf(findings, healthy, leaf_of, still) if leaf_of else findings


def by_leaf(findings: list[Finding], sweep: Sweep, leaf_of: dict[str, str],
            bad: list[Measurement]) -> list[Finding]:
    """A leaf switch instead of its nodes or links, per HCA, given what still fails
    (``bad``: what fails by the limits no blamed node's pair set, as blame found it):

    - every pair within the leaf failing some metric (a leaf of three nodes or more): the
      leaf, its evidence saying whether its nodes fail in loopback too (then the nodes
      themselves: one change to a whole leaf's nodes) or only through the switch;
    - its links across the spine failing with at least two other leaves and more than
      half of those it was paired with, one leaf at a time like nodes (the leaves it
      failed with are not blamed for it): the leaf's uplinks.
    """
    within: dict[tuple[str, str], list[Measurement]] = defaultdict(list)  # (hca, leaf)
    across: dict[tuple[str, str], set[str]] = defaultdict(set)  # (hca, leaf) → leaves
    for m in sweep.measurements:
        a, b = leaf_of.get(m.server), leaf_of.get(m.client)
        if a and a == b and not m.loopback:
            within[(m.hca, a)].append(m)
        elif a and b and a != b:
            across[(m.hca, a)].add(b)
            across[(m.hca, b)].add(a)
    failing = set(bad)
    loopback_fails = {(m.hca, m.server) for m in failing if m.loopback}
    out = list(findings)
    for (hca, leaf), pairs in sorted(within.items()):
        names = {n for m in pairs for n in m.pair}
        if len(names) < 3 or {m.pair for m in pairs if m in failing} != {m.pair for m in pairs}:
            continue  # some pair within the leaf passes every metric
        inside = [f for f in out if hca in f.hca.split(",") and set(
            f.subject.split()[0].split("–")) <= names and f.kind != "leaf"]
        out = [f for f in out if f not in inside]
        where = "in loopback too: the nodes themselves (one change to the whole leaf's " \
            "nodes?)" if all((hca, n) in loopback_fails for n in names) else \
            "while they pass in loopback: the switch"
        worst = max((m for m in pairs if m in failing), key=lambda m: _shortfall(
            m, sweep.limit(m)))
        out.append(Finding("leaf", leaf, hca,
                           f"every pair behind it fails ({compact_nodes(names)}), {where}; "
                           f"worst {_describe(worst, sweep.limit(worst))}"
                           + _tries(sweep.attempts.get(_key(worst), 1))))
    return _uplinks(out, leaf_of, across)


def _shortfall(m: Measurement, limit: Limit | None) -> float:
    """How many times worse than its limit a measurement is (a failed one: the worst)."""
    if m.value is None or limit is None or not m.value or not limit.value:
        return float("inf")
    return limit.value / m.value if limit.better == "higher" else m.value / limit.value


def _uplinks(findings: list[Finding], leaf_of: dict[str, str],
             across: dict[tuple[str, str], set[str]]) -> list[Finding]:
    """Links across the spine grouped by leaf: the leaf whose uplinks fail (by_leaf)."""
    crossing: dict[tuple[str, str], dict[str, list[Finding]]] = defaultdict(
        lambda: defaultdict(list))  # (hca, leaf) → other leaf → link findings
    for f in findings:
        if f.kind != "link":
            continue
        a, b = (leaf_of.get(n) for n in f.subject.split("–"))
        if a and b and a != b:
            crossing[(f.hca, a)][b].append(f)
            crossing[(f.hca, b)][a].append(f)
    out = list(findings)
    for hca in sorted({h for h, _ in crossing}):
        leaves = [leaf for h, leaf in sorted(crossing) if h == hca]
        for leaf in worst_first(leaves, lambda leaf, h=hca: set(crossing[(h, leaf)]),
                                lambda leaf, h=hca: across[(h, leaf)], []):
            links = [f for fs in crossing[(hca, leaf)].values() for f in fs if f in out]
            out = [f for f in out if f not in links]
            out.append(Finding("leaf", leaf, hca,
                               f"its links across the spine fail with "
                               f"{len(crossing[(hca, leaf)])} of {len(across[(hca, leaf)])} "
                               f"leaves while its own pairs pass: "
                               + "; ".join(f"{f.subject}: {f.evidence}" for f in links[:3])
                               + (f"; {len(links) - 3} more" if len(links) > 3 else "")))
    return out


def _bad_nodes(hca: str, failed_with: dict, partners: dict) -> list[str]:
    """Nodes of one HCA to blame: those failing in loopback, then worst_first."""
    nodes = sorted({node for h, node in failed_with if h == hca}, key=natural_key)
    return worst_first(nodes, lambda n: set(failed_with[(hca, n)]),
                       lambda n: partners[(hca, n)],
                       [n for n in nodes if n in failed_with[(hca, n)]])


def worst_first(candidates: list[str], failed_with, paired_with,
                bad: list[str]) -> list[str]:
    """Beyond ``bad``, one at a time, the candidate failing with the most partners not
    already blamed, while that is at least two and more than half of the partners it
    has left (so the partners of a bad node, or leaf, are not blamed for it)."""
    bad = list(bad)
    while rest := [c for c in candidates if c not in bad]:
        count = {c: len(failed_with(c) - set(bad) - {c}) for c in rest}
        worst = max(rest, key=count.__getitem__)
        if count[worst] < 2 or count[worst] <= len(paired_with(worst) - set(bad)) / 2:
            break
        bad.append(worst)
    return bad


def _evidence(sweep: Sweep, node: str, ms: list[Measurement], partners: set[str]) -> str:
    failed = {m.client if m.server == node else m.server for m in ms if not m.loopback}
    parts = [_describe(m, sweep.limit(m), node)
             for m in sorted(ms, key=lambda m: (m.metric, not m.loopback, m.server, m.client))]
    tries = max(sweep.attempts.get(_key(m), 1) for m in ms)
    share = f"fails with {len(failed)} of {len(partners)} partners" if partners else \
        "no partner measured"
    return f"{share}: " + "; ".join(parts) + _tries(tries)


def _tries(attempts: int) -> str:
    return f" (measured {attempts}×, failed every time)" if attempts > 1 else \
        " (measured once)"


def cost(nodes: int, seconds_per_round: float) -> tuple[int, float]:
    """(rounds, seconds) of a full sweep: N−1 rounds (N odd: N), plus the loopback round."""
    rounds = nodes - 1 if nodes % 2 == 0 else nodes
    return rounds + 1, (rounds + 1) * seconds_per_round


def leaf_cost(leaf_sizes: list[int], seconds_per_round: float) -> tuple[int, float]:
    """(rounds, seconds) of a sweep that follows the switches: the loopback round, the
    largest leaf's circle rounds (all leaves at once), the leaves' rounds across the
    spine; counted from the schedule itself."""
    groups = [[f"{leaf}.{i}" for i in range(size)] for leaf, size in enumerate(leaf_sizes)]
    rounds = len(leaf_rounds(groups)) + 1
    return rounds, rounds * seconds_per_round


def host_load() -> str:
    """The load of the host running the sweep, recorded with each finding."""
    one, five, _ = os.getloadavg()
    return f"host load {one:.2f} (5 min {five:.2f}) on {os.uname().nodename} at the retest"


# --- criteria, the database ---------------------------------------------------------
def load_criteria(path: Path, system: str) -> Criteria:
    """The system's entry of site_config/sweep.yaml over its defaults; errors name the key."""
    from perfguard.yamlfile import load_yaml

    if not path.exists():
        return Criteria()
    data = load_yaml(path, "sweep criteria", schema="sweep")
    return Criteria(**{**(data.get("default") or {}),
                       **((data.get("systems") or {}).get(system) or {})})


#: The metric a failed measurement of each test would have given.
FAILED_TEST_METRIC = {"tag_bw": "bandwidth", "tag_lat": "latency"}


def variant_label(hca: str, memory: str | None) -> str:
    """An HCA as the sweep tells them apart: device memory is its own path (GPUDirect)."""
    return hca if memory in (None, "host") else f"{hca} ({memory})"


def measurements(conn: Connection, run_id: int) -> list[Measurement]:
    """A sweep run's measurements from the database; a failed one (metric ``failed``)
    becomes a None value of the metric its test measures."""
    rows = queries.tuples(conn, "sweep_pairs", (run_id,))
    out = []
    for hca, memory, server, client, metric, unit, value, test in rows:
        label = variant_label(hca, memory)
        if metric == "failed":
            metric = FAILED_TEST_METRIC.get(test, test)
            out.append(Measurement(label, server, client, metric, None))
        elif metric in BETTER:
            out.append(Measurement(label, server, client, metric, value, unit))
    return out


def why_unmeasured(conn: Connection, run_id: int) -> str:
    """Why a sweep run stored no pair: its sweep test cases' failures, as stored."""
    failures = queries.tuples(conn, "sweep_failures", (run_id,))
    if not failures:
        return f"its FabricSweepCheck test cases stored no pair (`perfguard verdict {run_id}` " \
               f"says why)"
    return "; ".join(f"FabricSweepCheck failed in {phase}: {reason}"
                     for phase, reason in failures)


def store_findings(conn: Connection, run_id: int, findings: list[Finding],
                   drained: set[str]) -> None:
    """A sweep's findings, replacing any earlier ones of the run."""
    with conn.transaction():
        queries.execute(conn, "delete_sweep_findings", (run_id,))
        queries.execute_many(conn, "insert_sweep_finding",
                             [(run_id, f.hca, f.kind, f.subject, f.evidence, f.node in drained)
                              for f in findings])


#: A drain reason perfguard sets begins with this; `sweep --resume` touches no other.
DRAIN_MARK = "perfguard:"


def history_limits(conn: Connection, run_id: int,
                   rules: judge.Rules = judge.DEFAULT_RULES,
                   criteria: Criteria = Criteria()) -> dict[tuple, Limit]:
    """Each pair's own band from earlier sweeps (the verdicts' judge and rule: median ±
    max(level σ, min change)), for pairs with history enough: a pair that drifted is caught
    even while it is still within the best-pair rule. A latency's band reaches at least
    the criteria's ``latency_slack_us`` above its median, as the best-pair rule's does:
    where the site says a latency that much above another is noise, it is noise above
    its own history too. The embedded cluster's node4 loopback, 0.100 µs on all 8 earlier
    sweeps (noise σ 0.0001), read 0.111 on a busy host, beside the other nodes' 0.102–0.11,
    and was blamed (limit 0.101) three times of three (2026-11-30)."""
    series: dict[tuple, list[float]] = defaultdict(list)
    for hca, memory, server, client, metric, value in queries.tuples(
            conn, "sweep_pair_history", (run_id, list(BETTER))):
        m = Measurement(variant_label(hca, memory), server, client, metric, value)
        series[_key(m)].append(value)
    out = {}
    for key, values in series.items():
        metric = key[2]
        rule = rules.for_metric("FabricSweepCheck", metric)
        verdict = judge.judge(values, values[-1:], BETTER[metric], rule)
        if verdict.shift_band is None:
            continue
        low, high = verdict.shift_band  # one sweep, no later one to confirm it
        slack = criteria.latency_slack_us if metric == "latency" else 0.0
        higher = BETTER[metric] == "higher"
        out[key] = Limit(low if higher else max(high, verdict.centre + slack), BETTER[metric],
                         f"{'below' if higher else 'above'} this pair's history: median "
                         f"{verdict.centre:.4g} of {len(values[-rule.window:])} sweeps, noise "
                         f"σ {verdict.noise:.3g}" + (f", or {slack:g} us above it" if slack
                                                     else ""))
    return out
