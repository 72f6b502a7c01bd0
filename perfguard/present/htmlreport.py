"""`perfguard report`: one self-contained HTML file per run, for the admin at 8 am.

What regressed, where (nodes, HCA, sizes), since when, and what changed: the verdict
first (the same judgement `perfguard verdict` prints, failing lines on top with their
evidence and history), then the curves, Himeno scaling, the node × metric picture, a
fabric sweep's matrix, the fingerprint changes and the failed cases' directories. Plots
are static SVG (perfguard.plots); no network is needed to open it. A Markdown summary of
the same verdict serves CI job summaries.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import jinja2
import psycopg

from perfguard import __version__, states
from perfguard.judge import coverage as cov
from perfguard.judge import fingerprint as fp
from perfguard.judge import rules as judge
from perfguard.judge import run_findings
from perfguard.judge import sweep as sw
from perfguard.judge import verdict as vd
from perfguard.present import plots
from perfguard.present import text as tx
from perfguard.store import db, queries

#: Lines shown with evidence at the top (the rest sit in the full table); an inconclusive
#: line whose series is still too short for a baseline is only counted (it is learning).
TOP_STATES = (states.FAIL, states.REGRESSION, states.TEST_FAILED, states.IMPROVEMENT,
              states.INCONCLUSIVE)
#: Lines of the top table that get a history sparkline: the file stays small at 2,000
#: test cases.
MAX_SPARKLINES = 100
#: What figures of the embedded cluster are (system `local`): said wherever they are shown.
ONE_HOST = ("These are one host's figures, not a fabric's: the embedded cluster's virtual "
            "nodes share this host's CPUs and talk over its loopback.")
#: Curves drawn: the verdict's flagged ones (all), then quiet ones (the first of each
#: check, up to this many): a run of thousands of test cases stays a file a browser opens
#: at once.
MAX_QUIET_CURVES = 12

@dataclass
class CurvePlot:
    name: str
    svg: str
    flagged: bool


@dataclass
class Report:
    run: dict
    lines: list[vd.Line]
    baseline_id: int | None
    changes: list[fp.Change]
    #: Devices whose PCIe link trained below its maximum, from this run's fingerprints.
    slow_links: list[fp.SlowLink] = field(default_factory=list)
    curves: list[CurvePlot] = field(default_factory=list)
    curves_left_out: int = 0
    scaling: dict[str, str] = field(default_factory=dict)
    #: Allreduce latency over node counts, software and SHARP side by side (seed 003).
    allreduce: str | None = None
    heatmap: str | None = None
    sweep: list[str] = field(default_factory=list)
    sweep_findings: list[sw.Finding] = field(default_factory=list)
    failed_cases: list[dict] = field(default_factory=list)
    #: Whether the run failed, as stored (the same answer as the CLI and Grafana).
    outcome: vd.RunOutcome = vd.RunOutcome(False, "")
    #: (check, params, partition, environ) → the nodes its test case ran on.
    nodes: dict[tuple, tuple[str, ...]] = field(default_factory=dict)
    #: The run's stored findings (perfguard.judge.run_findings), paging ones first.
    findings: list[dict] = field(default_factory=list)
    #: An upgrade check's node matrix: one row per upgraded node (upgrade_node).
    upgrade_nodes: list[dict] = field(default_factory=list)
    #: The run's node-hours and queue wait (judge.coverage.RunCost); None: not recorded.
    cost: cov.RunCost | None = None

    @property
    def counts(self) -> dict[str, int]:
        return {state: n for state, n in vd.measured_counts(self.lines).items() if n}

    @property
    def failed(self) -> bool:
        return self.outcome.failed

    @property
    def top(self) -> list[vd.Line]:
        order = {state: i for i, state in enumerate(TOP_STATES)}
        return sorted((line for line in self.lines if line.status in order
                       and not _learning(line)),
                      key=lambda line: (order[line.status], tx.name_of(line)))

    @property
    def learning(self) -> int:
        """Lines whose series has no baseline yet, whatever their threshold said."""
        return sum(1 for line in self.lines if _learning(line))

    @property
    def blind(self) -> list[vd.Line]:
        """Lines too noisy to tell a change of 25 % from noise, the longest blind first."""
        return sorted((line for line in self.lines if line.blind_nights),
                      key=lambda line: (-line.blind_nights, tx.name_of(line)))

    @property
    def judged(self) -> int:
        """Lines judged against a history baseline: only then can a report say that
        nothing changed beyond its noise."""
        return sum(1 for line in self.lines if line.judgement and line.judgement.centre
                   is not None)

    @property
    def history_lengths(self) -> str:
        """'2 of 8' or '0–3 of 8': the history the not-yet-judged lines have, of what a
        baseline needs (as the judge counts it)."""
        learning = [line for line in self.lines if _learning(line)]
        lengths = sorted({len(judge.split(line.series, line.judgement.rule)[0])
                          for line in learning})
        needed = max(line.judgement.rule.min_history for line in learning)
        span = str(lengths[0]) if len(lengths) == 1 else f"{lengths[0]}–{lengths[-1]}"
        return f"{span} of {needed}"

    def where(self, line: vd.Line) -> str:
        """Nodes (hostlist), HCA and GPU buffers of a line, else its partition."""
        nodes = self.nodes.get(vd.variant_of(line))
        parts = [fp.compact_nodes(nodes) if nodes else f"{line.partition}/{line.environ}"]
        if line.params.get("hca") not in (None, "auto"):
            parts.append(f"HCA {line.params['hca']}")
        if "D" in str(line.params.get("transfer", "")).split("-")[:2] \
                or line.params.get("memory") == "cuda":
            parts.append("GPU buffers")
        return " · ".join(parts)


def _learning(line: vd.Line) -> bool:
    """A line not yet judged against its history (too short for a baseline)."""
    return line.judgement is not None and line.judgement.centre is None


def build(conn: psycopg.Connection, run_id: int, baseline_id: int | None = None) -> Report:
    """Everything the report shows, from the database (and the run's ReFrame report for
    the failed cases' directories)."""
    run = queries.first(conn, "report_run", (run_id,))
    lines = run_findings.stored_verdict(conn, run_id)
    if baseline_id is None:
        previous = queries.tuples(conn, "previous_run", (run_id,))
        baseline_id = previous[0][0] if previous else None
    else:
        vd.with_baseline(lines, run_findings.stored_verdict(conn, baseline_id))
    current = fp.fingerprints(conn, run_id)
    # each node against its own last fingerprint up to the baseline, not only the nodes
    # the baseline run happened to use
    changes = fp.diff(fp.fingerprints_as_of(conn, baseline_id, list(current)), current) \
        if baseline_id is not None else []
    report = Report(run, lines, baseline_id, changes,
                    slow_links=fp.links_below_maximum(current),
                    outcome=vd.outcome(conn, run_id),
                    nodes=run_findings.testcase_nodes(conn, run_id),
                    findings=run_findings.stored(conn, run_id),
                    cost=cov.run_cost(conn, run_id))
    with db.planned(conn, db.HASH_JOINS):
        _add_curves(conn, report)
    _add_scaling(conn, report)
    _add_allreduce(conn, report)
    _add_heatmap(report)
    _add_sweep(conn, report)
    report.upgrade_nodes = queries.rows(conn, "upgrade_nodes_of_run", (run_id,))
    report.failed_cases = _failed_cases(run.get("report_path"))
    return report


def _add_curves(conn: psycopg.Connection, report: Report) -> None:
    """The curves the verdict flagged (its curve lines), and a quiet one of each check up
    to MAX_QUIET_CURVES: this run, the previous run, the history band per size. Only the
    drawn curves are judged and read (a run of 2,000 test cases judged and read all its
    curves' 250,000 sizes for a dozen drawings: 12-17 s at 2·10^7 samples)."""
    keys = {(*vd.variant_of_row(row), row["metric"]): row["variant"]
            for row in queries.rows(conn, "report_curve_keys", {"run": report.run["id"]})}
    flagged_keys = {(*vd.variant_of(line), line.metric.removesuffix(" curve"))
                    for line in report.lines
                    if line.metric.endswith(" curve")
                    and line.status in (judge.REGRESSION, judge.IMPROVEMENT)}
    quiet: dict[str, tuple] = {}
    for key in sorted(keys):
        if key not in flagged_keys and key[0] not in quiet and len(quiet) < MAX_QUIET_CURVES:
            quiet[key[0]] = key
    drawn = [key for key in sorted(keys) if key in flagged_keys or key in quiet.values()]
    report.curves_left_out = len(keys) - len(drawn)
    if not drawn:
        return
    variants = sorted({keys[key] for key in drawn})
    mine: dict[tuple, dict[int, float]] = defaultdict(dict)
    previous: dict[tuple, dict[int, float]] = defaultdict(dict)
    units = {}
    for row in queries.rows(conn, "report_curves",
                            {"run": report.run["id"], "variants": variants}):
        key = (*vd.variant_of_row(row), row["metric"])
        (mine if row["mine"] else previous)[key][row["size"]] = row["value"]
        units[key] = row["unit"]
    judged = {(c.check, vd.frozen(c.params), c.partition, c.environ, c.metric): c
              for c in vd.judge_curves_since(  # its sizes as its verdict line reads them
                  conn, report.run["id"], judge.load_rules(vd.rules_file()),
                  vd.levels_as_judged(conn, report.run["id"]), variants=variants)}
    limits = _key_limits(report.lines)
    for key in drawn:
        if key not in mine:
            continue
        check, params, partition, environ, metric = key
        curve = judged.get(key)
        flagged = {s: j.state == judge.REGRESSION for s, j in (curve.sizes.items() if curve
                                                                 else [])
                   if j.state in (judge.REGRESSION, judge.IMPROVEMENT)}
        sizes = sorted(mine[key])
        band_sizes = [s for s in sizes if curve and s in curve.sizes and curve.sizes[s].band]
        band = (band_sizes, [curve.sizes[s].band[0] for s in band_sizes],
                [curve.sizes[s].band[1] for s in band_sizes]) if band_sizes else None
        before = sorted(previous[key].items())
        name = f"{vd.variant_name(check, dict(params))} {metric} on {partition}/{environ}"
        svg = plots.curve(name, units[key], sizes, [mine[key][s] for s in sizes],
                          ([s for s, _ in before], [v for _, v in before]) if before else None,
                          band, flagged, limits.get(key))
        report.curves.append(CurvePlot(name, svg, key in flagged_keys))
    report.curves.sort(key=lambda c: (not c.flagged, c.name))


def _key_limits(lines: list[vd.Line]) -> dict[tuple, tuple[int, float, bool]]:
    """Curve key → (size, limit, is_upper) of its key figure's reference threshold."""
    limits = {}
    for line in lines:
        size = (line.key_point or {}).get("size")
        bound = line.high if line.better == "lower" else line.low
        if size is not None and bound is not None:
            limits[(*vd.variant_of(line), line.metric)] = (int(size), bound, line.better == "lower")
    return limits


def _add_scaling(conn: psycopg.Connection, report: Report) -> None:
    by_size: dict[str, list[dict]] = defaultdict(list)
    for size, nodes, ranks, mflops in queries.tuples(conn, "report_himeno",
                                                        (report.run["id"],)):
        by_size[size].append({"nodes": nodes, "ranks": ranks, "mflops": mflops})
    for size, rows in sorted(by_size.items()):
        base = min(rows, key=lambda r: r["ranks"])
        for row in rows:  # efficiency against the smallest run of the sweep
            row["efficiency"] = row["mflops"] / base["mflops"] * base["ranks"] / row["ranks"]
        report.scaling[size] = plots.scaling(rows)


def _add_allreduce(conn: psycopg.Connection, report: Report) -> None:
    by_sharp: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for nodes, sharp, latency in queries.tuples(conn, "report_allreduce",
                                                   (report.run["id"],)):
        by_sharp[sharp].append((nodes, latency))
    if by_sharp:
        report.allreduce = plots.allreduce_scaling(dict(by_sharp))


def _add_heatmap(report: Report) -> None:
    """Node × (check, metric): this run's change against the history median, averaged
    over the variants that ran on the node: a slow node shows as a red row."""
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)
    for line in report.lines:
        j = line.judgement
        if line.point or not j or j.centre in (None, 0) or line.value is None:
            continue
        change = (line.value - j.centre) / abs(j.centre) * 100
        if line.better == "lower":
            change = -change  # red is worse either way
        key = vd.variant_of(line)
        for node in report.nodes.get(key, []):
            cells[(node, f"{line.check} {line.metric}")].append(change)
    if not cells:
        return
    nodes = sorted({n for n, _ in cells}, key=fp.natural_key)
    columns = sorted({c for _, c in cells})
    values = [[sum(cells[(n, c)]) / len(cells[(n, c)]) if cells.get((n, c)) else None
               for c in columns] for n in nodes]
    report.heatmap = plots.heatmap("change vs history median, per node (negative = worse)",
                                   nodes, columns, values, "%")


