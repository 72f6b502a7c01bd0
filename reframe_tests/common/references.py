"""Thresholds from perfguard's PostgreSQL become ReFrame references.

Each test asks the database's ``matching_threshold()`` — the one rule the verdict and
the dashboards use — for its scope, over one connection per session, so ReFrame
itself fails a test that misses one. When the database cannot be reached the run
goes on without references (said once); `perfguard verdict` compares afterwards.
"""

from __future__ import annotations

import functools
import os

import reframe as rfm
from reframe.core.builtins import run_before
from reframe.core.logging import getlogger

from perfguard.judge import thresholds


@functools.cache
def _connection():
    """The session's connection, or None (said once) when there is no database."""
    dsn = os.environ.get("PERFGUARD_DSN")
    if not dsn:
        getlogger().warning("perfguard: PERFGUARD_DSN is not set; running without "
                            "database references (`perfguard verdict` compares later)")
        return None
    try:
        import psycopg

        return psycopg.connect(dsn, connect_timeout=5, autocommit=True)
    except Exception as exc:  # noqa: BLE001 - any failure means: run on without references
        getlogger().warning(f"perfguard: thresholds database unreachable ({exc}); running "
                            f"without references, `perfguard verdict` will compare later")
        return None


def thresholds_for(system: str, check: str, params: dict[str, str], partition: str,
                   environ: str, metrics: list[str]) -> dict[str, thresholds.Threshold]:
    conn = _connection()
    if conn is None or not metrics:
        return {}
    try:
        return thresholds.matching(conn, system, check, params, partition, environ, metrics)
    except Exception as exc:  # noqa: BLE001 - the database went away mid-run
        getlogger().warning(f"perfguard: no references for {check} ({exc}); "
                            f"`perfguard verdict` will compare later")
        return {}


class DatabaseReferences(rfm.RegressionTestPlugin):
    """Fills ``reference`` from the database for the test's system, partition and variant."""

    @run_before("performance")
    def load_database_references(self):
        """Before the performance stage: the check has chosen its perf variables by now,
        so only figures it really reports can lack a reference."""
        system, partition = self.current_system.name, self.current_partition.name
        params = {name: str(getattr(self, name)) for name in type(self).param_space.params}
        metrics = sorted(getattr(self, "perf_variables", {}))
        found = thresholds_for(system, type(self).__name__, params, partition,
                               self.current_environ.name, metrics)
        self.reference = {f"{system}:{partition}": {
            metric: t.as_reframe() for metric, t in found.items()}}
        missing = sorted(set(metrics) - set(found))
        if missing:
            getlogger().info(f"perfguard: {self.display_name}: no reference for "
                             f"{', '.join(missing)}")
