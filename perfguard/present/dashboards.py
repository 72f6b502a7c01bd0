"""The Grafana dashboard as code, and its SQL expanded the way Grafana's PostgreSQL data
source does.

``trends()`` builds dashboards/json/perfguard-trends.json with grafana-foundation-sdk
(Grafana's own schema, as Python builders) from the queries in dashboards/sql/*.sql;
``python -m perfguard.present.dashboards`` writes it, and a test holds the shipped file
equal to what it builds. Grafana reads dashboards/json through provisioning; the tests
run every panel's query (``queries``) against the real database, as does the dashboard
benchmark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from perfguard.paths import DASHBOARDS_DIR

DASHBOARD_DIR = DASHBOARDS_DIR / "json"
SQL_DIR = DASHBOARDS_DIR / "sql"
TRENDS = DASHBOARD_DIR / "perfguard-trends.json"
DATASOURCE_UID = "perfguard-pg"
POSTGRES = {"type": "grafana-postgresql-datasource", "uid": DATASOURCE_UID}


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    ref: str
    sql: str


def dashboards(directory: Path = DASHBOARD_DIR) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}


def queries(directory: Path = DASHBOARD_DIR) -> Iterator[Query]:
    """Every panel target, annotation and template variable query."""
    for name, board in dashboards(directory).items():
        for panel in board.get("panels", []):
            for target in panel.get("targets", []):
                yield Query(name, panel["title"], target["refId"], target["rawSql"])
        for annotation in board.get("annotations", {}).get("list", []):
            target = annotation.get("target") or {}
            if "rawSql" in target:
                yield Query(name, f"annotation: {annotation['name']}", "Anno", target["rawSql"])
        for variable in board.get("templating", {}).get("list", []):
            yield Query(name, f"variable: {variable['name']}", "var", variable["query"])


def _quote(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def expand(sql: str, variables: dict[str, str | list[str]], time_from: datetime,
           time_to: datetime) -> str:
    """Grafana's interpolation: time macros, then variables (a multi-value variable
    becomes a quoted, comma-separated list; a single value is inserted as is)."""
    start, end = _quote(time_from.isoformat()), _quote(time_to.isoformat())
    sql = re.sub(r"\$__timeFilter\(([^)]+)\)", rf"\1 BETWEEN {start} AND {end}", sql)
    sql = sql.replace("$__timeFrom()", start).replace("$__timeTo()", end)

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            return match.group(0)
        current = variables[name]
        if isinstance(current, list):
            return ",".join(_quote(v) for v in current)
        return str(current).replace("'", "''")

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, sql)


# --- the dashboard as code -------------------------------------------------------------
def sql(name: str) -> str:
    """The query in dashboards/sql/``name``.sql."""
    return (SQL_DIR / f"{name}.sql").read_text().rstrip("\n")


class SqlQuery:
    """A raw-SQL target of Grafana's PostgreSQL data source (the SDK has no builder for
    it): a builder whose ``build()`` is the query and the query's ``to_json()``."""

    def __init__(self, name: str, ref: str = "A", table: bool = True) -> None:
        self.json = {"refId": ref, "datasource": POSTGRES, "editorMode": "code",
                     "format": "table" if table else "time_series", "rawQuery": True,
                     "rawSql": sql(name)}

    def build(self) -> SqlQuery:
        return self

    def to_json(self) -> dict:
        return self.json


#: The template variables: name, and whether several values (and All) may be chosen.
VARIABLES = (("system", False), ("partition", True), ("check", False), ("metric", False),
             ("variant", False), ("node", True), ("run", False))
#: The annotations: name, colour, query.
ANNOTATIONS = (("Environment changes (fingerprints)", "orange", "annotation_fingerprint_changes"),
               ("Change points (E-Divisive)", "red", "annotation_change_points"),
               ("Triage (accepted levels, acknowledgements)", "blue", "annotation_triage"))
#: The verdict's states as the tables colour them.
STATE_COLOURS = (("fail", "red"), ("regression", "red"), ("test-failed", "dark-red"),
                 ("improvement", "green"), ("inconclusive", "yellow"), ("aborted", "orange"),
                 ("disturbed", "light-orange"),
                 ("no-reference", "blue"), ("expected-failure", "purple"), ("skipped", "gray"))
BLIND_DESCRIPTION = (
    "Lines too noisy to tell a change of 25 % from noise (their baseline's noise × 1.8 σ "
    "exceeds 25 %), per run of $system: a fault of that size on them would not be seen. "
    "The verdict and the report name them and for how many nights each has been blind "
    "(verdict_line.blind_nights); docs/verdicts.md says what makes them see again.")
