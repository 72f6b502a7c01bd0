"""Verdicts: every key figure of a run against its threshold and its own history.

The threshold of a value is chosen by one SQL function, ``matching_threshold`` (the
most specific current one of its scope; ties go to the newest): the run's ReFrame
references, this verdict and the dashboards all call it. A missed threshold is a
``fail`` (acceptance: "≥ 90 % of line rate"). Otherwise the value is judged against
the history of its series (perfguard.judge): ``regression``, ``improvement``,
``inconclusive`` or ``pass``. Neither a threshold nor enough history: ``no-reference``,
visible, never a silent pass.
"""

from __future__ import annotations

import dataclasses
import getpass
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfguard.errors import PerfguardError, UsageError
from perfguard.judge import curves, history
from perfguard.judge import rules as judge
from perfguard.paths import site_file
from perfguard.states import (
    FAIL,
    IMPROVEMENT,
    PASS,
    REGRESSION,
    STATES,
)
from perfguard.store import queries
from perfguard.store.queries import Connection


@dataclass
class Line:
    check: str
    params: dict[str, Any]
    partition: str
    environ: str
    metric: str
    value: float | None
    unit: str
    point: dict[str, Any]
    reference: float | None
    low: float | None
    high: float | None
    status: str
    detail: str = ""
    baseline: float | None = None
    better: str | None = None
    judgement: judge.Judgement | None = None
    #: The series' values up to this run, oldest first (what the judgement read).
    series: tuple[float, ...] = ()
    #: For a key figure taken from a curve: the curve's point it is ({"size": 4194304}).
    key_point: dict[str, Any] | None = None
    #: The nodes its test case ran on (the table names them per variant).
    nodes: tuple[str, ...] = ()
    #: A regression line: whether a paged finding holds it (None: not judged so, or a
    #: run recorded before findings): only then does it fail the run.
    paged: bool | None = None
    #: Nights in a row its noise has hidden a change of 25 % (0: it sees): rules.blind_nights.
    blind_nights: int = 0
    #: Where ``better`` comes from: declared by the check, its threshold, its reference.
    better_from: str = ""
    #: The threshold its limits come from (None: the check's own ReFrame reference).
    threshold_id: int | None = None
    #: When each value of ``series`` was measured (its run's start): the findings line
    #: the nights of a run's lines up by them (None: not read).
    times: tuple | None = None
    #: A whole curve's evidence: its band's recent nights in noise (curves.Curve.distances),
    #: and its baseline's nights (curves.Curve.evidence).
    curve_distances: tuple[float, ...] = ()
    curve_history: tuple[float, ...] = ()

    @property
    def change_vs_centre(self) -> float | None:
        """The judged value against its history's centre (the baseline of the rule)."""
        return self.judgement.change if self.judgement else None

    @property
    def change(self) -> float | None:
        if self.baseline in (None, 0) or self.value is None:
            return None
        return (self.value - self.baseline) / abs(self.baseline)

    @property
    def key(self) -> tuple:
        return (self.check, tuple(sorted(self.params.items())), self.partition, self.environ,
                self.metric, tuple(sorted(self.point.items())))


def resolve_run(conn: Connection, ref: str | None) -> int:
    """A run id, a session uuid, a label (newest run carrying it), or None for the latest."""
    if ref is None or ref == "latest":
        row = queries.one(conn, "latest_run")
    elif ref.isascii() and ref.isdigit() and len(ref) < 19:  # a bigint, not "²" or 10^30
        row = queries.one(conn, "run_by_id", (int(ref),))
    else:
        row = queries.one(conn, "run_by_session_or_label", {"r": ref})
    if row is None:
        if ref:
            raise UsageError(f"no run matches {ref!r} (give a run id, session uuid or label)")
        raise PerfguardError("the database holds no runs yet: `perfguard run` first")
    return row[0]


#: Per-metric overrides of the history rule, shipped with the site configuration.
def rules_file() -> Path:
    """The site's verdict rules, else the shipped ones."""
    return site_file("verdict_rules.yaml")


