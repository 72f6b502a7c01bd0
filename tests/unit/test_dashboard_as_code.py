"""The shipped Grafana dashboard is what perfguard.present.dashboards builds with
grafana-foundation-sdk from dashboards/sql/*.sql: edit the builder or a query, then
`python -m perfguard.present.dashboards` (docs/grafana.md)."""

from __future__ import annotations

import json
from pathlib import Path

from perfguard.present import dashboards


def test_the_shipped_dashboard_is_the_built_one() -> None:
    assert json.loads(dashboards.TRENDS.read_text()) == dashboards.trends()


def test_every_query_file_is_used_and_every_query_comes_from_one() -> None:
    files = {path.read_text().rstrip("\n") for path in dashboards.SQL_DIR.glob("*.sql")}
    used = {query.sql for query in dashboards.queries()}
    assert used == files


def test_the_green_band_is_named_for_what_its_query_reads() -> None:
    """The band's limits are key_verdict's, a threshold's or else the check's own
    reference's: called "the threshold (acceptance floor)" alone, a check's own reference
    read as a floor someone set (issue 67)."""
    band = (dashboards.SQL_DIR / "trend_threshold_band.sql").read_text()
    view = (Path(__file__).resolve().parents[2] / "perfguard" / "store" / "db"
            / "repeatable" / "40_series.sql").read_text()
    assert "FROM key_verdict" in band
    assert "coalesce(th.lower_limit, own.lower_limit) AS lower_limit" in view
    assert "or where it has none the check's own reference" in dashboards.TREND_DESCRIPTION
