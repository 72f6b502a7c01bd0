"""Every measured point of a check, carried to the database through the run report.

ReFrame perf variables hold a check's key figures; whole curves and sweeps go into
``perfguard_samples``, a check variable that ReFrame writes into the report, where
`perfguard ingest` reads it. A series is columnar (see perfguard.report.Series):
one entry per curve, coordinates and values as lists.
"""

from __future__ import annotations

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import variable


class RecordsSamples(rfm.RegressionTestPlugin):
    #: [{"metric": ..., "unit": ..., "coords": {name: [..] or scalar}, "values": [..]}]
    perfguard_samples = variable(typ.List[typ.Dict[str, object]], value=[])

    def record_series(self, metric: str, unit: str, values: list[float], **coords) -> None:
        """One curve: ``record_series("bandwidth", "MB/s", bws, size=sizes)``."""
        self.perfguard_samples = [*self.perfguard_samples, {
            "metric": metric, "unit": unit, "coords": coords,
            "values": [float(v) for v in values]}]
