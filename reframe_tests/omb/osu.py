"""OSU Micro-Benchmarks: point-to-point, multi-pair and collectives, pinned to an HCA.

Every variant names its HCA (from the topology files; ``auto`` where a partition
has none), and for point-to-point the buffers and GPUDirect. Pinning follows the
HCA: cores on its NUMA domain (``srun --cpu-bind=map_cpu``), the closest GPU
(``--gpu-bind=map_gpu`` and ``CUDA_VISIBLE_DEVICES``), and the MPI flavour's knobs
for HCA and GPUDirect (site_config/mpi_flavours.yaml). Sanity proves the binding
srun applied and, for device buffers, that OMB really ran on the GPU.

As in ReFrame's own ``hpctestlib`` OSU checks, the parameters decide the shape in
one place (``shape``, after setup, when the partition is known): executable,
options, tasks and the key figures that become perf variables.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, sanity_function, variable
from reframe.core.exceptions import SanityError
from reframe.utility.sanity import make_performance_function

from reframe_tests.common import time_limit
from reframe_tests.common.base import MeasuredCheck
from reframe_tests.common.binding import binding_errors
from reframe_tests.common.output import parsed, read_output
from reframe_tests.common.pinning import (
    AUTO_HCA,
    HCA_CHOICES,
    partition_topology,
    sharp_env,
    with_feature,
)
from reframe_tests.omb import parser, sharp

OMB_LIBEXEC = "libexec/osu-micro-benchmarks/mpi"
#: Key figure → (metric in OMB's table, unit, which size: "small", "large" or None).
KEY_FIGURES = {
    "latency": ("latency", "us", "small"),
    "bandwidth": ("bandwidth", "MB/s", "large"),
    "message_rate": ("message_rate", "msg/s", "small"),
}

#: OMB's default iterations (small, large messages) and messages per iteration (None: one
#: per rank, alltoall), from its osu_util.h and each benchmark's loop: osu_bw sends a
#: window of 64 per iteration, osu_bibw both ways, osu_latency one round trip.
OMB_WORK = {"osu_latency": (10000, 1000, 2), "osu_bw": (100, 20, 64),
            "osu_bibw": (100, 20, 128), "osu_mbw_mr": (100, 20, 64),
            "osu_allreduce": (1000, 100, 2), "osu_alltoall": (1000, 100, None),
            "osu_barrier": (1000, 100, 1), "osu_bcast": (1000, 100, 1)}
#: Where OMB switches to its large-message iteration counts (LARGE_MESSAGE_SIZE).
OMB_LARGE_MESSAGE = 8192


class OsuBenchmark(rfm.RunOnlyRegressionTest, MeasuredCheck):
    """What every OMB check shares: executable, pinning, parsing, samples, sanity."""

    #: The HCA the variant is pinned to: every HCA a topology file names (``auto`` where a
    #: partition has none); MeasuredCheck keeps each variant to the partitions with it.
    hca = parameter(HCA_CHOICES)

    valid_prog_environs = ["+mpi"]
    tags = {"omb", "nightly", "acceptance"}

    #: Message-size sweep (OMB ``-m MIN:MAX``); the table must reach ``max_size``.
    min_size = variable(int, value=1)
    max_size = variable(int, value=4194304)
    #: Size of the small-message key figures (latency, message rate).
    small_size = variable(int, value=8)
    #: OMB ``-i`` / ``-x``; 0 keeps OMB's defaults.
    iterations = variable(int, value=0)
    warmup = variable(int, value=0)

    #: Set by each check's ``shape``: path below libexec/osu-micro-benchmarks/mpi,
    #: ranks per node, buffers, GPUDirect and the key figures to report.
    benchmark_path = ""
    ranks_per_node = 1
    device_buffers = False
    gpudirect = None
    key_figures: tuple[str, ...] = ()
    perfguard_better = {"bandwidth": "higher", "message_rate": "higher",
                        "line_rate_fraction": "higher",
                        **dict.fromkeys(["latency", "latency_min", "latency_max", "latency_p50",
                                         "latency_p90", "latency_p99"], "lower")}
    #: Collectives print no size column for osu_barrier.
    sized = True
    #: Set by ``shape`` where the check varies in-network reduction: SHARP asked for
    #: (True) or the software baseline (False); None leaves the MPI's default alone.
    sharp_requested: bool | None = None
    #: Set where a variant's SHARP use (or non-use) is proven by the library's trace.
    sharp_proven = False

    @run_after("setup")
    def locate_and_pin(self):
        self.shape()
        self.num_tasks_per_node = self.ranks_per_node
        self.executable = self.provided(f"{OMB_LIBEXEC}/{self.benchmark_path}")
        self.pin_to_hca(self.hca, self.ranks_per_node, self.gpudirect, self.device_buffers)
        self.executable_opts = self.steerable("executable_opts", self.omb_options())
        self.perf_variables = {name: self.key_figure(name) for name in self.key_figures}

    @run_after("setup")
    def ask_for_sharp(self):
        """After the pinning: the flavour's SHARP knobs, naming the HCA it chose. SHARP
        needs Open MPI's coll/ucc and UCC's SHARP TL: a stack known to lack them skips the
        variant saying how to add them; the software baseline then runs the MPI's own
        collectives (coll/ucc asked of an MPI without it is no baseline)."""
        if self.sharp_requested is None:
            return
        if self.sharp_requested:
            lacking = self.lacks("mpi-ucc", "ucc-sharp")
            self.skip_saying_if(lacking is not None, f"SHARP asked for, but {lacking}")
        elif self.lacks("mpi-ucc"):
            return  # the software baseline is the MPI's own collectives: nothing to ask
        flavour = self.current_partition.extras.get("mpi_flavour", "openmpi-ucx")
        topology = partition_topology(self.current_partition)
        knobs = sharp_env(flavour, topology.node.hca(self.hca), self.sharp_requested) \
            if topology and self.hca != AUTO_HCA else None
        self.sharp_proven = knobs is not None
        if knobs is None and self.sharp_requested:
            self.skip_saying(f"MPI flavour {flavour} of {self.current_partition.fullname} has "
                             f"no trace that proves SHARP was used (sharp_proof in "
                             f"mpi_flavours.yaml): a SHARP variant it cannot prove is not run")
        self.env_vars.update(knobs or {})

    def shape(self) -> None:
        raise NotImplementedError

    def across(self, nodes: int) -> None:
        """A collective over ``nodes`` nodes: one rank on each, or as many as the user's
        ``num_tasks_per_node`` (-S)."""
        self.ranks_per_node = self.steerable("num_tasks_per_node", 1)
        self.num_tasks = nodes * self.ranks_per_node

    def expected_work_s(self) -> float:
        """OMB's own iterations at each size of the sweep (``-i`` where set), its window
        of messages per iteration, at the floor rate (time_limit.py)."""
        small, large, messages = OMB_WORK[self.benchmark_path.split("/")[-1]]
        messages = (messages or self.num_tasks) * self.ranks_per_node
        sizes = time_limit.doubling_sizes(self.min_size, self.max_size) if self.sized else [0]
        return time_limit.sweep_seconds([
            ((self.iterations or (small if size <= OMB_LARGE_MESSAGE else large)) * messages,
             size) for size in sizes])

    def omb_options(self) -> list[str]:
        options = ["-m", f"{self.min_size}:{self.max_size}"] if self.sized else []
        if self.iterations:
            options += ["-i", str(self.iterations)]
        if self.warmup:
            options += ["-x", str(self.warmup)]
        return options

    def key_figure(self, name: str):
        metric, unit, which = KEY_FIGURES[name]
        size = {"small": self.small_size, "large": self.max_size}[which] if self.sized else None
        return make_performance_function(lambda: self.result.at(metric, size), unit)

    @sanity_function
    def validate(self):
        """OMB's table is complete, srun bound as asked, the buffers were where asked;
        then every size of every column is recorded."""
        self.result = parsed(lambda text: parser.parse(
            text, self.max_size if self.sized else None, self.asked_buffers()), read_output(self))
        errors = binding_errors(read_output(self, "stderr"), self.num_tasks,
                                self.pinned_cores, self.expected_node_cores())
        if errors:
            raise SanityError("core binding differs from the request: " + "; ".join(errors))
        if self.device_buffers and self.result.device != "CUDA":
            raise SanityError(
                f"device buffers requested but the title is '{self.result.name}' without "
                f"-CUDA: this OMB build has no CUDA support and silently used host memory")
        errors = self.gpu_errors()
        if errors:
            raise SanityError("GPUs differ from the topology's choice: " + "; ".join(errors))
        self.check_result()
        if self.sharp_proven:
            text = read_output(self) + read_output(self, "stderr")
            problem = sharp.sharp_problem(text, self.benchmark_path.split("/")[-1],
                                          bool(self.sharp_requested))
            if problem:
                raise SanityError(problem)
        for (metric, unit), values in self.result.series().items():
            # osu_barrier has no size column: its point is the number of ranks.
            coords = {"size": self.result.sizes} if self.sized else {"ranks": self.num_tasks}
            self.record_series(metric, unit, values, **coords)
        return True

    def asked_buffers(self) -> tuple[str, str] | None:
        """The buffers the command line asked OMB for: OMB 7.4 and later print no buffer
        line for point-to-point (the title only), so these are what is stored."""
        return None

    def check_result(self) -> None:
        """Check-specific sanity beyond the table (raise SanityError)."""

    def explain_job_problem(self, problem: str) -> str:
        """A crash between OMB's title and its first row with device buffers is the MPI
        failing on GPU memory, the commonest cause on a new GPU node: say so."""
        if not self.device_buffers:
            return problem
        try:
            parser.parse(read_output(self))
        except parser.ParseError as exc:
            if "no result rows" in str(exc):
                return (f"device buffers crashed the MPI: {problem}, after OMB's title and "
                        f"before any result (an MPI that is not CUDA-aware, or Open MPI "
                        f"without the UCX PML, treats GPU memory as host memory; see "
                        f"device_buffers_without_hca in mpi_flavours.yaml)")
        except (ValueError, SanityError):
            pass
        return problem


@rfm.simple_test
class OsuPt2PtCheck(OsuBenchmark):
    """osu_latency / osu_bw / osu_bibw between two nodes (``inter``) or on one (``intra``)."""

    benchmark = parameter(["osu_latency", "osu_bw", "osu_bibw"])
    #: send-recv buffers, and GPUDirect RDMA for device buffers
    transfer = parameter(["H-H", "D-D", "D-D-gdr", "H-D-gdr"])
    placement = parameter(["inter", "intra"])
    num_tasks = 2
    descr = "OMB point-to-point, HCA/GPU/core pinned"

    @property
    def needs_gpu(self) -> bool:
        return "D" in self.transfer

    def shape(self) -> None:
        self.benchmark_path = f"pt2pt/{self.benchmark}"
        self.device_buffers = self.needs_gpu
        self.gpudirect = self.transfer.endswith("-gdr") if self.device_buffers else None
        self.ranks_per_node = self.steerable(
            "num_tasks_per_node", 2 if self.placement == "intra" else 1,
            fixed=f"placement={self.placement} fixes the ranks per node (inter: one on each "
                  f"of two nodes, intra: two on one)")
        self.key_figures = ("latency",) if self.benchmark == "osu_latency" else ("bandwidth",)

    def omb_options(self) -> list[str]:
        options = super().omb_options()
        if self.device_buffers:
            options += ["-d", "cuda", *self.asked_buffers()]
        return options

    def asked_buffers(self) -> tuple[str, str]:
        send, receive = self.transfer.split("-")[:2]
        return send, receive

    @run_after("setup")
    def add_line_rate_fraction(self):
        """Inter-node bandwidth as a fraction of the HCA's data rate (both ways: bibw)."""
        rate = self.hca_rate_gbps(self.hca)
        if self.benchmark == "osu_latency" or self.placement != "inter" or not rate:
            return
        rate *= 2 if self.benchmark == "osu_bibw" else 1
        self.perf_variables["line_rate_fraction"] = make_performance_function(
            lambda: self.result.at("bandwidth", self.max_size) * 8 / 1000 / rate, "")


