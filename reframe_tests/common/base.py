"""The one base every measured perfguard check builds on.

``MeasuredCheck``: launched by srun with a verified binding, binaries from the
partition's provider, every point recorded, references from the database, the
nodes' fingerprints collected. ``HcaCheck`` adds the ``hca`` parameter: one
variant per HCA the topology files name (``auto`` where a partition has none),
valid only on partitions with that HCA (and a GPU where the check needs one).
"""

from __future__ import annotations

from reframe.core.builtins import parameter, run_after, run_before

from reframe_tests.common.fingerprints import CollectsFingerprints
from reframe_tests.common.gpus import ProvesRankGpus
from reframe_tests.common.launch import SrunLaunch
from reframe_tests.common.pinning import HCA_CHOICES, HcaPinning, hca_valid_systems
from reframe_tests.common.providers import BinaryProvider
from reframe_tests.common.references import DatabaseReferences
from reframe_tests.common.samples import RecordsSamples


class MeasuredCheck(SrunLaunch, BinaryProvider, RecordsSamples, DatabaseReferences,
                    CollectsFingerprints):
    """Launch, binaries, samples, references and fingerprints of a measured check."""

    @run_after("init")
    def maintained_by_perfguard(self):
        self.maintainers = ["perfguard"]

    @run_after("init")
    def owns_its_nodes(self):
        """A measurement owns its nodes: another job's ranks on them would be measured too
        (and a 1-node run is the baseline of every speed-up computed from it)."""
        self.exclusive_access = True

    @run_before("run")
    def measurement_slot(self):
        """The partition's options for measuring jobs (topology `measurement_options`): on
        the embedded cluster a license of count 1, so benchmarks run one at a time on the
        shared host while sanity jobs run beside them."""
        self.job.options += self.current_partition.extras.get("measurement_options", [])


class HcaCheck(MeasuredCheck, HcaPinning, ProvesRankGpus):
    """A measured check pinned to one HCA (cores, GPU and MPI knobs follow it)."""

    hca = parameter(HCA_CHOICES)

    @property
    def needs_gpu(self) -> bool:
        """Checks with device buffers override this from their parameters."""
        return False

    @run_after("init")
    def only_partitions_with_this_hca(self):
        self.valid_systems = hca_valid_systems(self.hca, "+gpu" if self.needs_gpu else "")
