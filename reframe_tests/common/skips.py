"""Skips that say why, in the stored results too.

ReFrame 4.10's JSON report keeps no skip message (``fail_reason`` is null for a skipped
test), so a check that skips records its reason in ``perfguard_skip_reason``, a
variable the report carries; ingest stores it as the test case's reason and the verdict
says "skipped: <why>". A skipped check is neither a pass nor a failure.
"""

from __future__ import annotations

import reframe as rfm
from reframe.core.builtins import variable


class SaysWhySkipped(rfm.RegressionTestPlugin):
    #: Why the check was skipped (empty: it was not).
    perfguard_skip_reason = variable(str, value="")

    def skip_saying(self, reason: str) -> None:
        """Skip the test, keeping the reason for the report."""
        self.perfguard_skip_reason = reason
        self.skip(reason)

    def skip_saying_if(self, condition: bool, reason: str) -> None:
        if condition:
            self.skip_saying(reason)
