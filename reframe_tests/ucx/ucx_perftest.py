"""UCX perftest between two nodes: tag-matching and RMA put, latency and bandwidth.

The one point-to-point measurement the embedded cluster can run end to end
(Debian's ucx-utils), and on IB clusters a transport-level check below MPI:
the HCA is chosen with ``UCX_NET_DEVICES``, GPU memory with ``-m cuda``.
"""

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)
from reframe.core.exceptions import SanityError

from reframe_tests.common.launch import SrunLaunch
from reframe_tests.common.output import parsed, read_output
from reframe_tests.common.references import DatabaseReferences
from reframe_tests.common.samples import RecordsSamples
from reframe_tests.common.server_client import pair_prologue
from reframe_tests.ucx import parser

LATENCY_TESTS = {"tag_lat", "ucp_put_lat"}


@rfm.simple_test
class UcxPerftestCheck(rfm.RunOnlyRegressionTest, SrunLaunch, RecordsSamples,
                       DatabaseReferences):
    descr = "ucx_perftest server/client across two nodes"
    test = parameter(["tag_lat", "tag_bw", "ucp_put_lat", "ucp_put_bw"])
    memory = parameter(["host", "cuda"])
    valid_systems = ["+ucx"]
    valid_prog_environs = ["*"]
    num_tasks = 2
    num_tasks_per_node = 1
    uses_mpi = False
    executable = "ucx_perftest"
    tags = {"ucx", "demo", "nightly", "acceptance"}
    maintainers = ["perfguard"]

    #: Message sizes in bytes; latency tests use the small ones only.
    message_sizes = variable(typ.List[int], value=[8, 4096, 65536, 1048576])
    iterations = variable(int, value=20000)
    #: UCX device(s), e.g. ``mlx5_0:1``; empty lets UCX choose (the embedded cluster).
    net_devices = variable(str, value="")

    @run_after("init")
    def gpu_memory_needs_gpus(self):
        if self.memory == "cuda":
            self.valid_systems = ["+ucx +gpu"]

    @run_after("setup")
    def select_device(self):
        devices = self.net_devices or self.current_partition.extras.get("ucx_net_devices", "")
        if devices:
            self.env_vars["UCX_NET_DEVICES"] = devices

    @property
    def sizes(self) -> list[int]:
        if self.test in LATENCY_TESTS:
            return [s for s in self.message_sizes if s <= 4096]
        return list(self.message_sizes)

    def ucx_options(self, size: int) -> str:
        return (f"-p $pg_port -t {self.test} -s {size} -n {self.iterations} "
                f"-m {self.memory},{self.memory}")

    @run_before("run")
    def server_and_client_steps(self):
        srun = self.take_over_launch()
        self.prerun_cmds = pair_prologue(f"{srun} -N1 -n1", f"{srun} -N1 -n1")
        loop = [
            f'echo "# perfguard size={size}"; '
            f'run_pair "ucx_perftest {self.ucx_options(size)}" '
            f'"ucx_perftest \\$pg_server_addr {self.ucx_options(size)}" || exit $?'
            for size in self.sizes
        ]
        self.executable = "; ".join(loop)

    @sanity_function
    def measured_every_size(self):
        results = parsed(parser.parse, read_output(self))
        sizes = [r.size for r in results]
        if sizes != self.sizes:
            raise SanityError(f"measured sizes {sizes}, expected {self.sizes}")
        sizes = [r.size for r in results]
        self.record_series("latency", "us", [r.latency_us for r in results], size=sizes)
        self.record_series("latency_p50", "us", [r.latency_p50_us for r in results], size=sizes)
        self.record_series("bandwidth", "MiB/s", [r.bandwidth_mib_s for r in results],
                           size=sizes)
        self.record_series("message_rate", "msg/s", [r.message_rate for r in results],
                           size=sizes)
        self.results = {r.size: r for r in results}
        return True

    @performance_function("us")
    def latency(self):
        return self.results[min(self.results)].latency_us

    @performance_function("MiB/s")
    def bandwidth(self):
        return self.results[max(self.results)].bandwidth_mib_s

    @run_before("performance")
    def key_figures(self):
        key = "latency" if self.test in LATENCY_TESTS else "bandwidth"
        self.perf_variables = {key: getattr(self, key)()}
