"""A check that makes no progress: a local job that sleeps and writes nothing. Only
tests/system/test_first_week.py loads it (`perfguard run … -- -c tests/data/stalling_checks`),
to prove the run's watchdog ends a reframe that stalls."""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import sanity_function


@rfm.simple_test
class StallingCheck(rfm.RunOnlyRegressionTest):
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    local = True
    executable = "sleep 900"
    tags = {"stalls"}

    @sanity_function
    def finished(self):
        return sn.assert_true(True)
