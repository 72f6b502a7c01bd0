# Copyright perfguard developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.gpcnet.package import Gpcnet as BuiltinGpcnet

from spack.package import *

#: GPCNeT's sample counts (network_test.c, network_load_test.c): how many times each test
#: is sampled. NUM_NETWORK_TESTS and NUM_CONGESTOR_TESTS count tests, not samples.
SAMPLE_COUNTS = r"^#define ((?:NUM_)?(?:LAT|BW|ALLREDUCE|A2A|INCAST|BCAST)_TESTS) (\d+)$"


def _divide(divisor):
    """A filter_file replacement: the #define's count divided, at least 1."""
    return lambda match: f"#define {match.group(1)} {max(1, int(match.group(2)) // divisor)}"


class Gpcnet(BuiltinGpcnet):
    """The builtin recipe, with GPCNeT's sample counts a build choice.

    GPCNeT fixes its sample counts at compile time (``#define NUM_LAT_TESTS 10000`` and
    its siblings; no option, no environment variable). At those counts network_test took
    297 s on 16 virtual nodes sharing two cores and network_load_test printed nothing in
    17 minutes; a site whose acceptance window is short divides them
    (``gpcnet samples_divisor=10``), keeping GPCNeT's iterations per sample, so each
    sample measures the same thing and only the percentiles rest on fewer samples.
    """

    variant(
        "samples_divisor",
        default="1",
        values=lambda value: value.isdigit() and int(value) >= 1,
        description="divide GPCNeT's compile-time sample counts (NUM_*_TESTS, *_TESTS)",
    )

    @run_before("build")
    def divide_sample_counts(self):
        divisor = int(self.spec.variants["samples_divisor"].value)
        if divisor > 1:
            filter_file(SAMPLE_COUNTS, _divide(divisor), "network_test.c", "network_load_test.c")
