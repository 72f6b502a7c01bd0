"""Every measured point of a check, carried to the database through the run report.

ReFrame perf variables hold a check's key figures; whole curves and sweeps go into
``perfguard_samples``, a check variable that ReFrame writes into the report, where
`perfguard ingest` reads it. A series is columnar (see perfguard.report.Series):
one entry per curve, coordinates and values as lists.
"""

from __future__ import annotations

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, variable
from reframe.core.exceptions import SanityError


class RecordsSamples(rfm.RegressionTestPlugin):
    #: [{"metric": ..., "unit": ..., "coords": {name: [..] or scalar}, "values": [..]}]
    perfguard_samples = variable(typ.List[typ.Dict[str, object]], value=[])
    #: Which way each metric is better, declared where the metric is defined (the check):
    #: {"latency": "lower", "bandwidth": "higher"}. Verdicts never guess it from a unit.
    perfguard_better = variable(typ.Dict[str, str], value={})

    def record_series(self, metric: str, unit: str, values: list[float], **coords) -> None:
        """One curve: ``record_series("bandwidth", "MB/s", bws, size=sizes)``."""
        self.perfguard_samples = [*self.perfguard_samples, {
            "metric": metric, "unit": unit, "coords": coords,
            "values": [float(v) for v in values]}]

    @run_before("performance")
    def every_metric_declares_its_direction(self):
        measured = {s["metric"] for s in self.perfguard_samples}
        measured |= set(getattr(self, "perf_variables", {}))
        missing = sorted(measured - set(self.perfguard_better))
        wrong = sorted(m for m, b in self.perfguard_better.items() if b not in ("higher", "lower"))
        if missing or wrong:
            raise SanityError(f"perfguard_better of {type(self).__name__} must say 'higher' or "
                              f"'lower' for {', '.join(missing + wrong)}")