def _add_sweep(conn: psycopg.Connection, report: Report) -> None:
    found = sw.measurements(conn, report.run["id"])
    if not found:
        return
    state = sw.Sweep(found, sw.limits(found))
    nodes = sorted({n for m in found for n in (m.server, m.client)}, key=fp.natural_key)
    for hca in sorted({m.hca for m in found}):
        cells = {(m.server, m.client): m.value for m in found
                 if m.hca == hca and m.metric == "bandwidth"}
        cells.update({(b, a): v for (a, b), v in list(cells.items())})
        unit = next((m.unit for m in found if m.hca == hca and m.metric == "bandwidth"), "")
        values = [[cells.get((a, b)) for b in nodes] for a in nodes]
        report.sweep.append(plots.heatmap(f"fabric sweep: bandwidth on {hca} (server × client)",
                                          nodes, nodes, values, unit, centre=None))
    report.sweep_findings = [
        sw.Finding(kind, subject, hca, evidence) for kind, subject, hca, evidence in
        queries.tuples(conn, "sweep_findings_of_run", (report.run["id"],))] or sw.blame(state)


def _failed_cases(report_path: str | None) -> list[dict]:
    """Failed test cases with their stage and output directories, from the run's report."""
    if not report_path or not Path(report_path).is_file():
        return []
    try:
        raw = json.loads(Path(report_path).read_text())
    except (OSError, ValueError):
        return []
    failed = []
    for run in raw.get("runs", []):
        for case in run.get("testcases", []):
            if case.get("result") in ("fail", "failure"):
                failed.append({"name": case.get("display_name", case.get("name")),
                               "phase": case.get("fail_phase"),
                               "reason": (case.get("fail_reason") or "").splitlines(),
                               "stagedir": case.get("stagedir"),
                               "outputdir": case.get("outputdir"),
                               "nodes": ",".join(case.get("job_nodelist") or []),
                               "stderr_tail": _stderr_tail(case)})
    return failed


