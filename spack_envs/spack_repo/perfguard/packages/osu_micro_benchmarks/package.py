# Copyright perfguard developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.osu_micro_benchmarks.package import (
    OsuMicroBenchmarks as BuiltinOsuMicroBenchmarks,
)

from spack.package import *


class OsuMicroBenchmarks(BuiltinOsuMicroBenchmarks):
    """The builtin recipe, with OMB 7.4 buildable against CUDA 13.

    CUDA 13 changed ``cudaMemPrefetchAsync``: a location and flags where CUDA 12 took a
    device id. OMB 7.4 ``--enable-cuda`` fails to compile there (seen on an H100 with
    CUDA 13.0); with this patch it built and ran on an H200 with CUDA 13.0
    (tests/data/h200/README.md). Other OMB versions are not patched: the CUDA stacks
    refuse them with CUDA 13.
    """

    patch("cuda13-mem-prefetch.patch", when="@7.4 +cuda ^cuda@13:")
