"""What the CLI prints and the nightly mails, as text: the verdict table and one line's
explanation, the findings block, fingerprint changes and slow links, the fabric sweep's
matrices and blame. The judge decides; this says it (the HTML report says it again in
present/htmlreport.py, from the same helpers)."""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path
from typing import Any

from perfguard.judge import rules as judge
from perfguard.judge.findings import DEFAULT_POLICY, signed_percent
from perfguard.judge.fingerprint import Change, SlowLink, compact_nodes, natural_key
from perfguard.judge.sweep import BETTER, DRAIN_MARK, Finding, Measurement, Sweep
from perfguard.judge.verdict import (
    OUTCOME_PASS,
    WITHOUT_FIGURE,
    Line,
    RunOutcome,
    line_name,
    measured_counts,
    variant_name,
    without_figure,
)
from perfguard.states import (
    ABORTED,
    DISTURBED,
    EXPECTED_FAILURE,
    FAIL,
    FAILING,
    NO_REFERENCE,
    PASS,
    SKIPPED,
)


def key_point_text(line: Line) -> str:
    """' (the size 4 MiB point of its curve)' for a key figure taken from a curve."""
    if not line.key_point:
        return ""
    point = ", ".join(f"{k} {size_text(v) if k == 'size' else v}"
                      for k, v in line.key_point.items())
    return f" (the {point} point of its curve)"

def size_text(value: Any) -> str:
    size = int(value)
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"

def plain(value: float | None) -> str:
    """A figure as an admin reads it: 22,200 and 0.304, never 2.22e+04."""
    if value is None:
        return "-"
    if value != value or abs(value) in (0.0, float("inf")):
        return f"{value:g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 0.001:
        return f"{value:.4g}" if abs(value) >= 1 else f"{value:.4f}".rstrip("0").rstrip(".")
    return f"{value:.2e}"

#: The verdict table fits a 120-column terminal; `--explain` gives the full names.
TABLE_WIDTH = 120
#: Wrapped text breaks between words only: a path, a module name or a node list is never
#: cut at its hyphens (`modules-test/prefix` read back as "modules- test/prefix").
WHOLE_WORDS = {"break_on_hyphens": False, "break_long_words": False}

def skip_notes(lines: list[Line]) -> dict[str, tuple[int, str]]:
    """Skip reason → (note number, the note): each reason said once under the table, not
    on every line it skipped. Reasons that differ only in their first word (the program
    or shape they name: "osu_bw is not on PATH on node1 …") share one note that lists
    those words."""
    subjects: dict[str, dict[str, None]] = {}
    for line in lines:
        if line.status == SKIPPED and line.detail.strip():
            subject, _, rest = line.detail.strip().partition(" ")
            subjects.setdefault(rest, {})[subject] = None
    notes: dict[str, tuple[int, str]] = {}
    for number, (rest, words) in enumerate(subjects.items(), start=1):
        note = f"{', '.join(words)} {rest}"
        for word in words:
            notes[f"{word} {rest}"] = (number, note)
    return notes

def verdict_cell(line: Line) -> str:
    """The state and why: a test case that did not run to a figure ("test-failed: node
    node2 failed (NODE_FAIL)", "skipped: needs 8 nodes, …"), a line not yet judged."""
    state = line.status + (f" (blind {line.blind_nights} night"
                           f"{'s' if line.blind_nights != 1 else ''})"
                           if line.blind_nights else "")
    if not line.detail.strip() or (line.status in (FAIL, NO_REFERENCE)):
        return state
    if line.status == PASS and not line.detail.startswith(judge.NOT_YET) \
            and not line.blind_nights:
        return state
    why = line.detail.strip().splitlines()[0].removeprefix("sanity error: ")
    why = why.split(" (the last ")[0]  # "not yet judged: history 2 of 8 runs"
    return f"{state}: {why}"


def blind_reason(line: Line) -> str:
    """The part of a blind line's reason that says so ("blind for 12 nights: …")."""
    found = line.detail.find("blind for ")
    return line.detail[found:] if found >= 0 else line.detail


