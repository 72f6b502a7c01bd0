"""Does a site's nightly page for noise, and does it page, naming the cause, for a fault?

    .venv/bin/python benchmarks/run_quality.py [--trials 20] [--seed 1] [--smoke]
        [--sites 300,4000] [--independent] [--node-sd 0.02] [--leaf-sd 0.01] …

Per-line figures (benchmarks/verdict_quality.py) do not say what a site sees: a nightly is
hundreds or thousands of lines. Here synthetic site nightlies are judged as perfguard
judges a run: every line by the line rule (perfguard.judge.rules with
site_config/verdict_rules.yaml), then the run's findings and the family-wise paging
(perfguard.judge.findings), each line's history handed over as the verdict hands it
(its worse-signed moves against its baseline, night by night).

The site: nodes, each with HCAs and GPUs, in leaf switches of 16 (8 for the small site);
per node and HCA osu_latency at 8 B and 1 KiB, osu_bw at 64 KiB and 4 MiB and
ib_write_bw at 4 MiB to the next node; per GPU osu_bw D-D at 4 MiB to the next node's;
Himeno on each node. 300 lines (23 nodes, 2 HCAs, 2 GPUs) and 4,000 (160 nodes, 4 HCAs, 4
GPUs), 365 nights. Noise per line: CVs from 0.5 to 5 % (an IB fabric) for most fabric
lines and the spread of this project's real recordings (9.5-45 %,
benchmarks/data/repetitions.json) for one in seven; 0.5-2 % for node-local figures
(Himeno, GPU copies); a spike of 3-6 σ on 1 % of line-nights and common-mode nights (5 %
of nights: bandwidth 5-15 % lower and latency higher on every inter-node line).

Noise that moves together (issue 49; each an option, its default and where it comes from
in ``Noise``): a night factor per node (sd 2 %) shared by every line through the node, per
leaf (1 %) shared by every inter-node line through it, one common to every inter-node
line (1 %); Student-t tails (4 degrees of freedom) on every line and factor; a slow drift
(a random walk of 0.05 of a line's noise a night); missing nights (2 % of line-nights);
the partner Slurm picks for a pairwise line changing on 10 % of nights (the line's nodes
that night are its own and the partner's; the judge knows tonight's and the night
before's, as the verdict reads them from the run before).
``--independent`` turns the shared factors, missing nights and partner changes off: the
model before issue 49.

Faults, each injected from a random night on in its own trial: one node's HCA at half
bandwidth; the same on 2 of 3 nights (intermittent, as a real one was: -64 %, -60 %, then
a normal night); an HCA's PCIe link trained to x8 (bandwidth above 64 KiB halved); a
driver update adding 0.3 µs to every small-message latency (its fingerprint change
recorded that night on every node); GDR off on one node (D-D bandwidth -60 %); one leaf
switch congested (inter-node bandwidth -30 %, latency +30 % for its nodes); one node 30 %
slower in Himeno; a 3x latency on a line of CV 40 %. A fault on a node hits the lines that
run through it that night.

Reported: false pages a month (nights with no fault that page, × 30), and per fault the
share of trials paged within 1, 2 and 3 nights, the share whose paging finding names
the cause, and the share in which a line the fault moved on its first two nights ran
on both (2 % of line-nights are missing: a one-line fault cannot be a level within 2
nights without both), and each trial not paged within 2 nights by its cause
(``miss_cause``: not on both nights, within noise, nights that differ, a far night in its
history, not confirmed, under the bar). Goals (issue 49), at 300 and 4,000 lines: at
most 1 false page a month; every fault paged within 2 nights in >= 95 % of trials, its
cause named; the intermittent one within 3 nights in >= 90 %, the noisy line's 3x within
3 in >= 80 %.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import functools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfguard.judge import findings as fd  # noqa: E402
from perfguard.judge import rules as judge  # noqa: E402
from perfguard.paths import site_file  # noqa: E402

#: The shipped rules, read with PyYAML alone (the suite checks the file against its
#: schema): the benchmark runs where only numpy, scipy and PyYAML are (``--jobs``).
RULES_DATA = yaml.safe_load(site_file("verdict_rules.yaml").read_text())
RULES = judge.load_rules(site_file("verdict_rules.yaml"), RULES_DATA)
#: The findings' policy as the verdict reads it (the rules file's ``findings:``).
POLICY = fd.policy_of(RULES_DATA)
REAL_CVS = [statistics.stdev(v["values"] if isinstance(v, dict) else v)
            / statistics.fmean(v["values"] if isinstance(v, dict) else v)
            for v in json.loads((ROOT / "benchmarks" / "data" / "repetitions.json")
                                .read_text())["series"].values()]
NIGHTS, WARMUP = 365, 40


#: Each line's own spikes: on this share of its nights, this many of its noise worse.
SPIKE_SHARE, SPIKE_SIGMAS = 0.01, (3, 6)
#: Common-mode nights: on this share of nights every inter-node line is worse by a shift
#: drawn from COMMON_SHIFT, times each line's own share of it from COMMON_JITTER.
COMMON_SHARE, COMMON_SHIFT, COMMON_JITTER = 0.05, (0.05, 0.15), (0.7, 1.3)
#: No value is drawn below this share of its line's level (a latency or bandwidth > 0).
FLOOR = 0.05
#: A two-state line's second state (``Noise.two_state``): this much worse.
TWO_STATE_SHIFT = 0.08
#: The noisy line (a small-message latency) and its fault: CV 40 %, a 3x level.
NOISY_CV, NOISY_FACTOR = 0.40, 3.0


@dataclass(frozen=True)
class Noise:
    """The site's noise (each a command-line option; ``--independent`` sets the shared
    ones, missing nights and pair changes to 0: the model before issue 49)."""
    #: Night factor of a node, shared by every line through it (sd, relative): issue 49's
    #: goal is set at 2 % (a busy neighbour, a warm rack, OS jitter); the 1 % measured
    #: there with t(4) tails already gave 1.2 false pages a month at 300 lines.
    node_sd: float = 0.02
    #: Night factor of a leaf switch, shared by every inter-node line through it: 1 %
    #: (issue 49's goal).
    leaf_sd: float = 0.01
    #: Night factor common to every inter-node line: 1 %, assumed as large as a leaf's
    #: (nothing measured it); the common-mode nights below come on top.
    fabric_sd: float = 0.01
    #: Degrees of freedom of the Student-t every line's noise and every night factor is
    #: drawn from: 4 (heavy tails; issue 49 measured false pages with t(4)).
    tail_df: float = 4.0
    #: Slow drift: each night a line's level takes a step of this many of its noise (a
    #: random walk; the model before issue 49).
    drift: float = 0.05
    #: Share of line-nights that are missing (a test case skipped, failed, not
    #: scheduled): 2 %, assumed.
    missing: float = 0.02
    #: Share of nights on which Slurm puts a pairwise line on another partner than its
    #: usual one: 10 %, assumed (a node drained, the allocation's order).
    pair_change: float = 0.10
    #: Share of lines with a second state of their own: 8 % worse on one night in five
    #: (issue 67: shared memory's bandwidth halving for minutes, a polling put's
    #: shoulders); 0 by default.
    two_state: float = 0.0

    def independent(self) -> Noise:
        return dataclasses.replace(self, node_sd=0.0, leaf_sd=0.0, fabric_sd=0.0,
                                   missing=0.0, pair_change=0.0)


@dataclass(frozen=True)
class Spec:
    name: str
    group: str
    #: Index of the line's own node; its usual partner (-1: node-local, Himeno).
    home: int
    partner: int
    #: The device it measures on each node: "mlx5_0", "gpu" or "" (Himeno).
    device: str
    better: str
    value: float
    cv: float
    kind: str  # lat_small, bw_mid, bw_large, gdr, himeno


@dataclass
class Site:
    specs: list[Spec]
    names: list[str]
    leaves: dict[str, set[str]]
    #: Leaf of each node (index into sorted leaves).
    leaf_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    #: The line a 3x fault hits: a small-message latency of CV 40 %.
    noisy_line: int = 0
    base: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: Each pairwise line's partner on each night (lines × nights; -1: node-local).
    partners: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=int))
    _rules: list = field(default_factory=list)

    def rules(self) -> list[judge.Rule]:
        """Each line's rule (the shipped rules for its metric), looked up once."""
        if len(self._rules) != len(self.specs):
            self._rules = [RULES.for_metric("", "latency" if s.better == "lower"
                                            else "bandwidth") for s in self.specs]
        return self._rules

    @property
    def lines(self) -> int:
        return len(self.specs)

    def homes(self) -> np.ndarray:
        return np.array([s.home for s in self.specs])

    def through(self, node: int) -> np.ndarray:
        """Lines × nights: whether the line ran through ``node`` that night."""
        return (self.homes() == node)[:, None] | (self.partners == node)

    def nodes_on(self, line: int, night: int) -> tuple[str, ...]:
        spec, partner = self.specs[line], self.partners[line, night]
        return (self.names[spec.home],) if partner < 0 else (
            self.names[spec.home], self.names[partner])

    def devices_on(self, line: int, night: int) -> tuple[str, ...]:
        device = self.specs[line].device
        return tuple(f"{node}:{device}" for node in self.nodes_on(line, night)) if device \
            else ()