@rfm.simple_test
class OsuMultiPairCheck(OsuBenchmark):
    """osu_mbw_mr: ``pairs`` sender/receiver pairs across two nodes through one HCA."""

    descr = "OMB multiple-pair bandwidth and message rate"
    #: Sender/receiver pairs; 0: four, or as many as a node has cores if fewer.
    pairs = variable(int, value=0)

    def shape(self) -> None:
        self.benchmark_path = "pt2pt/osu_mbw_mr"
        self.pairs = self.pairs or min(4, self.current_partition.processor.num_cpus or 1)
        self.ranks_per_node = self.steerable(
            "num_tasks_per_node", self.pairs, fixed=f"a node's ranks are the {self.pairs} "
            f"pairs' senders or receivers: set pairs (-S OsuMultiPairCheck.pairs=N)")
        self.num_tasks = 2 * self.pairs
        # OMB pairs rank i with rank i + N/2: block distribution puts them on two nodes.
        self.srun_extra = [*self.srun_extra, "--distribution=block:block"]
        self.key_figures = ("bandwidth", "message_rate")

    def check_result(self) -> None:
        if self.result.pairs not in (None, self.pairs):
            raise SanityError(f"osu_mbw_mr ran {self.result.pairs} pairs, "
                              f"expected {self.pairs}")