TREND_DESCRIPTION = (
    "Lines: each variant's nightly median of its passed runs (key_figure_night, the rollup "
    "that stays when `perfguard db prune` drops old months of samples). Green band: the "
    "line's threshold (acceptance floor), or where it has none the check's own reference "
    "(its limits as the check declares them). Blue band: the history baseline's noise "
    "band at each run (median ± k·σ or the minimum change; a run outside it is 'beyond'). "
    "Red points: fail, regression or test-failed; green points: improvement. States are "
    "the ones perfguard stored when it judged the run (verdict_line).")


def trends() -> dict:
    """perfguard-trends.json as Grafana's schema has it (the SDK is a build dependency:
    ``pip install '.[test]'``)."""
    from grafana_foundation_sdk.builders import dashboard as board
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import dashboard as model

    built = (board.Dashboard("perfguard trends").uid("perfguard-trends")
             .tags(["perfguard", "hpc"]).timezone("utc").readonly().time("now-90d", "now"))
    source = model.DataSourceRef(type_val=POSTGRES["type"], uid=DATASOURCE_UID)
    for name, several in VARIABLES:
        built.with_variable(
            board.QueryVariable(name).label(name).datasource(source)
            .query(sql(f"variable_{name}")).refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC).multi(several).include_all(several))
    for name, colour, query in ANNOTATIONS:
        built.annotation(board.AnnotationQuery().name(name).datasource(source).enable(True)
                         .icon_color(colour).target(SqlQuery(query, "Anno")))
    for panel in _panels(source):
        built.with_panel(panel)
    return json.loads(json.dumps(built.build(), cls=JSONEncoder))