def blind_note(lines: list[Line]) -> str:
    """What the verdict says under its table when lines are blind: how many, the longest."""
    blind = [line.blind_nights for line in lines if line.blind_nights]
    if not blind:
        return ""
    return (f"blind: {len(blind)} line(s) too noisy to tell a change of 25 % from noise, "
            f"the longest for {max(blind)} night(s) in a row (--explain says why)")

def fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"

def verdict_table(lines: list[Line], show_baseline: bool = False) -> str:
    """The verdict as a table of at most TABLE_WIDTH columns: one heading per variant and
    where it ran, its metrics below (long names shortened with …, a long verdict wrapped
    in its column)."""
    header = ["  metric", "value", "unit", "reference", "bounds", "verdict"]
    if show_baseline:
        header[3:3] = ["baseline", "change"]
    groups: dict[tuple, list[list[str]]] = {}
    notes = skip_notes(lines)
    for line in lines:
        name = variant_name(line.check, line.params)
        bounds = "-" if line.low is None and line.high is None else \
            f"[{plain(line.low)}, {plain(line.high)}]"
        metric = name_of(line).removeprefix(name + " ")
        note = notes.get(line.detail.strip()) if line.status == SKIPPED else None
        row = ["  " + metric, plain(line.value), line.unit, plain(line.reference), bounds,
               f"{SKIPPED} [{note[0]}]" if note else verdict_cell(line)]
        if show_baseline:
            change = "-" if line.change is None else f"{line.change:+.1%}"
            row[3:3] = [plain(line.baseline), change]
        where = f"{line.partition}/{line.environ}" + (
            f" on {compact_nodes(line.nodes)}"
            if line.nodes else "")
        groups.setdefault((name, where), []).append(row)
    rows = [header] + [row for group in groups.values() for row in group]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    widths[0] = min(widths[0], 40)
    used = sum(widths[:-1]) + 2 * (len(widths) - 1)
    last = max(TABLE_WIDTH - used, 12)

    def formatted(row: list[str]) -> str:
        """The row; a verdict longer than its column goes on below it, never cut: a
        failure's reason ends with the rank, node and signal that explain it."""
        lead = "  ".join([fit(c, w).ljust(w) for c, w in zip(row[:-1], widths)] + [""])
        said = textwrap.wrap(row[-1], last, **WHOLE_WORDS) or [""]
        return "\n".join([(lead + said[0]).rstrip()] + [" " * len(lead) + more
                                                        for more in said[1:]])

    text = [formatted(header)]
    for (name, where), group in groups.items():
        text.append(fit(f"{name}  ({where})", TABLE_WIDTH))
        text += [formatted(row) for row in group]
    notes = dict(skip_notes(lines).values())
    said = [textwrap.fill(f"[{n}] {note}", TABLE_WIDTH, subsequent_indent="    ", **WHOLE_WORDS)
            for n, note in sorted(notes.items())]
    blind = blind_note(lines)
    counted = textwrap.fill(f"verdict: {summary(lines)}", TABLE_WIDTH, subsequent_indent="    ")
    return "\n".join(text + ([""] + said if said else []) + ["", counted]
                     + ([blind] if blind else []))


def summary(lines: list[Line]) -> str:
    """The counts under the table (judge.verdict.measured_counts): a test case that passed
    without a figure (a fixture such as SpackStack, a sanity check) is counted apart and
    named, so a run that measured nothing never reads "1 pass"."""
    found = measured_counts(lines)
    bare = found.pop(WITHOUT_FIGURE)
    said = ", ".join(f"{n} {s}" for s, n in found.items() if n or s in FAILING)
    if bare:
        names = ", ".join(dict.fromkeys(line.check for line in lines if without_figure(line)))
        said += f"; {bare} {WITHOUT_FIGURE} ({names})"
    return said

#: The run line's word for a run that passed without one figure judged (a first night).
NOTHING_JUDGED = "NOTHING-JUDGED"