#: What each node's HCA measures to its partner (benchmark, size, kind, value, better).
FABRIC_CHECKS = (("osu_latency", "8", "lat_small", 1.8, "lower"),
                 ("osu_latency", "1K", "lat_small", 2.6, "lower"),
                 ("osu_bw", "64K", "bw_mid", 21000.0, "higher"),
                 ("osu_bw", "4M", "bw_large", 24000.0, "higher"),
                 ("ib_write_bw", "4M", "bw_large", 24500.0, "higher"))
#: A small site's nightly: OsuPt2PtCheck's inter-node pair (latency, bandwidth both ways).
PAIR_CHECKS = (("osu_latency", "8", "lat_small", 1.8, "lower"),
               ("osu_bw", "4M", "bw_large", 24000.0, "higher"),
               ("osu_bibw", "4M", "bw_large", 47000.0, "higher"))


def build_site(nodes: int, hcas: int, gpus: int, leaf_size: int, rng: random.Random,
               checks: tuple = FABRIC_CHECKS, himeno: bool = True, pairs_only: bool = False
               ) -> Site:
    """The site's lines: per node and HCA each of ``checks`` to the next node, per GPU a
    D-D bandwidth, Himeno per node (``himeno``); ``pairs_only``: each pair of nodes
    measured once (node1-node2, node3-node4, …: a 2-node site is one pair's lines)."""
    names = [f"node{i + 1}" for i in range(nodes)]
    specs: list[Spec] = []

    def cv(kind: str) -> float:
        """Node-local figures (Himeno, GPU copies) are steady; the fabric's lines take
        the spread of the real recordings (latency and bandwidth, 9.5-45 %) one in
        seven."""
        if kind not in ("himeno", "gdr") and rng.random() < 1 / 7:
            return rng.choice([c for c in REAL_CVS if c < 0.2] if kind.startswith("bw")
                              else REAL_CVS)
        if kind in ("himeno", "gdr"):
            return 0.005 * 4 ** rng.uniform(0, 1)  # 0.5-2 %
        return 0.005 * 10 ** rng.uniform(0, 1)  # 0.5-5 %

    for i, node in enumerate(names):
        peer = (i + 1) % nodes
        for h in range(hcas if not pairs_only or i % 2 == 0 else 0):
            hca = f"mlx5_{h}"
            for bench, size, kind, value, better in checks:
                specs.append(Spec(f"{bench} {node}-{names[peer]} {hca} @{size}",
                                  f"{bench} @{size}", i, peer, hca, better, value,
                                  cv(kind), kind))
        for g in range(gpus):
            specs.append(Spec(f"osu_bw D-D {node}-{names[peer]} gpu{g} @4M",
                              "osu_bw D-D @4M", i, peer, "gpu", "higher", 22000.0,
                              cv("gdr"), "gdr"))
        if himeno:
            specs.append(Spec(f"himeno {node}", "himeno", i, -1, "", "higher", 15000.0,
                              cv("himeno"), "himeno"))
    leaves = {f"leaf{k + 1}": set(names[k * leaf_size:(k + 1) * leaf_size])
              for k in range(-(-nodes // leaf_size))}
    leaf_of = np.array([i // leaf_size for i in range(nodes)])
    return Site(specs, names, leaves, leaf_of)


def pick_partners(site: Site, nights: int, noise: Noise, rng: np.random.Generator
                  ) -> np.ndarray:
    """Each line's partner each night: its usual one, or on ``pair_change`` of nights
    another node (never itself) that Slurm gave it."""
    usual = np.array([s.partner for s in site.specs])
    partners = np.repeat(usual[:, None], nights, axis=1)
    nodes = len(site.names)
    changed = (rng.random(partners.shape) < noise.pair_change) & (usual[:, None] >= 0)
    other = (site.homes()[:, None] + rng.integers(1, nodes, partners.shape)) % nodes
    return np.where(changed, other, partners)


def _t(rng: np.random.Generator, df: float, shape) -> np.ndarray:
    """Student-t draws scaled to unit variance."""
    return rng.standard_t(df, size=shape) / np.sqrt(df / (df - 2))


def simulate_noise(site: Site, nights: int, noise: Noise, rng: np.random.Generator
                   ) -> np.ndarray:
    """Multiplicative noise, lines × nights (NaN: the line did not run that night): each
    line's own (t tails, spikes, drift), common-mode nights, and the night factors its
    nodes, their leaves and the fabric share with every other line through them."""
    n = site.lines
    cvs = np.array([s.cv for s in site.specs])
    worse_sign = np.array([1.0 if s.better == "lower" else -1.0 for s in site.specs])
    t = _t(rng, noise.tail_df, (n, nights))
    spikes = (rng.random((n, nights)) < SPIKE_SHARE) * rng.uniform(*SPIKE_SIGMAS, (n, nights))
    # a level wanders in proportion (multiplies), never to or below zero: added to the
    # relative noise, the CV-40 % line's walk reached the 5 % floor below, where an
    # ordinary night read +957 % (4 of seed 1's 12 false pages at 4,000 lines)
    drift = np.cumsum(rng.normal(0, noise.drift, (n, nights)), axis=1) * cvs[:, None]
    moved = cvs[:, None] * (t + worse_sign[:, None] * spikes)
    common = rng.random(nights) < COMMON_SHARE
    inter = np.array([s.kind != "himeno" for s in site.specs])
    shift = rng.uniform(*COMMON_SHIFT, nights) * common
    jitter = rng.uniform(*COMMON_JITTER, (n, nights))
    moved += (worse_sign * inter)[:, None] * shift[None, :] * jitter
    node_f = noise.node_sd * _t(rng, noise.tail_df, (len(site.names), nights))
    leaf_f = noise.leaf_sd * _t(rng, noise.tail_df, (len(site.leaves), nights))
    fabric_f = noise.fabric_sd * _t(rng, noise.tail_df, nights)
    columns = np.arange(nights)[None, :]
    homes = site.homes()[:, None]
    partners = np.maximum(site.partners, 0)
    shared = node_f[homes, columns] + np.where(site.partners >= 0,
                                               node_f[partners, columns], 0.0)
    home_leaf, partner_leaf = site.leaf_of[homes], site.leaf_of[partners]
    leaves = leaf_f[home_leaf, columns] + np.where(partner_leaf != home_leaf,
                                                   leaf_f[partner_leaf, columns], 0.0)
    shared += np.where(inter[:, None], leaves + fabric_f[None, :], 0.0)
    moved += worse_sign[:, None] * shared
    if noise.two_state:  # drawn only then: the other models' draws stay as they were
        second = (rng.random(n) < noise.two_state)[:, None] & (rng.random((n, nights)) < 0.2)
        moved += np.where(second, worse_sign[:, None] * TWO_STATE_SHIFT, 0.0)
    values = np.maximum(1.0 + moved, FLOOR) * np.exp(drift)
    values[rng.random((n, nights)) < noise.missing] = np.nan
    return values


# --- faults: (affected lines' multiplier, lines × nights from the fault night on; cause
# check; fingerprint changes of the fault's first night) ---------------------------------
Fault = Callable[[Site, random.Random, int], tuple[np.ndarray, Callable[[fd.Finding], bool],
                                              dict[str, set[str]]]]


def _kinds(site: Site, test: Callable[[Spec], bool]) -> np.ndarray:
    return np.array([test(s) for s in site.specs])[:, None]


def hca_half(site: Site, rng: random.Random, start: int):
    node, hca = _some_node(site, rng), "mlx5_0"
    hit = site.through(node) & _kinds(site, lambda s: s.device == hca
                                      and s.kind.startswith("bw"))
    name = site.names[node]
    return np.where(hit, 0.5, 1.0), names_one_of(f"{name}:{hca}", name), {}


def hca_intermittent(site: Site, rng: random.Random, start: int):
    """The HCA at half bandwidth on 2 of 3 nights (measured live: -64 %, -60 %, then a
    normal night): its first night, then on, off or off, on, and so on."""
    multiplier, names_cause, environment = hca_half(site, rng, start)
    shows = np.array(shows_on(rng.choice(INTERMITTENT), start, multiplier.shape[1]))
    return np.where(shows[None, :], multiplier, 1.0), names_cause, environment


#: The nights an intermittent fault shows, from its first on (2 of 3; the real one: on, on,
#: off): benchmarks/real_nights.py injects the same into recorded nights.
INTERMITTENT = [(1, 1, 0), (1, 0, 1)]


def shows_on(pattern: tuple[int, ...], start: int, nights: int) -> list[bool]:
    """Whether a fault of ``pattern`` (repeated from night ``start``) shows on each
    night; before ``start`` it does not."""
    return [k >= start and bool(pattern[(k - start) % len(pattern)]) for k in range(nights)]


def pcie_x8(site: Site, rng: random.Random, start: int):
    node, hca = _some_node(site, rng), "mlx5_0"
    hit = site.through(node) & _kinds(site, lambda s: s.device == hca
                                      and s.kind == "bw_large")
    name = site.names[node]
    return np.where(hit, 0.5, 1.0), names_one_of(f"{name}:{hca}", name), {}


def driver_latency(site: Site, rng: random.Random, start: int):
    m = np.array([(s.value + 0.3) / s.value if s.kind == "lat_small" else 1.0
                  for s in site.specs])
    change = "driver 5.14 → 5.15"
    slowed = {s.name for s, factor in zip(site.specs, m) if factor != 1.0}

    def names_change(f: fd.Finding) -> bool:
        """The change's own finding, or a finding confirmed by it the nights after whose
        lines are mostly the change's (a noise page holding one of them names nothing)."""
        return f.kind == fd.ENVIRONMENT or (change in f.since_change and 2 * sum(
            line.name in slowed for line in f.lines) > len(f.lines))

    return (np.repeat(m[:, None], site.partners.shape[1], axis=1), names_change,
            {change: set(site.names)})


def gdr_off(site: Site, rng: random.Random, start: int):
    node = _some_node(site, rng)
    hit = site.through(node) & _kinds(site, lambda s: s.device == "gpu")
    name = site.names[node]
    return np.where(hit, 0.4, 1.0), names_one_of(f"{name}:gpu", name), {}


def leaf_congested(site: Site, rng: random.Random, start: int):
    leaf = rng.choice(sorted(site.leaves))
    members = [site.names.index(node) for node in site.leaves[leaf]]
    touches = np.zeros(site.partners.shape, dtype=bool)
    for node in members:
        touches |= site.through(node)
    inter = _kinds(site, lambda s: s.kind != "himeno")
    worse = np.array([1.3 if s.better == "lower" else 0.7 for s in site.specs])[:, None]
    return np.where(touches & inter, worse, 1.0), lambda f: f.subject == leaf, {}


def himeno_slow_node(site: Site, rng: random.Random, start: int):
    node = _some_node(site, rng)
    name = f"himeno {site.names[node]}"
    hit = _kinds(site, lambda s: s.name == name)
    return (np.where(hit, 0.7, 1.0) * np.ones(site.partners.shape),
            lambda f: f.subject in (name, site.names[node]), {})


def noisy_line_3x(site: Site, rng: random.Random, start: int):
    index = site.noisy_line
    hit = np.arange(site.lines)[:, None] == index
    return (np.where(hit, NOISY_FACTOR, 1.0) * np.ones(site.partners.shape),
            lambda f: f.subject == site.specs[index].name, {})


def node_pair_half(site: Site, rng: random.Random, start: int):
    """Both nodes of a pair at half speed (a CPU quota on their slurmd, measured live:
    osu_bw and osu_bibw -52 to -59 %): every line through either, bandwidth halved,
    latency doubled, Himeno halved."""
    node = _some_node(site, rng)
    pair = {node, (node + 1) % len(site.names)}
    hit = np.zeros(site.partners.shape, dtype=bool)
    for one in pair:
        hit |= site.through(one)
    worse = np.array([2.0 if s.better == "lower" else 0.5 for s in site.specs])[:, None]
    named = {site.names[one] for one in pair}
    return np.where(hit, worse, 1.0), lambda f: bool(named & f.names()), {}


def names_one_of(device: str, node: str) -> Callable[[fd.Finding], bool]:
    """Whether a finding names ``device`` (``Finding.names``: its subject, a part of a
    subject of twins, ``node1:mlx5_0, node2:mlx5_0``, or a device a line alone ran
    through) or, as its subject, ``node``. Not the node of a line alone: a line through
    the node but not the device (another HCA's, the node's Himeno) paging for noise is
    another cause's page."""
    return lambda f: device in f.names() or node in fd.subject_names(f.subject)


def _some_node(site: Site, rng: random.Random) -> int:
    return rng.randrange(len(site.names))


#: A site's history before a fault: None (its 40+ nights), or (nights it has, an earlier
#: change of level on the first ``LEVEL_CHANGE_NIGHTS`` of them: the factor every line was
#: better by then, 1: none): a site's first weeks, and one whose host load moved every
#: line (live: osu_bw ~500 MB/s on nights 1-3, ~150 after).
History = tuple[int, float] | None
LEVEL_CHANGE_NIGHTS = 3


def with_history(site: Site, noise: np.ndarray, start: int, history: History
                 ) -> np.ndarray:
    """The site's noise as a site with ``history`` before night ``start`` has it: the
    nights before its history NaN (not measured yet), its first nights moved by the
    earlier level change (better by the factor: bandwidth times it, latency divided)."""
    if history is None:
        return noise
    nights, factor = history
    first = max(start - nights, 0)
    shaped = noise.copy()
    shaped[:, :first] = np.nan
    power = np.array([1.0 if s.better == "higher" else -1.0 for s in site.specs])
    shaped[:, first:first + LEVEL_CHANGE_NIGHTS] *= (factor ** power)[:, None]
    return shaped


#: The histories the node pair's fault is tried with (name suffix → History).
HISTORIES: dict[str, History] = {
    "": None, ", 10-night history": (10, 1.0),
    ", 10 nights, first 3 at 3x better": (10, 3.0),
    ", 10 nights, first 3 at 3x worse": (10, 1 / 3)}


FAULTS: dict[str, tuple[Fault, int]] = {  # name → (fault, nights it must be paged within)
    **{f"node pair at half speed{suffix}": (node_pair_half, 2) for suffix in HISTORIES},
    "HCA at half bandwidth": (hca_half, 2), "PCIe link at x8": (pcie_x8, 2),
    "driver +0.3 µs small latency": (driver_latency, 2), "GDR off on a node": (gdr_off, 2),
    "leaf switch congested": (leaf_congested, 2),
    "Himeno node 30 % slower": (himeno_slow_node, 2),
    "HCA half, 2 of 3 nights": (hca_intermittent, 3),
    "3x latency, CV 40 % line": (noisy_line_3x, 3)}
#: The share of trials each fault must be paged in within its nights (issue 49).
GOALS = {"HCA half, 2 of 3 nights": 0.90, "3x latency, CV 40 % line": 0.80}


# --- judging a night as perfguard does -------------------------------------------------
def night_findings(site: Site, values: np.ndarray, night: int,
                   environment: dict[str, set[str]],
                   before: dict[str, set[str]] | None = None) -> list[fd.Finding]:
    """The run's findings of ``night`` (night_evidence), with ``environment``'s changes
    that night and ``before``'s in the runs before it, and the night before's findings at
    the bar."""
    return judged_night(site, night_evidence(site, values, night), environment, before,
                        bar_of(site, values, night - 1))


def judged_night(site: Site, evidence: list[fd.Evidence], environment: dict[str, set[str]],
                 before: dict[str, set[str]] | None = None,
                 bar_before: dict[str, str] | None = None) -> list[fd.Finding]:
    """The findings of a night's lines' ``evidence`` (``night_findings``), with the
    findings at the bar the night before (``at_the_bar``)."""
    return fd.findings(evidence, POLICY, groups=site.leaves, environment=environment,
                       before=before, bar_before=bar_before)


def at_the_bar(found: list[fd.Finding], evidence: list[fd.Evidence]) -> dict[str, str]:
    """A night's findings at its bar, as the next night reads them (what
    ``run_findings.bar_before`` reads from the database)."""
    critical = POLICY.critical_z(len(evidence))
    return fd.at_the_bar(((f.subject, f.evidence, critical, f.acknowledged) for f in found),
                         "the night before")


def bar_of(site: Site, values: np.ndarray, night: int) -> dict[str, str]:
    """``night``'s findings at its bar (``at_the_bar``), judged alone: a finding's evidence
    does not depend on the night before (what does, a line finding split out of a finding
    the night before confirmed, is of a line confirmed already)."""
    evidence = night_evidence(site, values, night)
    return at_the_bar(judged_night(site, evidence, {}), evidence)


def night_evidence(site: Site, values: np.ndarray, night: int) -> list[fd.Evidence]:
    """Every line that ran on ``night`` judged (its recent nights its last ``confirm``
    values, its history the values before them), as the findings read it. Each line's
    nodes are tonight's, and the night before's where it ran there (``nodes_before``)."""
    rules = site.rules()
    ran = np.flatnonzero(~np.isnan(values[:, night])).tolist()
    series, nights_of = [], []
    for i in ran:
        present = np.flatnonzero(~np.isnan(values[i, :night + 1]))
        present = present[-(rules[i].window + rules[i].confirm):]
        series.append(values[i, present].tolist())
        nights_of.append(present)
    splits = [judge.split(v, rules[i]) for v, i in zip(series, ran)]
    baselined = [judge.judged_history(v, rules[i]) for v, i in zip(series, ran)]
    bases = judge.baselines(baselined)
    judged = []
    for (history, recent), i, base, at, kept in zip(splits, ran, bases, nights_of, baselined):
        spec = site.specs[i]
        j = judge.judge(history, recent, spec.better, rules[i], base)
        side, distances = judge.evidence(recent, j, spec.better)
        moves = ()
        if j.centre:
            sign = 1.0 if spec.better == "lower" else -1.0
            moves = tuple((sign * (np.array(kept + recent) - j.centre) / abs(j.centre)).tolist())
        judged.append((i, j, side, distances, moves,
                       tuple(at[-len(moves):].tolist()) if moves else (), len(recent),
                       judge.history_distances(kept, j, spec.better)))
    shares, zs = fd.read_lines([distances for _, _, _, distances, *_ in judged],
                               [far for *_, far in judged], POLICY)
    return [fd.Evidence(site.specs[i].name, "compute", site.specs[i].group,
                            site.nodes_on(i, night), site.devices_on(i, night), side,
                            j.state in (judge.REGRESSION, judge.IMPROVEMENT), z,
                            len(distances), j.change, moves, at, recent if moves else 0,
                            float(share), nodes_before(site, values, i, night))
                for (i, j, side, distances, moves, at, recent, _), z, share
                in zip(judged, zs, shares)]


def nodes_before(site: Site, values: np.ndarray, line: int, night: int
                 ) -> tuple[str, ...] | None:
    """The line's nodes on the night before (None: it did not run), as the verdict reads
    them from the run judged before (``run_findings.nodes_the_run_before``)."""
    ran = night > 0 and not np.isnan(values[line, night - 1])
    return site.nodes_on(line, night - 1) if ran else None


#: An update that changed nothing (every node's fingerprint) every this many nights.
UPDATE_EVERY = 5


@dataclasses.dataclass
class FalsePages:
    """What a site's nights of noise alone paged; parts of the nights add up."""
    paged: int = 0
    judged: int = 0
    shown: int = 0
    update_pages: int = 0
    updates: int = 0
    seconds: float = 0.0

    def __add__(self, other: FalsePages) -> FalsePages:
        return FalsePages(*(a + b for a, b in zip(dataclasses.astuple(self),
                                                  dataclasses.astuple(other))))

    def row(self, label: str, lines: int) -> str:
        return (f"| {label} | {lines} | {self.judged} | {30 * self.paged / self.judged:.2f} "
                f"| {self.shown / self.judged:.1f} | {self.update_pages} of {self.updates} "
                f"| {self.seconds:.0f} s |")


def false_pages(site: Site, values: np.ndarray, nights: range) -> FalsePages:
    """What ``nights`` paged, with every ``UPDATE_EVERY``-th night judged once more as
    the night of an update on every node that changed nothing: it pages for the update
    when it pages what the night did not page without it (real_nights.py's updates, on
    the synthetic site). Each night reads the night before's findings at the bar (the
    first of ``nights`` judges its night before for them), so any split of them adds up
    to the same figures (``--jobs`` splits them)."""
    started = time.monotonic()
    counted = FalsePages()
    everywhere = {"ucx 1.16 → 1.17 (changed nothing)": set(site.names)}
    bar_before, after = {}, None
    for night in nights:
        if after != night - 1:
            bar_before = bar_of(site, values, night - 1)
        evidence = night_evidence(site, values, night)
        found = judged_night(site, evidence, {}, bar_before=bar_before)
        counted.paged += any(f.paged for f in found)
        counted.shown += len(found)
        counted.judged += 1
        if night % UPDATE_EVERY == 0:
            anyway = {f.subject for f in found if f.paged}
            counted.updates += 1
            counted.update_pages += any(
                f.paged and f.subject not in anyway for f in
                judged_night(site, evidence, everywhere, bar_before=bar_before))
        bar_before, after = at_the_bar(found, evidence), night
    counted.seconds = time.monotonic() - started
    return counted


#: Why a trial was not paged within 2 nights (``miss_cause``), in the fault table's order.
NOT_ON_BOTH, WITHIN_NOISE, NIGHTS_DIFFER = "not on both nights", "within noise", "nights differ"
FAR_NIGHT, NOT_CONFIRMED, UNDER_THE_BAR = "far night", "not confirmed", "under the bar"
MISS_CAUSES = (NOT_ON_BOTH, WITHIN_NOISE, NIGHTS_DIFFER, FAR_NIGHT, NOT_CONFIRMED,
               UNDER_THE_BAR)


def fault_trials(site: Site, noise: np.ndarray, fault: Fault, trials: int,
                 rng: random.Random, history: History = None
                 ) -> tuple[float, float, float, float, float, collections.Counter[str]]:
    """Shares of trials paged within 1, 2 and 3 nights, with the cause named, and in which
    a line the fault moved ran on both its first two nights; and each trial not paged
    within 2 nights by its cause (``miss_cause``). The fault is paged on the first night
    a paging finding names its cause or holds a line it moved since its first night;
    named, when that night's pages name the cause. A page of other lines that night (the
    site's own false pages, ~2 % of nights at 4,000 lines) is neither: counted as the
    fault's page it made 3 of 30 GDR-off trials "not named" at 4,000 lines, and could as
    well have counted a fault as paged that was not. The ran share (a line the fault
    moved on both its first two nights ran on both) bounds what a rule that confirms a
    level on two nights can page within 2: a fault of one line (the slow Himeno node) is
    missed in every trial where that line's test case did not run on night 1 or 2
    (``Noise.missing``), an intermittent one wherever its second night is off; a
    fingerprint change can page on its first night without it."""
    first = [0, 0, 0]
    named = ran = 0
    misses: collections.Counter[str] = collections.Counter()
    for _ in range(trials):
        start = rng.randrange(WARMUP + 20, noise.shape[1] - 3)
        multiplier, names_cause, environment = fault(site, rng, start)
        faulted = with_history(site, noise, start, history).copy()
        faulted[:, start:] *= multiplier[:, start:]
        first_two = slice(start, start + 2)
        hit = ((multiplier[:, first_two] != 1.0) & ~np.isnan(faulted[:, first_two])).all(axis=1)
        ran += bool(hit.any())
        paged_on = None
        values = faulted * site.base[:, None]
        bar_before = bar_of(site, values, start - 1)
        for offset in range(3):
            tonight, before = (environment, {}) if offset == 0 else ({}, environment)
            evidence = night_evidence(site, values, start + offset)
            found = judged_night(site, evidence, tonight, before, bar_before)
            bar_before = at_the_bar(found, evidence)
            moved = {site.specs[i].name for i in np.flatnonzero(
                (multiplier[:, start:start + offset + 1] != 1.0).any(axis=1))}
            ours = [f for f in found if f.paged and (
                names_cause(f) or any(line.name in moved for line in f.lines))]
            if offset == 1:
                second_night = (evidence, found, moved)
            if ours:
                paged_on = offset
                for k in range(offset, 3):
                    first[k] += 1
                named += any(names_cause(f) for f in ours)
                break
        if paged_on is None or paged_on > 1:
            misses[miss_cause(site, hit, *second_night)] += 1
    return (*(x / trials for x in first), named / trials, ran / trials, misses)


def miss_cause(site: Site, hit: np.ndarray, evidence: list[fd.Evidence],
               found: list[fd.Finding], moved: set[str]) -> str:
    """Why a fault was not paged by its second night, read from that night (its lines'
    ``evidence``, its findings ``found``, the lines the fault ``moved``), the first that
    holds:

    - no line it moved ran, moved, on both nights (``hit``): a rule that confirms a level
      on two nights has one night (a line that missed one; an intermittent fault off);
    - every such line was within its noise that night (the line rule's ``k``: the pair's
      driver, +17 % on a latency of CV 10.6 %);
    - every such line within its noise or its two nights apart (the line rule's
      ``agree``: a Himeno node 30 % slower at -35.1 % and -28.5 %, 4.0 of its noise
      apart, is no level yet);
    - a finding that held one of them read it with the far nights of its history (a
      night as far as tonight's is what that line does: ``Policy.far``);
    - one reached the bar but fewer than half its lines held a level, and it was not at
      the bar the night before (not confirmed);
    - else its evidence was under the bar."""
    if not hit.any():
        return NOT_ON_BOTH
    rules = site.rules()
    rule_of = {site.specs[i].name: rules[i] for i in np.flatnonzero(hit)}  # ran on both
    ran = [line for line in evidence if line.name in rule_of]
    if all(line.side == 0 for line in ran):
        return WITHIN_NOISE
    if all(line.side == 0 or line.nights < rule_of[line.name].needed for line in ran):
        return NIGHTS_DIFFER
    ours = [f for f in found if f.worse and any(line.name in moved for line in f.lines)]
    if any(f.far > 0 for f in ours):
        return FAR_NIGHT
    critical = POLICY.critical_z(len(evidence))
    if any(f.evidence >= critical and not f.confirmed for f in ours):
        return NOT_CONFIRMED
    return UNDER_THE_BAR


def history_of(what: str) -> History:
    """The history a fault row is tried with (its name's suffix: ``HISTORIES``)."""
    return next((history for suffix, history in HISTORIES.items()
                 if suffix and what.endswith(suffix)), None)


#: name → (label, nodes, HCAs, GPUs, leaf size, build_site's options).
SITES = {"2": ("a 2-node pair", 2, 1, 0, 8,
               {"checks": PAIR_CHECKS, "himeno": False, "pairs_only": True}),
         "16": ("16 nodes", 16, 1, 0, 8, {"checks": FABRIC_CHECKS[::3]}),
         "300": ("300 lines", 23, 2, 2, 8, {}), "4000": ("4,000 lines", 160, 4, 4, 16, {})}


def faults_of(site_name: str) -> list[str]:
    """The faults a site can have: no GDR to lose without GPUs, no slow Himeno node
    without Himeno, no leaf to congest where one leaf is the whole fabric, no line of CV
    40 % among a pair's three (its one latency keeps the CV it drew)."""
    _, nodes, _, gpus, leaf, options = SITES[site_name]
    absent = {"GDR off on a node": not gpus, "Himeno node 30 % slower":
              not options.get("himeno", True), "leaf switch congested": nodes <= leaf,
              "3x latency, CV 40 % line": nodes <= 2}
    return [what for what in FAULTS if not absent.get(what, False)]


@functools.lru_cache(maxsize=2)
def prepared(site_name: str, nights: int, seed: int, noise_model: Noise
             ) -> tuple[Site, np.ndarray]:
    """The site and its noise (lines × nights), the same for every task of one seed."""
    _, nodes, hcas, gpus, leaf, options = SITES[site_name]
    site = build_site(nodes, hcas, gpus, leaf, random.Random(seed), **options)
    site.noisy_line = next(i for i, s in enumerate(site.specs) if s.kind == "lat_small")
    if "3x latency, CV 40 % line" in faults_of(site_name):  # a pair's only latency keeps its
        site.specs[site.noisy_line] = dataclasses.replace(site.specs[site.noisy_line],
                                                          cv=NOISY_CV)
    site.base = np.array([s.value for s in site.specs])
    draws = np.random.default_rng(seed)
    site.partners = pick_partners(site, nights, noise_model, draws)
    return site, simulate_noise(site, nights, noise_model, draws)


def task(site_name: str, what: str, trials: int, nights: int, seed: int,
         noise_model: Noise, part: tuple[int, int] = (0, 1)) -> str | FalsePages:
    """One fault's row, each fault with its own random draws, or (``what`` "false
    pages") the site's false pages on the ``part[0]``-th of ``part[1]`` runs of nights in
    a row (``--jobs`` runs tasks side by side, and gives the same figures as one by one)."""
    site, noise = prepared(site_name, nights, seed, noise_model)
    label = SITES[site_name][0]
    if what == "false pages":
        judged = range(WARMUP, nights)  # in runs of nights: each reads the one before
        size = -(-len(judged) // part[1])
        return false_pages(site, noise * site.base[:, None],
                           judged[part[0] * size:(part[0] + 1) * size])
    fault, within = FAULTS[what]
    one, two, three, named, ran, misses = fault_trials(site, noise, fault, trials,
                                                       random.Random(f"{seed} {what}"),
                                                       history_of(what))
    return fault_row(label, what, (one, two, three), named, within, ran=ran, misses=misses)


FAULT_HEADER = ("| site | fault | paged night 1 | within 2 | within 3 | cause named | goal |\n"
                "|---|---|---|---|---|---|---|")
#: run_quality's fault table: FAULT_HEADER, how often a faulty line ran nights 1-2, and
#: the trials not paged within 2 nights by their cause (``miss_cause``).
SITE_FAULT_HEADER = FAULT_HEADER.replace(
    " goal |\n", f" goal | a faulty line ran nights 1-2 | not paged within 2: "
    f"{' / '.join(MISS_CAUSES)} |\n") + "---|---|"


def fault_row(label: str, what: str, paged: tuple[float, float, float], named: float,
              within: int, trials: int | None = None, ran: float | None = None,
              misses: collections.Counter[str] | None = None) -> str:
    """One row of the fault table: shares of trials paged within 1, 2 and 3 nights and
    with the cause named, against the fault's goal (``GOALS``, else 95 % within
    ``within`` nights); ``trials`` is said where it is not the table's one count; ``ran``
    (a faulty line ran nights 1-2) and ``misses`` (trials by ``miss_cause``):
    SITE_FAULT_HEADER's last columns, where given."""
    share, goal = paged[within - 1], GOALS.get(what, 0.95)
    count = f" ({trials} trial(s))" if trials is not None else ""
    last = f" {ran:.0%} |" if ran is not None else ""
    if misses is not None:
        last += f" {' / '.join(str(misses[cause]) for cause in MISS_CAUSES)} |"
    return (f"| {label} | {what}{count} | {paged[0]:.0%} | {paged[1]:.0%} | {paged[2]:.0%} | "
            f"{named:.0%} | {'ok' if share >= goal and named >= goal else 'MISS'} |{last}")


def noise_options(parser: argparse.ArgumentParser) -> None:
    """One option per field of ``Noise``, its default the field's."""
    helps = {"node_sd": "a node's night factor, sd (relative)",
             "leaf_sd": "a leaf switch's night factor, sd",
             "fabric_sd": "the night factor common to all inter-node lines, sd",
             "tail_df": "Student-t degrees of freedom of all noise (heavy tails)",
             "drift": "slow drift: a line's nightly random-walk step, in its noise",
             "missing": "share of line-nights missing",
             "pair_change": "share of nights a pairwise line gets another partner",
             "two_state": "share of lines with a second state (8 %% worse, 1 night in 5)"}
    for item in dataclasses.fields(Noise):
        parser.add_argument(f"--{item.name.replace('_', '-')}", type=float,
                            default=item.default,
                            help=f"{helps[item.name]} (default {item.default:g})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per fault")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true",
                        help="the small site only, 90 nights, 2 trials (the suite runs it)")
    parser.add_argument("--sites", default="300,4000",
                        help="which sites, comma-separated: 2 (a node pair), 16, 300, 4000 "
                             "(default: 300,4000)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="tasks (a site's false pages, one fault's trials) run side by "
                             "side on this many cores; the figures are the same")
    parser.add_argument("--independent", action="store_true",
                        help="every line's noise drawn alone, no missing nights, the same "
                             "pair every night (the model before issue 49)")
    noise_options(parser)
    args = parser.parse_args()
    noise = Noise(**{item.name: getattr(args, item.name) for item in dataclasses.fields(Noise)})
    if args.independent:
        noise = noise.independent()
    chosen = args.sites.split(",")
    trials, nights = args.trials, NIGHTS
    if args.smoke:
        chosen, trials, nights = chosen[:1], 2, 90
    started = time.monotonic()
    parts = max(1, args.jobs)
    tasks = [(name, "false pages", trials, nights, args.seed, noise, (k, parts))
             for name in chosen for k in range(parts)]
    tasks += [(name, what, trials, nights, args.seed, noise, (0, 1))
              for name in chosen for what in faults_of(name)]
    if args.jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(task, *zip(*tasks)))
    else:
        rows = [task(*one) for one in tasks]
    site_rows = [sum((row for one, row in zip(tasks, rows)
                      if one[0] == name and one[1] == "false pages"), FalsePages()
                     ).row(SITES[name][0], prepared(name, nights, args.seed, noise)[0].lines)
                 for name in chosen]
    fault_rows = [row for one, row in zip(tasks, rows) if one[1] != "false pages"]
    print(f"perfguard run-level verdict quality: {trials} trial(s) per fault, seed "
          f"{args.seed}, {nights} nights, alpha {POLICY.alpha}; noise "
          f"{'independent' if args.independent else 'correlated'}: "
          + ", ".join(f"{item.name} {getattr(noise, item.name):g}"
                      for item in dataclasses.fields(Noise)) + "\n")
    print("| site | lines | nights judged | false pages / month | findings / night | "
          "updates that changed nothing: paged | time |\n|---|---|---|---|---|---|---|")
    print("\n".join(site_rows))
    print("\n" + SITE_FAULT_HEADER)
    print("\n".join(fault_rows))
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