@rfm.simple_test
class OsuCollectiveCheck(OsuBenchmark):
    """osu_allreduce / osu_alltoall / osu_barrier over ``num_nodes`` nodes, full statistics."""

    benchmark = parameter(["osu_allreduce", "osu_alltoall", "osu_barrier"])
    descr = "OMB collectives across nodes"
    tags = OsuBenchmark.tags | {"collectives"}
    #: Nodes to span; 0 takes the partition's ``num_nodes`` (topology ``nodes``).
    num_nodes = variable(int, value=0)
    max_size = 1048576

    def shape(self) -> None:
        self.benchmark_path = f"collective/{self.benchmark}"
        self.sized = self.benchmark != "osu_barrier"
        self.across(self.num_nodes or self.current_partition.extras.get("num_nodes", 2))
        self.key_figures = ("latency",)

    def omb_options(self) -> list[str]:
        return ["-f", *super().omb_options()]


@rfm.simple_test
class OsuAllreduceScalingCheck(OsuBenchmark):
    """osu_allreduce over 2, 4, 8, … nodes at seed 003's sizes (8 B–2 KiB): a software
    allreduce grows with the node count; in-network reduction (SHARP) keeps it flat. One
    line per node count, its curve over sizes: a node count that got slower is named."""

    nodes = parameter([2, 4, 8, 16, 32, 64, 128])
    #: In-network reduction asked for (partitions whose topology says ``sharp``) or the
    #: software collectives every partition has: the seed's two curves.
    sharp = parameter(["off", "on"])
    descr = "OMB allreduce latency over node counts, software and SHARP"
    tags = {"omb", "collectives", "scaling", "acceptance"}
    min_size = 8
    max_size = 2048

    def shape(self) -> None:
        available = self.current_partition.extras.get("num_nodes", 2)
        self.skip_saying_if(self.nodes > available, f"{self.nodes} nodes: the partition has "
                                                    f"{available} (topology nodes)")
        self.benchmark_path = "collective/osu_allreduce"
        self.across(self.nodes)
        self.key_figures = ("latency",)
        self.sharp_requested = self.sharp == "on"

    @run_after("init")
    def sharp_only_where_the_fabric_has_it(self):
        if self.sharp == "on":
            self.valid_systems = with_feature(self.valid_systems, "sharp")

    def omb_options(self) -> list[str]:
        # SHARP reduces floats, not OMB's default MPI_CHAR (OsuSharpCheck); where the
        # partition has SHARP the software curve reduces floats too, or the pair would
        # not compare. Elsewhere OMB's default: -T came with OMB 7 (seedfdr runs 5.9).
        pair = "sharp" in self.current_partition.features
        return ["-f", *(["-T", "mpi_float"] if pair else []), *super().omb_options()]