def unjudged(lines: list[Line]) -> dict[str, int]:
    """Why each figure of a run that passed was not judged ('not yet judged: history 0
    of 8 runs', 'no-reference', 'disturbed'), with how many; empty where one figure was
    judged (against a threshold or its history) or the run measured no figure at all (a
    run of sanity checks: its pass is a judgement)."""
    figures = [line for line in lines if line.metric != "-"
               and line.status not in (SKIPPED, ABORTED)]
    why: dict[str, int] = {}
    for line in figures:
        if line.detail.startswith(judge.NOT_YET):
            reason = line.detail.split(" (the last ")[0]
        elif line.status in (NO_REFERENCE, DISTURBED, EXPECTED_FAILURE):
            reason = line.status
        else:
            return {}
        why[reason] = why.get(reason, 0) + 1
    return why


def run_line(outcome: RunOutcome, run_id: int, lines: list[Line]) -> str:
    """``run N: PASS (why)``, the last line `run`, `nightly`, `verdict` and `report` print;
    a run that passed with no figure judged (every line learning its history, without a
    reference, or disturbed) says so instead of PASS: nothing was compared with anything.
    Its exit code stays the pass's (0): a first night is no failure."""
    why = unjudged(lines) if outcome.outcome == OUTCOME_PASS else {}
    if not why:
        return outcome.line(run_id)
    said = ", ".join(f"{n} {reason}" for reason, n in why.items())
    return f"run {run_id}: {NOTHING_JUDGED} (no figure judged yet: {said}; {outcome.why})"


def name_of(line: Line) -> str:
    """``Check %p=v … metric @size=…``: how a line is named in the table and --explain."""
    point = "" if not line.point else " @" + ",".join(f"{k}={v}" for k, v in line.point.items())
    return line_name(line.check, line.params, line.metric) + point

def run_mark(value: float, index: int, j: judge.Judgement, better: str,
             rule: judge.Rule) -> str:
    """One recent run as the judge saw it: within the band, or beyond it on its side, and
    whether it counted towards the decision (beyond on the judged run's side, agreeing)."""
    side = judge.side(value, j.centre, j.noise, better, rule)
    if side == 0:
        return "within"
    where = "beyond, worse" if side < 0 else "beyond, better"
    return where + (", counted" if index in j.beyond else ", not counted")

