"""OSU Micro-Benchmarks: point-to-point, multi-pair and collectives, pinned to an HCA.

Every variant names its HCA (from the topology files; ``auto`` where a partition
has none), and for point-to-point the buffers and GPUDirect. Pinning follows the
HCA: cores on its NUMA domain (``srun --cpu-bind=map_cpu``), the closest GPU
(``--gpu-bind=map_gpu`` and ``CUDA_VISIBLE_DEVICES``), and the MPI flavour's knobs
for HCA and GPUDirect (site_config/mpi_flavours.yaml). Sanity proves the binding
srun applied and, for device buffers, that OMB really ran on the GPU.
"""

import reframe as rfm
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)
from reframe.core.exceptions import SanityError

from reframe_tests.common.binding import binding_errors
from reframe_tests.common.fingerprints import CollectsFingerprints
from reframe_tests.common.launch import SrunLaunch
from reframe_tests.common.output import parsed, read_output
from reframe_tests.common.pinning import HCA_CHOICES, HcaPinning, hca_valid_systems
from reframe_tests.common.providers import BinaryProvider
from reframe_tests.common.references import DatabaseReferences
from reframe_tests.common.samples import RecordsSamples
from reframe_tests.omb import parser

OMB_LIBEXEC = "libexec/osu-micro-benchmarks/mpi"


class OsuBenchmark(rfm.RunOnlyRegressionTest, SrunLaunch, HcaPinning, BinaryProvider,
                   RecordsSamples, DatabaseReferences, CollectsFingerprints):
    """What every OMB check shares: executable, pinning, parsing, samples, sanity."""

    hca = parameter(HCA_CHOICES)
    valid_prog_environs = ["+mpi"]
    maintainers = ["perfguard"]
    tags = {"omb", "nightly", "acceptance"}

    #: Message-size sweep (OMB ``-m MIN:MAX``); the table must reach ``max_size``.
    min_size = variable(int, value=1)
    max_size = variable(int, value=4194304)
    #: Size of the small-message key figure (latency).
    small_size = variable(int, value=8)
    #: OMB ``-i`` / ``-x``; 0 keeps OMB's defaults.
    iterations = variable(int, value=0)
    warmup = variable(int, value=0)

    #: Set by subclasses: path below libexec/osu-micro-benchmarks/mpi.
    benchmark_path = ""
    ranks_per_node = 1
    device_buffers = False
    gpudirect = None

    @run_after("init")
    def only_partitions_with_this_hca(self):
        self.valid_systems = hca_valid_systems(self.hca, "+gpu" if self.device_buffers else "")

    @run_after("setup")
    def locate_and_pin(self):
        self.executable = self.provided(f"{OMB_LIBEXEC}/{self.benchmark_path}")
        self.pin_to_hca(self.hca, self.ranks_per_node, self.gpudirect, self.device_buffers)
        self.executable_opts = self.omb_options()

    def omb_options(self) -> list[str]:
        options = ["-m", f"{self.min_size}:{self.max_size}"]
        if self.iterations:
            options += ["-i", str(self.iterations)]
        if self.warmup:
            options += ["-x", str(self.warmup)]
        return options

    @sanity_function
    def validate(self):
        self.result = parsed(lambda text: parser.parse(text, self.expected_max_size),
                             read_output(self))
        errors = binding_errors(read_output(self, "stderr"), self.num_tasks,
                                self.pinned_cores)
        if errors:
            raise SanityError("core binding differs from the request: " + "; ".join(errors))
        if self.device_buffers and self.result.device != "CUDA":
            raise SanityError(
                f"device buffers requested but the title is '{self.result.name}' without "
                f"-CUDA: this OMB build has no CUDA support and silently used host memory")
        for (metric, unit), values in self.result.series().items():
            if self.result.sizes:
                self.record_series(metric, unit, values, size=self.result.sizes)
        return True

    @property
    def expected_max_size(self) -> int | None:
        return self.max_size

    @performance_function("us")
    def latency(self):
        """Small-message latency (the only row where there is no size, as osu_barrier)."""
        return self.result.at("latency", self.small_size if self.result.sizes else None)

    @performance_function("MB/s")
    def bandwidth(self):
        return self.result.at("bandwidth", self.max_size)

    @performance_function("msg/s")
    def message_rate(self):
        return self.result.at("message_rate", self.small_size)