def verdict(conn: Connection, run_id: int, rules: judge.Rules | None = None,
            with_curves: bool = True) -> list[Line]:
    """Every line of the run's verdict; ``with_curves=False`` leaves out the whole-curve
    lines (their sizes' history is most of a large run's cost: benchmarks/ingest.py)."""
    rules = judge.load_rules(rules_file()) if rules is None else rules
    with queries.planned(conn, queries.BULK):
        return _verdict(conn, run_id, rules, with_curves)


def _verdict(conn: Connection, run_id: int, rules: judge.Rules,
             with_curves: bool) -> list[Line]:
    levels = in_force(accepted_levels(conn, run_id))  # first: judgement_begins.sql says why
    with queries.planned(conn, queries.NO_MERGE_JOINS):
        rows = queries.shared_rows(conn, "verdict_lines", {"run_id": run_id})
    regressed = regressed_runs(conn, run_id)
    # with times always: the findings line the lines' nights up by them
    series = _history(conn, run_id, rows, dataclasses.replace(rules, times=True))
    epochs: dict = {}  # the run's lines share their nodes' fingerprint epoch
    rules_of = [rules.for_metric(row["check_name"], row["metric"]) for row in rows]
    accepted = [_accepted(row, levels, _first(series.get(_series_key(row))))
                for row in rows]
    kept = [_without(series.get(_series_key(row)), regressed.get(_line_key(row)), level, rule)
            for row, rule, level in zip(rows, rules_of, accepted)]
    timed = [history.timed_values(conn, _since(found, level), rule.same_fingerprint, epochs)
             for found, rule, level in zip(kept, rules_of, accepted)]
    values = [found for found, _ in timed]
    bases = judge.baselines([judge.judged_history(v, rule) for v, rule in zip(values, rules_of)])
    lines = [_line(*line, _level_parts(found, level))
             for line, found, level in zip(zip(rows, values, rules_of, bases), kept, accepted)]
    for line, (_, times) in zip(lines, timed):
        line.times = times
    for line, level in zip(lines, accepted):
        if level is not None:
            line.detail = f"{level[2]}; {line.detail}"
    if with_curves:
        nodes = {variant_of(line): line.nodes for line in lines}
        lines += [dataclasses.replace(line, nodes=nodes.get(variant_of(line), ()))
                  for line in _curve_lines(conn, run_id, rules, levels)]
    for row in queries.shared_rows(conn, "testcases_without_samples", {"run_id": run_id}):
        lines.append(Line(row["check_name"], row["params"], row["partition"], row["environ"],
                          "-", None, "", {}, None, None, None, row["testcase_state"],
                          row["fail_reason"] or "", nodes=tuple(row["nodelist"] or ())))
    return lines


def accepted_levels(conn: Connection, run_id: int) -> list[tuple]:
    """(cause, from when, "new level from run N accepted by who on date: why", when it
    was accepted, its id, when it was cleared (None: in force), the lines its run
    measured) of the run's system, oldest first (`perfguard accept`), cleared ones too."""
    levels = queries.tuples(conn, "accepted_levels", (run_id,))
    if not levels:
        return []
    lines: dict[int, set] = {level[4]: set() for level in levels}
    for level_id, *line in queries.tuples(conn, "accepted_lines",
                                          {"levels": list(lines)}):
        lines[level_id].add(tuple(line))
    return [(*level, frozenset(lines[level[4]])) for level in levels]


def in_force(levels: list[tuple], at: Any = None) -> list[tuple]:
    """The levels in force (at ``at``: accepted by then and not cleared by then; None:
    now)."""
    if at is None:
        return [level for level in levels if level[5] is None]
    return [level for level in levels
            if level[3] <= at and (level[5] is None or level[5] > at)]


def accept(conn: Connection, subject: str, from_run: int, reason: str) -> None:
    """Accept the level of ``subject``'s lines from run ``from_run`` on (0024), as the
    account that ran the command (the database role is shared by every admin)."""
    with conn.transaction():
        queries.execute(conn, "insert_accepted_level",
                        (subject, from_run, reason, getpass.getuser()))


