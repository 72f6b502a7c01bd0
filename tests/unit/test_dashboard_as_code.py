"""The shipped Grafana dashboard is what perfguard.present.dashboards builds with
grafana-foundation-sdk from dashboards/sql/*.sql: edit the builder or a query, then
`python -m perfguard.present.dashboards` (docs/grafana.md)."""

from __future__ import annotations

import json

from perfguard.present import dashboards


def test_the_shipped_dashboard_is_the_built_one() -> None:
    assert json.loads(dashboards.TRENDS.read_text()) == dashboards.trends()


def test_every_query_file_is_used_and_every_query_comes_from_one() -> None:
    files = {path.read_text().rstrip("\n") for path in dashboards.SQL_DIR.glob("*.sql")}
    used = {query.sql for query in dashboards.queries()}
    assert used == files