@rfm.simple_test
class OsuPt2PtCheck(OsuBenchmark):
    """osu_latency / osu_bw / osu_bibw between two nodes (``inter``) or on one (``intra``)."""

    benchmark = parameter(["osu_latency", "osu_bw", "osu_bibw"])
    #: send-recv buffers, and GPUDirect RDMA for device buffers
    transfer = parameter(["H-H", "D-D", "D-D-gdr", "H-D-gdr"])
    placement = parameter(["inter", "intra"])
    num_tasks = 2
    descr = "OMB point-to-point, HCA/GPU/core pinned"

    @run_after("init")
    def shape(self):
        self.benchmark_path = f"pt2pt/{self.benchmark}"
        self.device_buffers = "D" in self.transfer
        self.gpudirect = self.transfer.endswith("-gdr") if self.device_buffers else None
        self.ranks_per_node = 2 if self.placement == "intra" else 1
        self.num_tasks_per_node = self.ranks_per_node
        self.only_partitions_with_this_hca()

    def omb_options(self) -> list[str]:
        options = super().omb_options()
        if self.device_buffers:
            options += ["-d", "cuda", *self.transfer.split("-")[:2]]
        return options

    @performance_function("")
    def line_rate_fraction(self):
        """Large-message bandwidth as a fraction of the HCA's data rate (both ways: bibw)."""
        rate = self.hca_rate_gbps(self.hca) * (2 if self.benchmark == "osu_bibw" else 1)
        return self.result.at("bandwidth", self.max_size) * 8 / 1000 / rate

    @run_before("performance")
    def key_figures(self):
        if self.benchmark == "osu_latency":
            self.perf_variables = {"latency": self.latency()}
            return
        self.perf_variables = {"bandwidth": self.bandwidth()}
        if self.placement == "inter" and self.hca_rate_gbps(self.hca):
            self.perf_variables["line_rate_fraction"] = self.line_rate_fraction()


@rfm.simple_test
class OsuMultiPairCheck(OsuBenchmark):
    """osu_mbw_mr: ``pairs`` sender/receiver pairs across two nodes through one HCA."""

    benchmark_path = "pt2pt/osu_mbw_mr"
    descr = "OMB multiple-pair bandwidth and message rate"
    pairs = variable(int, value=4)

    @run_after("init")
    def shape(self):
        self.ranks_per_node = self.pairs
        self.num_tasks = 2 * self.pairs
        self.num_tasks_per_node = self.pairs
        # OMB pairs rank i with rank i + N/2: block distribution puts them on two nodes.
        self.srun_extra = ["--distribution=block:block"]

    @sanity_function
    def validate(self):
        super().validate()
        if self.result.pairs not in (None, self.pairs):
            raise SanityError(f"osu_mbw_mr ran {self.result.pairs} pairs, expected {self.pairs}")
        return True

    @run_before("performance")
    def key_figures(self):
        self.perf_variables = {"bandwidth": self.bandwidth(),
                               "message_rate": self.message_rate()}


@rfm.simple_test
class OsuCollectiveCheck(OsuBenchmark):
    """osu_allreduce / osu_alltoall / osu_barrier over ``num_nodes`` nodes, full statistics."""

    benchmark = parameter(["osu_allreduce", "osu_alltoall", "osu_barrier"])
    descr = "OMB collectives across nodes"
    #: Nodes to span; 0 takes the partition's ``num_nodes`` (topology ``nodes``).
    num_nodes = variable(int, value=0)
    max_size = 1048576

    @run_after("init")
    def shape(self):
        self.benchmark_path = f"collective/{self.benchmark}"

    @run_after("setup")
    def span_nodes(self):
        nodes = self.num_nodes or self.current_partition.extras.get("num_nodes", 2)
        self.num_tasks = nodes
        self.num_tasks_per_node = 1
        self.job.num_tasks = nodes

    def omb_options(self) -> list[str]:
        if self.benchmark == "osu_barrier":
            return ["-f"] + super().omb_options()[2:]
        return ["-f"] + super().omb_options()

    @property
    def expected_max_size(self) -> int | None:
        return None if self.benchmark == "osu_barrier" else self.max_size

    @sanity_function
    def validate(self):
        super().validate()
        if self.benchmark == "osu_barrier":
            for (metric, unit), values in self.result.series().items():
                self.record_series(metric, unit, values)
        return True

    @run_before("performance")
    def key_figures(self):
        self.perf_variables = {"latency": self.latency()}