def _panels(source: object) -> list:
    from grafana_foundation_sdk.builders import common, stat, table, timeseries, xychart
    from grafana_foundation_sdk.builders import dashboard as board
    from grafana_foundation_sdk.models import common as shared
    from grafana_foundation_sdk.models import dashboard as model
    from grafana_foundation_sdk.models import xychart as xy
    # a column of shares (0.05) shown as a percent with one decimal (5.0%)
    percent = [model.DynamicConfigValue("unit", "percentunit"),
               model.DynamicConfigValue("decimals", 1)]

    def at(x: int, y: int, w: int, h: int) -> model.GridPos:
        return model.GridPos(x=x, y=y, w=w, h=h)

    def colour(name: str) -> model.DynamicConfigValue:
        return model.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": name})

    def band(low: str, high: str, name: str, *extra: model.DynamicConfigValue) -> list:
        return [(low, [model.DynamicConfigValue("custom.fillBelowTo", high), colour(name),
                       model.DynamicConfigValue("custom.lineWidth", 0), *extra]),
                (high, [model.DynamicConfigValue("custom.lineWidth", 0), colour(name)])]

    def points(name: str, fill: str) -> tuple:
        return (name, [model.DynamicConfigValue("custom.drawStyle", "points"),
                       model.DynamicConfigValue("custom.pointSize", 10), colour(fill)])

    def matrix(rows: str, columns: str, values: str) -> model.DataTransformerConfig:
        return model.DataTransformerConfig(id_val="groupingToMatrix", options={
            "rowField": rows, "columnField": columns, "valueField": values})

    def a_table(panel_id: int, title: str, query: str, place: model.GridPos) -> table.Panel:
        return (table.Panel().id(panel_id).title(title).datasource(source).grid_pos(place)
                .with_target(SqlQuery(query)))

    dashed = model.DynamicConfigValue("custom.lineStyle", {"fill": "dash", "dash": [4, 4]})
    trend = (timeseries.Panel().id(1).datasource(source).grid_pos(at(0, 0, 24, 10))
             .title("$check $metric over time: threshold band, history band, failures and "
                    "regressions").description(TREND_DESCRIPTION).line_width(2))
    for ref, query in zip("ABCDE", ("trend_nightly_median", "trend_threshold_band",
                                    "trend_failed", "trend_history_band", "trend_improved")):
        trend.with_target(SqlQuery(query, ref, table=False))
    for name, properties in [*band("lower_limit", "upper_limit", "green"),
                             points("failed", "red"),
                             *band("history_low", "history_high", "blue", dashed),
                             points("improved", "green")]:
        trend.override_by_name(name, properties)
    run_links = [{"title": f"{what} of run ${{__value.raw}}",
                  "url": "/d/perfguard-trends/perfguard-trends?var-system=${system}"
                         f"&var-run=${{__value.raw}}&viewPanel={panel}"}
                 for what, panel in (("failing test cases", 6), ("verdict", 7))]
    states = {state: {"color": name, "index": index}
              for index, (state, name) in enumerate(STATE_COLOURS)}
    return [
        trend,
        xychart.Panel().id(2).datasource(source).grid_pos(at(0, 10, 12, 10))
        .title("$check $variant: $metric by message size, latest vs previous run vs reference")
        .with_target(SqlQuery("curve_by_size")).series_mapping(xy.SeriesMapping.AUTO)
        .dims(xychart.XYDimensionConfig().x("size")).axis_label("")
        .legend(common.VizLegendOptions().show_legend(True)
                .display_mode(shared.LegendDisplayMode.LIST)
                .placement(shared.LegendPlacement.BOTTOM))
        .scale_distribution(common.ScaleDistributionConfig().type(shared.ScaleDistribution.LOG)
                            .log(2)),
        a_table(3, "Himeno scaling (latest run)", "himeno_scaling", at(12, 10, 12, 10)),
        a_table(4, "Last nightly: node × metric (value / reference)", "last_nightly_matrix",
                at(0, 20, 12, 10))
        .with_transformation(matrix("node", "metric", "ratio_to_reference"))
        .color_scheme(board.FieldColor().mode(model.FieldColorModeId.CONTINUOUS_RD_YL_GR))
        .min(0.5).max(1.5)
        .override_by_regexp(".*", [model.DynamicConfigValue("custom.cellOptions",
                                                            {"type": "color-background"})]),
        a_table(5, "Run history", "run_history", at(12, 20, 12, 10))
        .override_by_name("run", [model.DynamicConfigValue("links", run_links)]),
        stat.Panel().id(11).title("Blind lines (too noisy to judge)").datasource(source)
        .grid_pos(at(0, 30, 6, 8)).description(BLIND_DESCRIPTION)
        .with_target(SqlQuery("blind_lines", table=False))
        .graph_mode(shared.BigValueGraphMode.AREA)
        .color_mode(shared.BigValueColorMode.VALUE)
        .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]))
        .thresholds(board.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps([
            model.Threshold(value=None, color="green"),
            model.Threshold(value=1, color="orange")])),
        a_table(10, "Findings of run $run: what pages, by cause", "findings_of_run",
                at(6, 30, 18, 8))
        .description("What pages and why, as stored when the run was judged. change = the "
                     "median of how far the finding's lines moved, each against its own "
                     "baseline, negative = worse.")
        .override_by_name("change", percent),
        a_table(6, "Failing test cases of run $run", "failing_testcases_of_run",
                at(0, 38, 24, 8))
        .description("The test cases that failed as a test (phase, reason), or with a key "
                     "figure off its threshold in the run's recorded verdict, as the Run "
                     "history counts them; a run never judged shows its failed tests only."),
        a_table(7, "Verdict of run $run: every line that is not a plain pass",
                "verdict_of_run", at(0, 46, 24, 10))
        .description("What `perfguard verdict RUN` prints, as stored when the run was judged: "
                     "the worst first. baseline = median of the series' history, change = "
                     "against it.")
        .override_by_name("change", percent)
        .override_by_name("status", [
            model.DynamicConfigValue("custom.cellOptions", {"type": "color-background"}),
            model.DynamicConfigValue("mappings", [{"type": "value", "options": states}])]),
        a_table(8, "Fabric sweep: $metric node × node (latest sweep)", "sweep_matrix",
                at(0, 56, 12, 10))
        .description("`perfguard sweep`: each cell is the pair's value (rows: HCA and "
                     "server, columns: client; the diagonal is the node's loopback). "
                     "Retests are not shown here; the findings panel says what they "
                     "confirmed.")
        .with_transformation(matrix("server", "client", "value")),
        a_table(9, "Fabric sweep findings", "sweep_findings", at(12, 56, 12, 10))
        .description("What `perfguard sweep` blamed (node, HCA or link), with its evidence, "
                     "and whether it drained the node."),
        a_table(12, "Cost of runs: node-hours and queue wait", "run_cost", at(0, 66, 12, 10))
        .description("Each run's Slurm jobs as accounting saw them: node-hours = elapsed × "
                     "allocated nodes, queue wait = start − submit (summed, and the "
                     "longest), in seconds. Runs whose jobs accounting did not have are "
                     "not listed."),
        a_table(13, "Node coverage: days since each node was measured", "node_coverage",
                at(12, 66, 12, 10))
        .description("When a per-node check (the sweep's loopbacks: `perfguard nightly "
                     "--budget`, `perfguard sweep`) and any check last measured each node, "
                     "the oldest first; `perfguard nodes` prints the same. A node never "
                     "measured by a per-node check has no age.")
        .override_by_name("per_node_age_days", [
            model.DynamicConfigValue("custom.cellOptions", {"type": "color-background"}),
            model.DynamicConfigValue("thresholds", {"mode": "absolute", "steps": [
                {"value": None, "color": "green"}, {"value": 7, "color": "red"}]})]),
    ]


if __name__ == "__main__":
    TRENDS.write_text(json.dumps(trends(), indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {TRENDS}")