def explain(line: Line, stored: Line | None = None, run_id: int | None = None) -> str:
    """The history, the noise estimate, the rule and the decision behind one line; where
    the decision ``stored`` for the run differs, it is the decision and this one is what
    judging now would say."""
    rule = line.judgement.rule if line.judgement else judge.DEFAULT_RULE
    out = [f"{name_of(line)} on {line.partition}/{line.environ}: "
           f"{(stored or line).status}"]
    if line.key_point:
        out.append(f"  key figure: {plain(line.value)} {line.unit}{key_point_text(line)}")
    out.append("  better: " + (f"{line.better}" + (f" ({line.better_from})"
                                                   if line.better_from else "")
                               if line.better else "not declared by the check, its threshold "
                                                   "or its reference"))
    if line.low is not None or line.high is not None:
        what = ("threshold" if line.threshold_id is not None
                else "the check's own reference (no threshold stored)")
        out.append(f"  {what}: reference {plain(line.reference)}, limits "
                   f"[{plain(line.low)}, {plain(line.high)}]"
                   + (" (acceptance floor)" if line.threshold_id is not None else ""))
    if line.metric.endswith(" curve"):  # judged size by size against each size's history
        out.append("  judged as a whole curve, each size against its own history: "
                   "`perfguard report` plots it")
        return "\n".join([*out, f"  decision: {line.status} — {line.detail}"])
    earlier, recent = judge.split(line.series, rule)
    used = earlier[-rule.window:]
    out.append(f"  history: {len(used)} runs before the last {len(recent)} ({rule.min_history} "
               f"needed for a baseline, at most {rule.window} used): "
               + (" ".join(plain(v) for v in used) or "none"))
    j = line.judgement
    if j is not None and j.centre is not None:
        left = len(used) - len(judge.settled(list(used), rule))
        of = (f" of the newest {len(used) - left} (its first {left}: a level it left before "
              f"it was first judged)" if left else "")
        floor = (" or the line's relative noise before the accepted level"
                 if "accepted level" in j.reason else "")
        out.append(f"  baseline: median {plain(j.centre)}{of}, noise σ {plain(j.noise)} "
                   f"(standard deviation of the values within {judge.OUTLIER:g} MAD-σ of "
                   f"the median, at least {rule.min_noise:.1%} of it{floor}; CV {j.cv:.2%})")
        out.append(f"  rule: a run is beyond when {rule.k:g}σ ({plain(rule.k * j.noise)}) and "
                   f"{rule.min_change:.0%} from the median; {rule.needed} of the last "
                   f"{rule.confirm} runs beyond, this one included, and on average "
                   f"{rule.level:g}σ ({plain(rule.level * j.noise)}) off, decide"
                   + (f"; not where {rule.revisits} earlier runs were at that level (half "
                      f"to twice as far out, at least {rule.revisit_floor:g}σ) and came "
                      f"back: a state the line returns to" if rule.revisits else ""))
        out.append("  last runs: " + ", ".join(
            f"{plain(v)} ({run_mark(v, i, j, line.better or 'lower', rule)})"
            for i, v in enumerate(recent)))
    if stored is not None and (stored.status, stored.detail) != (line.status, line.detail):
        out.append(f"  decision: {stored.status}" + (f" — {stored.detail}" if stored.detail
                                                      else "") + " (as stored)")
        out.append(f"  judged now: {line.status}" + (f" — {line.detail}" if line.detail else "")
                   + f" (`perfguard verdict {run_id} --rejudge` stores it)")
        return "\n".join(out)
    out.append(f"  decision: {line.status}" + (f" — {line.detail}" if line.detail else ""))
    return "\n".join(out)

#: The Student-t's degrees of freedom a finding's nights are read through (fixed).
TAIL_DF = DEFAULT_POLICY.tail_df


def explain_finding(finding: Any, judged: int, alpha: float) -> str:
    """``verdict --explain SUBJECT`` for a finding (a findings.Finding judged now): each
    line it was judged on with its evidence, how they combine (every test with its
    number; the evidence is the largest of a worse finding's, the smallest of a better
    one's), the bar and why it pages or not: each number checkable by hand."""
    out = [f"finding {finding.subject} ({finding.kind}): "
           f"{finding_label(finding.paged, finding.acknowledged)}",
           f"  {finding.summary()}",
           f"  lines it is judged on ({len(finding.judged_on)}: every line of its cause, "
           f"moved or not; z: the line's recent nights that agree, each night's distance "
           f"from its baseline in its noise read through a Student-t of {TAIL_DF:g} degrees "
           f"of freedom scaled to unit variance (× √{TAIL_DF / (TAIL_DF - 2):g}) and turned "
           f"into the normal z of the same chance, combined over the nights):"]
    moved = {id(line) for line in finding.lines}
    effects, taken_apart = finding.taken_off()
    for (line, residual), apart in zip(finding.judged_on, taken_apart):
        parts = [f"z {line.z:.2f} over {line.nights} night(s)",
                 "moved " + ("worse" if line.side < 0 else "better" if line.side > 0
                             else "not") + (f" {line.change:+.1%}" if line.change is not None
                                            else ""),
                 "a level by the line rule" if line.confirmed else "no level yet"]
        if residual is not None:
            parts.append(f"in the residuals' test {residual:.2f}")
        if line.far:
            parts.append(f"read with {line.far:.0%} far worse nights")
        mark = "*" if id(line) in moved else " "
        out.append(f"   {mark} {line.name} [{', '.join(line.nodes)}]: {'; '.join(parts)}")
        if apart is not None:
            out.append(f"       {apart.render()}")
        elif effects:  # the night effects were read, but this line has no nightly moves
            out.append("       no nightly moves (a whole curve): its own z, nothing taken off")
    out.append("  (*: the lines that moved, which the finding names)")
    if effects:
        out.append("  night effects taken off its lines before their residuals (relative, "
                   "worse > 0, on each of the run's recent nights, tonight last; z: its "
                   "recent nights that agree with its last, each in its own nights' spread, "
                   "combined; each line's night above is its move = the effects on it + "
                   "what is left, read in the line's noise):")
        tested = " ".join(finding.tests)
        out += [f"    {name}: " + ", ".join(f"{signed_percent(value)} %"
                                          for value in effect.values)
                + f" (its nights' spread {signed_percent(effect.noise, '.1f')} %); "
                + (effect.how or f"z {0.0 if round(effect.z, 2) == 0 else effect.z:.2f}"
                   + (" (its test below)" if f"{name}'s" in tested else ""))
                for name, effect in effects.items()]
    out.append("  evidence: the " + ("largest" if finding.worse else "smallest")
               + " of its tests (each combines z's by Stouffer: their sum over √count):")
    out += [f"    {value:6.2f}  {what}" for what, value in finding.tests.items()]
    bar = statistics.NormalDist().inv_cdf(1 - alpha / judged)
    out.append(f"  bar: z ≥ Φ⁻¹(1 − {alpha:g} / {judged} lines in the run's verdict, measured "
               f"or not) = {bar:.2f}, a night "
               f"of noise pages with chance {alpha:g} however many lines the run has; "
               f"evidence {finding.evidence:.2f}")
    out.append(f"  outcome: {finding.decided}")
    if finding.acknowledged:
        out.append(f"  acknowledged {finding.acknowledged}: shown, not paged")
    return "\n".join(out)


