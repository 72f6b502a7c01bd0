"""Thresholds from perfguard's PostgreSQL become ReFrame references.

One query per session and system (cached); each test picks the most specific
thresholds of its scope, so ReFrame itself fails a test that misses one. When
the database cannot be reached the run goes on without references (said once);
`perfguard verdict` compares against the database afterwards.
"""

from __future__ import annotations

import functools
import os

import reframe as rfm
from reframe.core.builtins import run_before
from reframe.core.logging import getlogger

from perfguard import thresholds


@functools.cache
def thresholds_for(system: str) -> tuple[thresholds.Threshold, ...]:
    dsn = os.environ.get("PERFGUARD_DSN")
    if not dsn:
        getlogger().warning("perfguard: PERFGUARD_DSN is not set; running without "
                            "database references (`perfguard verdict` compares later)")
        return ()
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=5) as conn:
            return tuple(thresholds.current(conn, system))
    except Exception as exc:  # noqa: BLE001 - any failure means: run on without references
        getlogger().warning(f"perfguard: thresholds database unreachable ({exc}); running "
                            f"without references, `perfguard verdict` will compare later")
        return ()


class DatabaseReferences(rfm.RegressionTestPlugin):
    """Fills ``reference`` from the database for the test's system, partition and variant."""

    @run_before("performance")
    def load_database_references(self):
        """Before the performance stage: the check has chosen its perf variables by now,
        so only figures it really reports can lack a reference."""
        system, partition = self.current_system.name, self.current_partition.name
        params = {name: str(getattr(self, name)) for name in type(self).param_space.params}
        found = thresholds.most_specific(thresholds_for(system), type(self).__name__, params,
                                         partition, self.current_environ.name)
        self.reference = {f"{system}:{partition}": {
            metric: t.as_reframe() for metric, t in found.items()}}
        missing = sorted(set(getattr(self, "perf_variables", {})) - set(found))
        if missing:
            getlogger().info(f"perfguard: {self.display_name}: no reference for "
                             f"{', '.join(missing)}")
