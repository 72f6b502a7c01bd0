"""A night that lasts: one check that ends at once and one that sleeps for minutes, both
local jobs. Only tests/system/test_workflows.py uses this site directory, to stop a
recurring nightly in progress (`perfguard nightly --cancel-recurring --now`)."""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import sanity_function


class _NightCheck(rfm.RunOnlyRegressionTest):
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    local = True
    tags = {"slow-night"}

    @sanity_function
    def finished(self):
        return sn.assert_true(True)


@rfm.simple_test
class QuickNightCheck(_NightCheck):
    executable = "true"


@rfm.simple_test
class SlowNightCheck(_NightCheck):
    executable = "sleep 600"