def finding_as_stored(row: dict | None, now: Any) -> str:
    """What the run's stored verdict said of a finding explained as judged now, where
    that differs (a later ack, accept, threshold or rule): the record stays what paged."""
    word = finding_label(now.paged, now.acknowledged)
    if row is None:  # a finding not worth storing then (run_findings.rows) unless it pages now
        return "\n  as stored: no page of it then (judged now only)" if now.paged else ""
    stored = finding_label(row["paged"], row["acknowledged"])
    if stored == word and abs(row["evidence"] - now.evidence) < 0.005:
        return ""
    return (f"\n  as stored: {stored}, evidence z {row['evidence']:.2f} against its bar "
            f"{row['critical']:.2f}; judged now: {word}, evidence z {now.evidence:.2f}")


def finding_only_stored(row: dict, run_id: int) -> str:
    """A finding of the stored verdict that judging now does not find (an ack, accept or
    threshold since; rules changed): as stored."""
    stored = finding_label(row["paged"], row["acknowledged"])
    return (f"finding {row['subject']} ({row['kind']}), as stored: {stored}\n"
            f"  {row['summary']}\n  not a finding as judged now (an ack, accept or threshold "
            f"since, or other rules): `perfguard verdict {run_id}` shows the verdict as "
            f"stored")


def findings(found: list[dict], judged: int, overlay: dict[str, list[str]] | None = None
             ) -> str:
    """The findings block the CLI prints above the verdict table; ``overlay``: what
    changed since the verdict was stored (run_findings.overlay), under its finding."""
    if not found:
        return ""
    bar = found[0]["critical"]
    head = (f"findings ({judged} lines; family-wise: a finding pages at evidence z ≥ "
            f"{bar:.2f} and confirmed over nights or by a fingerprint change):")
    out = [head]
    for f in found:
        out.append(f"  {finding_label(f['paged'], f['acknowledged']):5} "
                   f"{f['summary']}")
        out += [f"        {note}" for note in (overlay or {}).get(f["subject"], [])]
    return "\n".join(out)

def finding_word(finding: dict) -> str:
    """One word for a finding wherever it is shown (CLI, report): page, ack (acknowledged:
    known, being fixed) or watch (shown, not paging)."""
    return "page" if finding["paged"] else "ack" if finding["acknowledged"] else "watch"


def finding_label(paged: bool, acknowledged: str | None) -> str:
    """``finding_word`` as the CLI heads a finding: PAGE in capitals."""
    word = finding_word({"paged": paged, "acknowledged": acknowledged})
    return word.upper() if paged else word

