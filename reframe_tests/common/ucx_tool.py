"""ucx_perftest on both sides of a pair, for every check that runs it (the UCX check and
the fabric sweep): only on partitions with UCX, GPU memory when the check's ``memory``
parameter asks for it, the HCA chosen and pinned with UCX's own knobs."""

from __future__ import annotations

import reframe as rfm
from reframe.core.builtins import run_after

from reframe_tests.common.pinning import with_feature


class UcxPerftestTool(rfm.RegressionTestPlugin):
    """For checks with a ``memory`` parameter ("host" or "cuda") and an ``hca``."""

    @property
    def needs_gpu(self) -> bool:
        return self.memory == "cuda"

    @run_after("init")
    def only_partitions_with_ucx(self):
        self.valid_systems = with_feature(self.valid_systems, "ucx")

    def locate_and_pin_ucx(self) -> None:
        """Call after setup: ``self.ucx_perftest`` from the partition's provider, one task
        per node pinned to the HCA (its cores, its GPU for device memory)."""
        self.ucx_perftest = self.provided("bin/ucx_perftest")
        self.pin_to_hca(self.hca, 1, device_buffers=self.needs_gpu, flavour="openmpi-ucx")
