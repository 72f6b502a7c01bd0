"""A check as a site writes it with plain ReFrame, no perfguard: its results database
(ReFrame 4.7+ results.db) is what `perfguard ingest --results-db` imports as history
(tests/system/test_ingest_reframe_history.py). It measures for real: dd copying 2 GiB of
zeros on the host ReFrame runs on."""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, sanity_function

UNITS = {"kB/s": 1e-3, "MB/s": 1.0, "GB/s": 1e3}


@rfm.simple_test
class PlainCopyCheck(rfm.RunOnlyRegressionTest):
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    executable = "dd"
    executable_opts = ["if=/dev/zero", "of=/dev/null", "bs=1M", "count=2048"]

    @sanity_function
    def validate(self):
        return sn.assert_found(r"2147483648 bytes .* copied", self.stderr)

    @performance_function("MB/s")
    def copy_rate(self):
        value, unit = sn.extractsingle(r"copied, \S+ s, (\S+) (\w+/s)", self.stderr, (1, 2))
        return float(value) * UNITS[unit]