@rfm.simple_test
class OsuSharpCheck(OsuBenchmark):
    """The collectives SHARP can run in the network, across the partition's nodes, with
    in-network reduction asked for and not, on partitions whose topology says they have it
    (feature ``sharp``). The MPI flavour's ``sharp_on``/``sharp_off`` knobs ask; the
    collective library's own trace proves which ran (reframe_tests/omb/sharp.py): a run
    that asked for SHARP and fell back to software is test-failed with the cause, never a
    slow pass. At seed 003's sizes (8 B–2 KiB), where SHARP makes 30–40 µs into 3–4 µs.

    Only what UCC's SHARP TL runs: Allreduce, Barrier and Bcast
    (``UCC_TL_BASIC_SHARP_SUPPORTED_COLLS``, openucx/ucc ``src/components/tl/sharp/
    tl_sharp.h``); a Reduce never reaches the switches, so it would "fall back" every
    night. Allreduce reduces ``-T mpi_float``: OMB's default MPI_CHAR maps to
    ``SHARP_DTYPE_NULL`` before SHARP 3 (``ucc_to_sharp_dtype``, ``tl_sharp_coll.c``),
    which the TL refuses (``UCC_ERR_NOT_SUPPORTED``): software, with the wrong cause."""

    benchmark = parameter(["osu_allreduce", "osu_barrier", "osu_bcast"])
    sharp = parameter(["on", "off"])
    descr = "OMB collectives with SHARP on and off, SHARP use proven"
    tags = {"omb", "collectives", "sharp", "acceptance"}
    min_size = 8
    max_size = 2048

    @run_after("init")
    def only_partitions_with_sharp(self):
        self.valid_systems = with_feature(self.valid_systems, "sharp")

    def shape(self) -> None:
        self.benchmark_path = f"collective/{self.benchmark}"
        self.sized = self.benchmark != "osu_barrier"
        self.across(self.current_partition.extras.get("num_nodes", 2))
        self.key_figures = ("latency",)
        self.sharp_requested = self.sharp == "on"

    def omb_options(self) -> list[str]:
        reduces = ["-T", "mpi_float"] if self.benchmark == "osu_allreduce" else []
        return ["-f", *reduces, *super().omb_options()]