def slow_links(links: list[SlowLink]) -> str:
    """The verdict's paragraph on links below their maximum ('' when there are none)."""
    if not links:
        return ""
    return "PCIe links below their maximum (the nodes' fingerprints):\n" + "\n".join(
        f"  {link.render()}" for link in links)

def fingerprint_changes(changes: list[Change]) -> str:
    if not changes:
        return "no fingerprint changes"
    return "\n".join(change.render() for change in changes)

def sweep(run_id: int, system: str, sweep: Sweep, findings: list[Finding],
           drained: list[str], shape: str = "every pair") -> str:
    """What `perfguard sweep` prints: a bandwidth and a latency matrix per HCA (beyond
    MATRIX_NODES nodes, its best, median and worst pairs), what fails, who is blamed and
    why, and what was drained."""
    nodes = sorted({n for m in sweep.measurements for n in (m.server, m.client)},
                   key=natural_key)
    hcas = sorted({m.hca for m in sweep.measurements})
    retested = len({(hca, pair) for (hca, pair, _), n in sweep.attempts.items() if n > 1})
    out = [f"perfguard sweep on {system}: run {run_id}, {len(nodes)} nodes, {shape}, "
           f"HCA {', '.join(hcas)}; {retested} failing pair(s) retested"]
    for hca in hcas:
        for metric in BETTER:
            out += ["", *(_matrix(sweep, hca, metric, nodes) if len(nodes) <= MATRIX_NODES
                          else _spread(sweep, hca, metric))]
    out.append("")
    out += [aside_line(kind, *note) for kind, note in sorted(sweep.set_aside.items())]
    if not findings:
        out.append("blamed: nobody (every pair within the limits"
                   + (" after retests)" if retested else ")"))
    for f in findings:
        out.append(f"blamed {f.kind} {f.subject} [{f.hca}]: {f.evidence}")
    if drained:
        out.append(f"drained: {', '.join(drained)} (reason starts '{DRAIN_MARK}'; "
                   f"`perfguard sweep --resume` resumes them)")
    return "\n".join(out)

def aside_line(kind: tuple, count: int, share: float, when: str) -> str:
    """Why some pairs were judged without their own history (in_conditions)."""
    hca, metric, loopback = kind
    return (f"{metric} on {hca}: {count} {'loopback' if loopback else 'pair'}(s) judged "
            f"without their own history{when}: the typical one reached {share:.0%} of its "
            f"history's limit (a loaded host, or a change to all of them: the verdicts "
            f"judge that)")

#: Up to this many nodes `perfguard sweep` prints the node × node matrix.
MATRIX_NODES = 16

def _spread(sweep: Sweep, hca: str, metric: str) -> list[str]:
    """One line per kind (loopback, pairs): how many, best, median, worst, how many fail."""
    rows = []
    for loopback in (True, False):
        ms = sorted((m for m in sweep.measurements if m.hca == hca and m.metric == metric
                     and m.loopback == loopback and m.value is not None),
                    key=lambda m: m.value, reverse=BETTER[metric] == "higher")
        if not ms:
            continue
        kind = "loopbacks" if loopback else "pairs"
        bad = sum(1 for m in sweep.failing() if m.hca == hca and m.metric == metric
                  and m.loopback == loopback)
        rows.append(f"{metric} on {hca}, {len(ms)} {kind}: best {_where(ms[0])}, median "
                    f"{ms[len(ms) // 2].value:.4g}, worst {_where(ms[-1])}; {bad} below "
                    f"the limit")
    return rows

def _where(m: Measurement) -> str:
    who = m.server if m.loopback else f"{m.server}–{m.client}"
    return f"{m.value:.4g} {m.unit} ({who})".replace("  ", " ")

