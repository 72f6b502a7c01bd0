"""Every measured point of a check, carried to the database through the run report.

ReFrame perf variables hold a check's key figures; a whole OMB curve or scaling
sweep goes into ``perfguard_samples``, a check variable that ReFrame writes into
the report, where `perfguard ingest` reads it.
"""

from __future__ import annotations

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import variable


class RecordsSamples(rfm.RegressionTestPlugin):
    #: [{"metric": ..., "value": ..., "unit": ..., "point": {...}}, ...]
    perfguard_samples = variable(typ.List[typ.Dict[str, object]], value=[])

    def record_sample(self, metric: str, value: float, unit: str, **point) -> None:
        self.perfguard_samples = [*self.perfguard_samples,
                                  {"metric": metric, "value": value, "unit": unit,
                                   "point": point}]
