"""Run: ReFrame invoked with the site's configuration and the test library, in a run
directory of its own; what it leaves is a report (STATE/reports)."""