def _stderr_tail(case: dict, lines: int = 15) -> str:
    """The last lines of a failed job's standard error (where a crashed rank's signal,
    srun's and the MPI's own words are), from the stage directory ReFrame keeps for a
    failure; empty where it is gone."""
    stagedir, name = case.get("stagedir"), case.get("job_stderr")
    if not stagedir or not name:
        return ""
    try:
        text = (Path(stagedir) / name).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# --- rendering ---------------------------------------------------------------------
_ENV = jinja2.Environment(loader=jinja2.PackageLoader("perfguard.present", "templates"),
                          autoescape=True, trim_blocks=True, lstrip_blocks=True)


def _sparkline(line: vd.Line, index: int) -> str:
    if len(line.series) < 2 or index >= MAX_SPARKLINES:
        return ""
    j = line.judgement
    return plots.sparkline(list(line.series[-31:]), j.band if j else None,
                           line.status in states.FAILING)


def render_html(report: Report) -> str:
    return _ENV.get_template("report.html.j2").render(
        r=report, tx=tx, sparkline=_sparkline, version=__version__,
        generated=datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        cell=tx.verdict_cell, num=tx.plain, state_class=_state_class, one_host=ONE_HOST,
        cost_line=tx.cost_line,
        hostlist=fp.compact_nodes)