def _matrix(sweep: Sweep, hca: str, metric: str, nodes: list[str]) -> list[str]:
    """Server rows, client columns (a pair fills both cells), loopback on the diagonal;
    ``!`` marks a value that misses its limit, ``x`` a failed measurement."""
    cells: dict[tuple[str, str], str] = {}
    unit = ""
    for m in sweep.measurements:
        if m.hca != hca or m.metric != metric:
            continue
        unit = unit or m.unit
        limit = sweep.limit(m)
        text = "x" if m.value is None else f"{m.value:.4g}" + \
            ("!" if limit and limit.misses(m.value) else "")
        cells[(m.server, m.client)] = cells[(m.client, m.server)] = text
    if not cells:
        return []
    width = max(len(n) for n in nodes + list(cells.values())) + 2
    rows = [f"{metric} ({unit}) on {hca}:", " " * width + "".join(n.rjust(width) for n in nodes)]
    rows += [a.ljust(width) + "".join(cells.get((a, b), "-").rjust(width) for b in nodes)
             for a in nodes]
    return rows


def planned_variants(system: str, cases: list, stages: Path) -> str:
    """`perfguard checks`: each variant of a dry run (store.report test cases) and where it
    would run, "runs" or "skipped: why", sorted by name; then the counts."""
    rows = sorted((variant_name(c.check, c.params), f"{c.partition}/{c.environ}",
                   "runs" if c.result != "skip" else
                   f"skipped: {c.fail_reason or 'no reason given'}") for c in cases)
    width = max([len(name) for name, _, _ in rows] + [10])
    where = max([len(w) for _, w, _ in rows] + [5])
    skipped = sum(1 for *_, state in rows if state != "runs")
    lines = [f"{name.ljust(width)}  {place.ljust(where)}  {state}"
             for name, place, state in rows]
    return "\n".join(lines + ["", f"system {system}: {len(rows) - skipped} variant(s) would "
                                   f"run, {skipped} skipped (a dry run, nothing submitted: "
                                   f"the job scripts are under {stages})"])


def duration(seconds: float | None) -> str:
    """A time span as an admin reads it: 42 s, 3.5 min, 2.1 h, 3.2 d."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def cost_line(cost: Any) -> str:
    """A run's cost (judge.coverage.RunCost) in one line; None: accounting not recorded."""
    if cost is None:
        return "cost: not recorded (Slurm accounting had none of the run's jobs)"
    return (f"cost: {cost.node_hours:.3g} node-hours in {cost.jobs} job"
            f"{'s' if cost.jobs != 1 else ''}; queue wait {duration(cost.queue_wait_s)}"
            f" in all, the longest {duration(cost.longest_wait_s)}")


def coverage_table(rows: list, states: dict[str, str], now: Any) -> str:
    """`perfguard nodes`: each node (Slurm's and the measured ones), its Slurm state, how
    long ago a per-node check and any check measured it, its devices and the last run;
    the longest unmeasured first."""
    known = {row.node: row for row in rows}
    names = sorted(set(states) | set(known), key=lambda n: (
        _age_key(known.get(n), now), natural_key(n)))
    out = [f"{'node':<10} {'state':<10} {'per-node check':>15} {'any check':>10}  "
           f"{'run':>5}  devices"]
    for name in names:
        row = known.get(name)
        per_node = _ago(row.last_per_node_at if row else None, now)
        anything = _ago(row.last_measured_at if row else None, now)
        run = str(row.last_run_id) if row and row.last_run_id else "-"
        devices = ", ".join(row.devices) if row and row.devices else "-"
        out.append(f"{name:<10} {states.get(name, 'unknown'):<10} {per_node:>15} "
                   f"{anything:>10}  {run:>5}  {devices}")
    never = sum(1 for n in names if known.get(n) is None or known[n].last_per_node_at is None)
    out.append(f"{len(names)} nodes; {never} never measured by a per-node check")
    return "\n".join(out)


def _ago(when: Any, now: Any) -> str:
    return "never" if when is None else f"{duration((now - when).total_seconds())} ago"


def _age_key(row: Any, now: Any) -> tuple:
    """Never measured first, then the oldest per-node measurement."""
    when = row.last_per_node_at if row else None
    return (when is not None, (now - when).total_seconds() * -1 if when else 0)