def accepted(conn: Connection) -> list[tuple]:
    """Every accepted level, cleared ones too: (id, cause, from run, who, when, why, who
    cleared it, when; None while in force)."""
    return queries.tuples(conn, "accepted_level_list")


def clear_accepted(conn: Connection, level_id: int) -> str:
    """Withdraw an accepted level (kept, with who and when): from the next verdict on its
    lines are judged against their history as before. Its cause."""
    with conn.transaction():
        row = queries.one(conn, "clear_accepted_level", (getpass.getuser(), level_id))
    if row is None:
        raise UsageError(f"no accepted level #{level_id} in force (`perfguard accept "
                         f"--list`)")
    return row[0]


def line_name(check: str, params: dict, metric: str) -> str:
    """A line as findings and ``accept`` name it: its variant and metric."""
    return f"{variant_name(check, params)} {metric}"


def devices_of(params: dict, nodes: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The devices a line measured, as ``node:device``: the HCA it names on each node,
    and ``node:gpu`` where it moved device memory."""
    hca = params.get("hca")
    gpu = "D" in str(params.get("transfer", "")) or params.get("memory") == "cuda"
    return tuple([*(f"{n}:{hca}" for n in nodes if hca), *(f"{n}:gpu" for n in nodes if gpu)])


def _accepted(row: dict, levels: list[tuple], first: Any = None) -> tuple | None:
    """The newest accepted level whose cause is this line's: '*', one of its nodes or
    devices, or its name (each cause a finding can name; a finding naming twins,
    ``node1:lo, node2:lo``, covers the lines of either), of those that cover the line:
    its run measured it (``level[6]``), or it was measured before (``first``: when its
    history as read begins). A check that first ran later was never at that level."""
    nodes = row.get("nodelist") or []
    params = row["params"] or {}
    causes = {"*", *nodes, *devices_of(params, nodes),
              line_name(row["check_name"], params, row["metric"])}
    line = (row["check_name"], row["params_text"], row["partition"], row["environ"],
            row["metric"].removesuffix(" curve"))
    found = [level for level in levels if set(level[0].split(", ")) & causes
             and (line in level[6] or (first is not None and first < level[1]))]
    return found[-1] if found else None


def _first(series: history.Series | None) -> Any:
    """When a series' history as read begins (None: not read, or without times)."""
    return series.times[0] if series is not None and series.times else None


def regressed_runs(conn: Connection, run_id: int) -> dict[tuple, set]:
    """Line → the start times of the earlier runs that judged it a regression. Those runs
    stay out of its baseline until a level is accepted: a fault must not become the
    normal it is judged against (the line returns to pass when its values return)."""
    return {tuple(row[:5]): set(row[5])
            for row in queries.tuples(conn, "regressed_runs", (run_id,))}


def _line_key(row: dict) -> tuple:
    return (row["check_name"], row["params_text"], row["partition"], row["environ"],
            row["metric"])


def _without(series: history.Series | None, regressed: set | None,
             level: tuple | None, rule: judge.Rule = judge.DEFAULT_RULE
             ) -> history.Series | None:
    """The series without the runs of a fault before its recent nights: those that judged
    it a regression and the nights just before them that were the fault's first, but for
    those an accepted level made the new normal (at or after the run it starts from and
    before it was accepted: a regression after the acceptance is one against the new
    level). The recent nights stay, whatever they were: they are what is judged."""
    if series is None or not regressed or series.times is None:
        return series

    def accepted(t) -> bool:
        return level is not None and level[1] <= t < level[3]

    recent = max(0, len(series.times) - rule.confirm)
    fault = {i for i, t in enumerate(series.times[:recent])
             if t in regressed and not accepted(t)}
    fault |= _first_nights(series.values[:recent], fault, rule)
    return _kept(series, [i for i in range(len(series.times)) if i not in fault])


def _first_nights(values: tuple[float, ...], fault: set[int], rule: judge.Rule) -> set[int]:
    """The nights just before a regressed one (within its ``confirm`` nights) beyond the
    baseline on its side: the fault's first nights, "confirm on the next" when they came.
    Left in, one (measured live: 24 µs under a CPU quota, then 41 µs judged regression,
    the baseline 4 µs) makes the line's noise ±35 % and hides the next fault. Whether
    they agree with the regressed night does not matter: a fault's level wanders (24, 41,
    8 µs on three quota nights), and a night beyond just before it is no baseline either."""
    kept = [v for i, v in enumerate(values) if i not in fault]
    if not fault or len(kept) < rule.min_history:
        return set()
    centre, noise = judge.baseline(kept[-rule.window:])
    noise = max(noise, rule.min_noise * abs(centre))
    first = set()
    for i in fault:
        side = 1 if values[i] > centre else -1
        first |= {j for j in range(max(0, i - rule.confirm + 1), i)
                  if j not in fault and (values[j] - centre) * side > rule.k * noise}
    return first


def _kept(series: history.Series, kept: list[int]) -> history.Series:
    """The series with only the runs at ``kept`` (values and times alike)."""
    return series._replace(values=tuple(series.values[i] for i in kept),
                           times=tuple(series.times[i] for i in kept))


def _since(series: history.Series | None, level: tuple | None) -> history.Series | None:
    """The series from the accepted run on: the new level is the baseline."""
    if series is None or level is None or series.times is None:
        return series
    return _kept(series, [i for i, t in enumerate(series.times) if t >= level[1]])


def _level_parts(series: history.Series | None, level: tuple | None
                 ) -> tuple[list[float], int] | None:
    """For a line with an accepted level: its values before the level, and how many of
    the level's runs were accepted (measured before the acceptance)."""
    if series is None or level is None or series.times is None:
        return None
    before = [v for v, t in zip(series.values, series.times) if t < level[1]]
    accepted = sum(1 for t in series.times if level[1] <= t < level[3])
    return before, accepted


def variant_of(line: Line) -> tuple:
    """What names a line's test case: check, parameters, partition and environ."""
    return line.check, frozen(line.params), line.partition, line.environ


def variant_of_row(row: dict) -> tuple:
    """``variant_of`` a query's row (``check_name``, ``params``, ``partition``,
    ``environ``)."""
    return row["check_name"], frozen(row["params"]), row["partition"], row["environ"]


def judge_curves_since(conn: Connection, run_id: int, rules: judge.Rules,
                       levels: list[tuple], **options: Any) -> list[curves.Curve]:
    """``curves.judge_curves`` (``options``: ``moved_only``, ``variants``) with each size's
    series cut at the accepted level that covers its curve, as the curve's verdict line
    reads it: the verdict and the report's marks alike."""
    def since(series: history.Series) -> history.Series:
        row = {"nodelist": series.nodes, "params": series.params, "check_name": series.check,
               "metric": f"{series.metric} curve", "params_text": series.params_text,
               "partition": series.partition, "environ": series.environ}
        return _since(series, _accepted(row, levels, _first(series)))

    return curves.judge_curves(conn, run_id, dataclasses.replace(rules, times=bool(levels)),
                               since=since if levels else None, **options)


def levels_as_judged(conn: Connection, run_id: int) -> list[tuple]:
    """The accepted levels the run's stored verdict was judged with (accepted before its
    last judgement): what its report marks the curves' sizes against, so that a later
    accept changes neither until the run is judged again (``--rejudge``)."""
    [judged_at] = queries.one(conn, "judged_at", {"run": run_id})
    return in_force(accepted_levels(conn, run_id), judged_at)


def _curve_lines(conn: Connection, run_id: int, rules: judge.Rules,
                 levels: list[tuple] = ()) -> list[Line]:
    """A line per size sweep that regressed or improved somewhere (a curve within its
    noise adds nothing to its key figure's line); an accepted level cuts its history."""
    judged = judge_curves_since(conn, run_id, rules, levels, moved_only=True)
    return [Line(c.check, c.params, c.partition, c.environ, f"{c.metric} curve", None, c.unit,
                 {}, None, None, None, c.state, c.summary(), better=c.better,
                 curve_distances=recent, curve_history=history)
            for c in judged if c.state in (REGRESSION, IMPROVEMENT)
            for recent, history in [c.evidence()]]


def with_key_points(conn: Connection, run_id: int, lines: list[Line]) -> list[Line]:
    """Name the curve point each key figure is (the 4 MiB point of a bandwidth curve), so
    the report and --explain say which size the verdict judged."""
    found = {(*variant_of_row(r), r["metric"]): r["coords"]
             for r in queries.rows(conn, "key_points", {"run_id": run_id})}
    for line in lines:
        if not line.point:
            line.key_point = found.get((*variant_of(line), line.metric))
    return lines


def _series_key(row: dict) -> tuple:
    """A row's ``history.Series.key``."""
    return (row["check_name"], row["params_text"], row["partition"], row["environ"],
            row["metric"], row["point_id"])


def frozen(mapping: dict) -> tuple:
    """A test case's parameters as a key (every value as its text, as ReFrame names it)."""
    return tuple(sorted((k, str(v)) for k, v in mapping.items()))


def _history(conn: Connection, run_id: int, rows: list[dict],
             rules: judge.Rules) -> dict[tuple, history.Series]:
    """Series key → the series up to and including this run, for every row's series."""
    points = sorted({r["point_id"] for r in rows})
    return history.read(conn, run_id, sorted({r["check_name"] for r in rows}), points, rules)


def _line(row: dict, values: list[float], rule: judge.Rule,
          base: tuple[float, float] | None,
          level: tuple[list[float], int] | None = None) -> Line:
    """A missed threshold is a fail; a test case that did not pass shows its own state (its
    figures are not to be trusted); otherwise the history decides (of a line with an
    accepted level, ``level``: its values before it and how many runs were accepted, the
    new level: judge.judge_new_level). Until a series has history enough for a baseline,
    a passed threshold speaks alone; without one the line is inconclusive; with neither a
    threshold nor a declared direction, no-reference."""
    line = Line(row["check_name"], row["params"], row["partition"], row["environ"],
                row["metric"], row["value"], row["unit"], row["point"], row["reference"],
                row["lower_limit"], row["upper_limit"], row["status"],
                row["fail_reason"] or "", better=row["better"],
                better_from=row["better_from"], series=tuple(values),
                nodes=tuple(row["nodelist"] or ()), threshold_id=row["threshold_id"])
    if line.status == FAIL:
        return line
    if row["testcase_state"] != PASS:
        line.status = row["testcase_state"]
        return line
    if line.better is None:
        line.detail = (f"{line.check} declares no direction for {line.metric}, and no "
                       f"threshold or one-sided reference implies one")
        return line
    line.judgement = judge.judge_series(values or [line.value], line.better, rule, base) \
        if level is None else judge.judge_new_level(level[0], values or [line.value],
                                                    level[1], line.better, rule)
    line.detail = line.judgement.reason
    _mark_blind(line, rule)
    no_baseline = line.judgement.centre is None
    if not (no_baseline and line.status == PASS):
        line.status = line.judgement.state
    return line


def _mark_blind(line: Line, rule: judge.Rule) -> None:
    """A line whose noise hides a change of 25 % says for how many nights it has been
    blind (counted only for such a line: one baseline per night it was)."""
    j = line.judgement
    if j is None or j.centre is None or not judge.is_noisy(j.centre, j.noise, rule):
        return
    line.blind_nights = judge.blind_nights(line.series, rule)
    if line.blind_nights:
        line.detail = f"{line.detail}; {judge.blind_text(line.blind_nights, j.cv, rule)}"


#: A run's outcomes, as run_outcome says (0021), and the exit code each gives the CLI.
OUTCOME_PASS, OUTCOME_FAIL, NOTHING_MEASURED = "pass", "fail", "nothing-measured"
#: Test cases aborted by SIGINT, SIGTERM or the stall watchdog, nothing finished failed:
#: its own exit code, never a failure (an interruption is no reason to page).
INTERRUPTED = "interrupted"
EXIT_CODES = {OUTCOME_PASS: 0, OUTCOME_FAIL: 1, NOTHING_MEASURED: 3, INTERRUPTED: 4}


@dataclass(frozen=True)
class RunOutcome:
    """A run's outcome, as the database's ``run_outcome`` view says (one rule for the
    CLI, the report and Grafana): pass, fail, interrupted (test cases aborted), or
    nothing-measured (skips, and fewer measured test cases than the site's floor: a run
    that passes without measuring would hide a cluster that lost its benchmarks)."""
    failed: bool
    why: str
    outcome: str = OUTCOME_PASS

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    @property
    def word(self) -> str:
        """PASS, FAIL, INTERRUPTED or NOTHING-MEASURED: the run line's verdict."""
        return self.outcome.upper()

    def line(self, run_id: int) -> str:
        """``run N: PASS (why)``: the last line `run`, `nightly` and `verdict` print."""
        return f"run {run_id}: {self.word} ({self.why})"


def outcome(conn: Connection, run_id: int) -> RunOutcome:
    row = queries.one(conn, "run_outcome", (run_id,))
    if row is None:
        raise PerfguardError(f"run {run_id} is not stored")
    return RunOutcome(*row)


def measured_floor(data: dict | None = None) -> float:
    """``run: {min_measured_share: F}`` of the verdict rules (already read: ``data``): a
    run whose measured test cases are fewer than F of those measured or skipped is
    nothing-measured (default 0: only a run that measured none)."""
    data = judge.read_rules_file(rules_file()) if data is None else data
    return float((data.get("run") or {}).get("min_measured_share", 0.0))


def recorded(conn: Connection, run_id: int, rules: judge.Rules | None = None
             ) -> list[Line]:
    """The run's verdict as stored when it was judged (what Grafana shows), with each key
    figure's history for sparklines; nothing is judged again."""
    rules = judge.load_rules(rules_file()) if rules is None else rules
    rows = queries.rows(conn, "recorded_verdict", {"run_id": run_id})
    figures = [r for r in rows if r["metric"] != "-" and not r["metric"].endswith(" curve")]
    series = _history(conn, run_id, figures, rules)
    lines = []
    for row in rows:
        rule = rules.for_metric(row["check_name"], row["metric"])
        judgement = judge.Judgement(row["status"], row["centre"], row["noise"], None, (),
                                    row["detail"], rule) \
            if row["centre"] is not None or row["detail"].startswith(judge.NOT_YET) else None
        found = series.get(_series_key(row))
        values = found.values if found else ()
        lines.append(Line(row["check_name"], row["params"], row["partition"], row["environ"],
                          row["metric"], row["value"], row["unit"], row["point"],
                          row["reference"], row["lower_limit"], row["upper_limit"],
                          row["status"], row["detail"], better=row["better"],
                          judgement=judgement, series=tuple(values), paged=row["paged"],
                          blind_nights=row["blind_nights"] or 0,
                          nodes=tuple(row["nodelist"] or ())))
    return with_key_points(conn, run_id, lines)


@dataclass(frozen=True)
class Judged:
    """One judgement of a run (0025): when, by whom, whether it judged the run again, and
    the outcome it gave."""
    id: int
    at: Any
    by: str
    rejudged: bool
    outcome: str
    why: str

    def when(self) -> str:
        """``judged on 2026-11-26 10:41 UTC``, ``re-judged by root on …``"""
        how = f"re-judged by {self.by}" if self.rejudged else "judged"
        return f"{how} on {self.at:%Y-%m-%d %H:%M %Z}"

    def said(self) -> str:
        """``judged on 2026-11-26 10:41 UTC: FAIL (why)``"""
        return f"{self.when()}: {self.outcome.upper()} ({self.why})"


def judgements(conn: Connection, run_id: int) -> list[Judged]:
    """Every judgement of the run, oldest first: the last is its verdict."""
    return [Judged(*row) for row in queries.tuples(conn, "verdicts_of_run", (run_id,))]


def record(conn: Connection, run_id: int, lines: list[Line],
           findings: list[tuple] = (), floor: float | None = None,
           judged_at: Any = None) -> None:
    """Store a run's verdict and findings for the dashboards and reports (run_findings.rows
    makes the findings' rows), and the measured ``floor`` the run's outcome is read against
    (default: the verdict rules'). A verdict stored before is never lost: its lines and
    findings are kept under its judgement (superseded_*), and this one is a new judgement
    with its time: ``judged_at``, when the judgement began (judgement_begins.sql), else
    now."""
    floor = measured_floor() if floor is None else floor
    with conn.transaction():
        queries.execute(conn, "verdict_before_records", {"run_id": run_id})
        queries.execute(conn, "supersede_verdict_lines", {"run_id": run_id})
        queries.execute(conn, "supersede_findings", {"run_id": run_id})
        again = bool(queries.tuples(conn, "verdicts_of_run", (run_id,)))
        queries.execute(conn, "delete_verdict", (run_id,))
        queries.execute(conn, "delete_findings", (run_id,))
        queries.execute_many(conn, "insert_verdict_line",
                             [_recorded(run_id, line) for line in lines])
        queries.execute_many(conn, "insert_finding", findings)
        queries.execute(conn, "set_measured_floor", (floor, run_id))
        queries.one(conn, "summarize_run", (run_id,))  # what run_outcome reads
        queries.one(conn, "insert_verdict", {"run_id": run_id, "who": getpass.getuser(),
                                             "rejudged": again, "judged_at": judged_at})


def _recorded(run_id: int, line: Line) -> dict[str, Any]:
    j = line.judgement
    low, high = (j.band if j and j.band else (None, None))
    return {"run_id": run_id, "check": line.check, "params": queries.json(line.params),
            "partition": line.partition, "environ": line.environ, "metric": line.metric,
            "point": queries.json(line.point), "value": line.value, "unit": line.unit,
            "status": line.status, "centre": j.centre if j else None,
            "noise": j.noise if j else None, "low": low, "high": high, "detail": line.detail,
            "reference": line.reference, "lower_limit": line.low, "upper_limit": line.high,
            "better": line.better, "paged": line.paged,
            "blind_nights": line.blind_nights or None}


def with_baseline(lines: list[Line], baseline: list[Line]) -> list[Line]:
    before = {line.key: line.value for line in baseline}
    for line in lines:
        line.baseline = before.get(line.key)
    return lines


def counts(lines: list[Line]) -> dict[str, int]:
    return {state: sum(1 for line in lines if line.status == state) for state in STATES}


#: How a test case that passed without a figure is counted under a verdict.
WITHOUT_FIGURE = "passed without a figure"


def without_figure(line: Line) -> bool:
    """A test case that passed and measured nothing (a fixture such as SpackStack, a sanity
    check such as MpiHelloCheck): no pass of a measurement."""
    return line.status == PASS and line.metric == "-"


def measured_counts(lines: list[Line]) -> dict[str, int]:
    """The counts a reader sees (the CLI, the HTML report): every state over the lines
    that measured or should have, then WITHOUT_FIGURE apart, so a run that measured
    nothing never reads as one with passes."""
    found = counts([line for line in lines if not without_figure(line)])
    found[WITHOUT_FIGURE] = sum(1 for line in lines if without_figure(line))
    return found


def variant_name(check: str, params: dict) -> str:
    """``Check %p1=v1 %p2=v2``, parameters sorted: how a variant is named in every output."""
    return check + "".join(f" %{k}={v}" for k, v in sorted(params.items()))