def _state_class(state: str) -> str:
    return {states.FAIL: "bad", states.REGRESSION: "bad", states.TEST_FAILED: "bad",
            states.IMPROVEMENT: "good", states.INCONCLUSIVE: "warn", states.ABORTED: "warn",
            states.PASS: "ok"}.get(state, "muted")


def render_markdown(report: Report, html_name: str | None = None) -> str:
    """A CI job summary: counts, then every line that is not a plain pass."""
    run = report.run
    status = report.outcome.word
    out = [f"## perfguard run {run['id']} on {run['system']}: {status}", "",
           " · ".join(f"{n} {state}" for state, n in report.counts.items()), ""]
    if report.cost:
        out[-1:-1] = ["", tx.cost_line(report.cost)]
    if report.findings:  # what pages, is acknowledged, or is watched, as the CLI says it
        out += ["**Findings**:", "", *(f"- **{tx.finding_word(f)}** {f['summary']}"
                                       for f in report.findings), ""]
    if report.top:
        out += ["| line | value | baseline | verdict |", "|---|---|---|---|"]
        for line in report.top:
            baseline = line.judgement.centre if line.judgement else line.reference
            out.append(f"| `{tx.name_of(line)}` | {tx.plain(line.value)} {line.unit} | "
                       f"{tx.plain(baseline)} | {tx.verdict_cell(line).replace('|', '/')} |")
    if report.blind:
        out += ["", f"**Blind**: {tx.blind_note(report.lines).removeprefix('blind: ')}"]
    if report.sweep_findings:
        out += ["", "**Fabric sweep**: " + "; ".join(f"{f.kind} {f.subject}"
                                                    for f in report.sweep_findings)]
    if report.slow_links:
        out += ["", "**PCIe links below their maximum**: "
                + "; ".join(link.render() for link in report.slow_links)]
    if report.changes:
        out += ["", f"**Changed since run {report.baseline_id}**: "
                + "; ".join(c.render() for c in report.changes)]
    if html_name:
        out += ["", f"Full report: `{html_name}`"]
    return "\n".join(out) + "\n"


