"""Present: the HTML report, its plots, Grafana dashboards."""
