"""UCX perftest between two nodes: tag-matching and RMA put, latency and bandwidth.

The one point-to-point measurement the embedded cluster can run end to end
(Debian's ucx-utils), and on IB clusters a transport-level check below MPI: the
HCA is chosen with ``UCX_NET_DEVICES``, GPU memory with ``-m cuda`` on the GPU
closest to the HCA, both sides pinned to cores on the HCA's NUMA domain.
"""

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    sanity_function,
    variable,
)
from reframe.core.exceptions import SanityError

from reframe_tests.common.binding import binding_errors
from reframe_tests.common.output import parsed, read_output
from reframe_tests.common.server_client import PORT, ServerClientCheck, pair_line, per_size
from reframe_tests.common.ucx_tool import UcxPerftestTool
from reframe_tests.ucx import parser

LATENCY_TESTS = {"tag_lat", "ucp_put_lat"}


@rfm.simple_test
class UcxPerftestCheck(UcxPerftestTool, rfm.RunOnlyRegressionTest, ServerClientCheck):
    descr = "ucx_perftest server/client across two nodes"
    test = parameter(["tag_lat", "tag_bw", "ucp_put_lat", "ucp_put_bw"])
    memory = parameter(["host", "cuda"])
    valid_prog_environs = ["*"]
    num_tasks = 2
    tags = {"ucx", "demo", "nightly", "acceptance"}
    perfguard_better = {"latency": "lower", "latency_p50": "lower", "bandwidth": "higher",
                        "message_rate": "higher"}

    #: Message sizes in bytes; latency tests use those up to 4 KiB.
    message_sizes = variable(typ.List[int], value=[8, 4096, 65536, 1048576])
    iterations = variable(int, value=20000)

    @run_after("setup")
    def locate_and_pin(self):
        self.locate_and_pin_ucx()
        key = "latency" if self.test in LATENCY_TESTS else "bandwidth"
        self.perf_variables = {key: getattr(self, key)()}

    @property
    def sizes(self) -> list[int]:
        if self.test in LATENCY_TESTS:
            return [s for s in self.message_sizes if s <= 4096]
        return list(self.message_sizes)

    def ucx_options(self, size: int) -> str:
        """Both sides get the same options; the client adds the server's address."""
        return " ".join([f"-p {PORT} -t {self.test} -s {size} -n {self.iterations} "
                         f"-m {self.memory},{self.memory}", *self.users_options()])

    def compose_steps(self, srun: str) -> None:
        self.pair_steps(srun)
        self.executable = per_size(
            self.sizes, lambda size: pair_line(f"{self.ucx_perftest} {self.ucx_options(size)}"))

    @sanity_function
    def measured_every_size(self):
        results = parsed(parser.parse, read_output(self))
        sizes = [r.size for r in results]
        if sizes != self.sizes:
            raise SanityError(f"measured sizes {sizes}, expected {self.sizes}")
        errors = binding_errors(read_output(self, "stderr"), 1, self.pinned_cores)
        if errors:
            raise SanityError("client binding differs from the request: " + "; ".join(errors))
        errors = self.gpu_errors()
        if errors:
            raise SanityError("GPUs differ from the topology's choice: " + "; ".join(errors))
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
