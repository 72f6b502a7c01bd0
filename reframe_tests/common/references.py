"""Thresholds become ReFrame references, so ReFrame itself fails a test that misses one.

`perfguard run` writes the system's thresholds in force to a file before ReFrame starts
(perfguard.contract.references); each test picks its own from it. Without the file (the
database was down, or reframe was started by hand) the run goes on without references,
said once; `perfguard verdict` compares afterwards.
"""

from __future__ import annotations

import functools

import reframe as rfm
from reframe.core.builtins import run_before
from reframe.core.logging import getlogger

from perfguard.contract import References, run_references


@functools.cache
def _references() -> References:
    """The run's references, read once per session; their absence is said once."""
    found = run_references()
    if found.unavailable:
        getlogger().warning(f"perfguard: running without references: {found.unavailable}; "
                            f"`perfguard verdict` compares later")
    return found


class DatabaseReferences(rfm.RegressionTestPlugin):
    """Fills ``reference`` for the test's system, partition and variant."""

    @run_before("performance")
    def load_database_references(self):
        """Before the performance stage: the check has chosen its perf variables by now,
        so only figures it really reports can lack a reference. A dry run measures nothing
        and needs none."""
        if self.is_dry_run():
            return
        system, partition = self.current_system.name, self.current_partition.name
        params = {name: str(getattr(self, name)) for name in type(self).param_space.params}
        metrics = sorted(getattr(self, "perf_variables", {}))
        found = _references().for_test(type(self).__name__, params, partition,
                                       self.current_environ.name, metrics)
        self.reference = {f"{system}:{partition}": found}
        missing = sorted(set(metrics) - set(found))
        if missing:
            getlogger().info(f"perfguard: {self.display_name}: no reference for "
                             f"{', '.join(missing)}")