def write(conn: psycopg.Connection, run_id: int, path: Path, baseline_id: int | None = None,
          markdown: Path | None = None) -> Report:
    """Build and write the report (and the Markdown summary); atomically, so a reader never
    opens half a file."""
    report = build(conn, run_id, baseline_id)
    _atomic_write(path, render_html(report))
    if markdown is not None:
        _atomic_write(markdown, render_markdown(report, path.name))
    return report


def _atomic_write(path: Path, text: str) -> None:
    """Written beside its place and renamed onto it; a place that cannot be written is
    said as such (not an internal error): which path, why, and what to do."""
    from perfguard.errors import UsageError

    partial = path.with_name(f".{path.name}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)  # never half a file left behind
        raise UsageError(f"cannot write the report to {path}: {exc.strerror or exc} (choose "
                         f"a writable path with -o, or fix the directory's permissions)") \
            from None


def default_path(state: Path, run_id: int) -> Path:
    """Where a run's report lives: beside the ReFrame reports of the state directory."""
    return state / "reports" / f"run-{run_id}.html"


def write_for_run(state: Path, dsn: str, run_id: int, baseline_id: int | None = None) -> Path:
    """The run's HTML report and Markdown summary at their default places."""
    path = default_path(state, run_id)
    with db.connect(dsn) as conn:
        write(conn, run_id, path, baseline_id, path.with_suffix(".md"))
    return path


def copy_junit(report: Report, target: Path) -> None:
    """The run's JUnit XML (written by ReFrame beside its JSON report) to ``target``, with
    one more test suite, ``perfguard``, whose one test case is the run's outcome: a CI
    that shows JUnit shows a run that failed or measured nothing as a failure, though
    ReFrame counted its skipped tests as no failure."""
    import xml.etree.ElementTree as ET

    from perfguard.errors import PerfguardError

    source = Path(report.run.get("report_path") or "").with_suffix(".xml")
    if not source.is_file():
        raise PerfguardError(f"run {report.run['id']} has no JUnit results ({source} is "
                             f"missing: runs stored before perfguard asked ReFrame for them)")
    try:
        tree = ET.fromstring(source.read_text(encoding="utf-8"))
    except ET.ParseError as exc:
        raise PerfguardError(f"{source}: not JUnit XML ({exc})") from None
    outcome = report.outcome
    suite = ET.SubElement(tree, "testsuite", name="perfguard", tests="1",
                          failures="0" if outcome.outcome == vd.OUTCOME_PASS else "1",
                          errors="0", skipped="0")
    case = ET.SubElement(suite, "testcase", classname="perfguard",
                         name=f"run {report.run['id']} outcome")
    if outcome.outcome != vd.OUTCOME_PASS:
        ET.SubElement(case, "failure", type=outcome.outcome, message=outcome.why)
    paged = [f for f in report.findings if f["paged"]]
    for finding in paged:  # one failing test case per paged finding, named by its cause
        found = ET.SubElement(suite, "testcase", classname="perfguard.findings",
                              name=finding["subject"])
        ET.SubElement(found, "failure", type="finding", message=finding["summary"])
    suite.set("tests", str(1 + len(paged)))
    suite.set("failures", str(int(outcome.outcome != vd.OUTCOME_PASS) + len(paged)))
    _atomic_write(target, ET.tostring(tree, encoding="unicode", xml_declaration=True))
