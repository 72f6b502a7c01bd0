"""perftest: RDMA verbs per HCA — send, write, read and atomics, bandwidth and latency.

Server on the first node of the job, client on the last (the same node for the
loopback health check), both with the same options, both pinned with numactl to
the HCA's NUMA domain. The HCA and port come from the topology (``-d``, ``-i``,
``-x`` for RoCE); GPU memory uses the GPU closest to the HCA (``--use_cuda``).
The interference variant measures a transfer while a second pair saturates the
same HCA with another transfer function, and reports the degradation against the
same measurement without it (seed 002).
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
from reframe.utility.sanity import make_performance_function

from reframe_tests.common.output import parsed, read_output
from reframe_tests.common.pinning import AUTO_HCA, partition_topology
from reframe_tests.common.server_client import (
    HELPER_SRUNS,
    PORT,
    ServerClientCheck,
    pair_line,
    per_size,
)
from reframe_tests.perftest import parser

#: Transfer function → (program stem, extra options both sides need).
VERBS = {
    "send": ("send", []),
    "write": ("write", []),
    "read": ("read", []),
    "atomic_fadd": ("atomic", ["-A", "FETCH_AND_ADD"]),
    "atomic_cswap": ("atomic", ["-A", "CMP_AND_SWAP"]),
}


def program_path(verb: str, measure: str) -> str:
    """``write``, ``bw`` → ``bin/ib_write_bw`` (relative to the provider)."""
    return f"bin/ib_{VERBS[verb][0]}_{measure}"


class PerftestBase(rfm.RunOnlyRegressionTest, ServerClientCheck):
    """Shared: HCA options, numactl pinning, GPU memory, server/client steps."""

    valid_prog_environs = ["*"]
    tags = {"perftest", "rdma", "nightly", "acceptance"}
    perfguard_better = {"bandwidth_peak": "higher", "bandwidth": "higher",
                        "message_rate": "higher", "transactions_per_s": "higher",
                        "degradation": "lower",
                        **dict.fromkeys(["latency_min", "latency_max", "latency", "latency_avg",
                                         "latency_stdev", "latency_p99", "latency_p999"],
                                        "lower")}

    iterations = variable(int, value=5000)

    @property
    def needs_gpu(self) -> bool:
        return getattr(self, "memory", "host") == "cuda"

    @run_after("setup")
    def need_an_rdma_device(self):
        """perftest speaks verbs: without an RDMA port it cannot run (unless every
        program it needs is replayed from a recording). The compute nodes' topology file
        says whether they have one, never the host that runs ReFrame (a login node often
        has no HCA), so a dry run (`perfguard checks`) skips it as a run would."""
        if all(map(self.replays, self.programs_needed())):
            return
        topology = partition_topology(self.current_partition)
        self.skip_saying_if(topology is None,
                            f"no topology file describes the HCAs of "
                            f"{self.current_partition.fullname}: perftest needs an RDMA "
                            f"device (`perfguard topology detect` on a node)")
        if self.hca != AUTO_HCA:
            hca = topology.node.hca(self.hca)
            self.skip_saying_if(not hca.rdma, f"{hca.name} is a {hca.link_layer} port, not "
                                              f"an RDMA device: perftest needs InfiniBand "
                                              f"or RoCE")
        self.skip_saying_if(not any(h.rdma for h in topology.node.hcas),
                            f"the topology of {self.current_partition.fullname} lists no RDMA "
                            f"device: perftest needs InfiniBand or RoCE")

    @run_after("setup")
    def pin(self):
        self.pin_to_hca(self.hca, 1, device_buffers=self.needs_gpu,
                        flavour="openmpi-ucx")
        # perftest is not MPI: HCA and GPU go on its command line, not in UCX variables.
        self.env_vars.pop("UCX_NET_DEVICES", None)
        self.env_vars.pop("CUDA_VISIBLE_DEVICES", None)
        self.srun_extra = [o for o in self.srun_extra if not o.startswith("--gpu-bind")]
        # every GPU stays visible and --use_cuda names the chosen one: no per-rank choice
        # for the rank-GPU step to prove
        self.rank_gpus = []

    def programs_needed(self) -> list[str]:
        return [program_path(self.verb, self.measure)]

    def program(self, verb: str, measure: str) -> str:
        return self.provided(program_path(verb, measure))

    def common_options(self, verb: str, duration: int = 0) -> list[str]:
        """Options server and client must share: device, port, GID, iterations or
        duration, memory."""
        count = ["-D", str(duration)] if duration else ["-n", str(self.iterations)]
        options = ["-p", PORT, "-F", *count, *VERBS[verb][1]]
        topology = partition_topology(self.current_partition)
        if topology is not None and self.hca != AUTO_HCA:
            hca = topology.node.hca(self.hca)
            options += ["-d", hca.name, "-i", str(hca.port)]
            if hca.gid_index is not None or hca.link_layer.lower() == "ethernet":
                options += ["-x", str(hca.gid_index if hca.gid_index is not None else 3)]
        if self.needs_gpu:
            options.append(f"--use_cuda={self.pinned_gpu}")
        return options

    def numactl(self) -> str:
        """srun's core map already binds each side to the HCA's NUMA domain; numactl keeps
        its memory there (valid on the embedded cluster's virtual NUMA domains too)."""
        return "numactl --localalloc " if self.pinned_cores else ""

    def pair(self, verb: str, measure: str, extra: list[str], duration: int = 0) -> str:
        """One `run_pair` line: identical options on both sides, the client adds the host."""
        return pair_line(" ".join([self.numactl() + self.program(verb, measure),
                                   *self.common_options(verb, duration), *extra,
                                   *self.users_options()]))


@rfm.simple_test
class PerftestCheck(PerftestBase):
    """Bandwidth (full size sweep) and latency (small messages) between two nodes, or
    through one HCA on one node (loopback: the per-node HCA health check)."""

    verb = parameter(list(VERBS))
    measure = parameter(["bw", "lat"])
    memory = parameter(["host", "cuda"])
    placement = parameter(["pair", "loopback"])
    descr = "perftest RDMA verbs per HCA"

    #: Latency sizes; atomics are always 8 bytes.
    latency_sizes = variable(typ.List[int], value=[2, 8, 64, 512, 4096])

    @run_after("init")
    def shape(self):
        self.num_tasks = 2
        self.pair_tasks_per_node = 2 if self.placement == "loopback" else 1
        atomic = self.verb.startswith("atomic")
        # CUDA memory: perftest supports latency only for read and send; no atomics.
        cuda_ok = not atomic and (self.measure == "bw" or self.verb in ("read", "send"))
        if self.memory == "cuda" and not cuda_ok:
            self.valid_systems = []

    @property
    def sizes(self) -> list[int]:
        if self.verb.startswith("atomic"):
            return [8]
        return list(self.latency_sizes) if self.measure == "lat" else []

    def compose_steps(self, srun: str) -> None:
        self.pair_steps(srun)
        if self.measure == "bw" and not self.verb.startswith("atomic"):
            self.executable = self.pair(self.verb, "bw", ["-a"])
        else:
            self.executable = per_size(
                self.sizes, lambda size: self.pair(self.verb, self.measure, ["-s", str(size)]))

    @sanity_function
    def validate(self):
        text = read_output(self)
        blocks = text.split("# perfguard size=")[1:] if self.sizes else [text]
        results = [parsed(parser.parse, block) for block in blocks]
        if self.sizes and len(results) != len(self.sizes):
            raise SanityError(f"measured {len(results)} sizes, expected {self.sizes}")
        self.result = results[0]
        for result in results[1:]:
            self.result.sizes += result.sizes
            for column, values in result.table.items():
                self.result.table[column] += values
        for metric, values in self.result.table.items():
            self.record_series(metric, self.result.units[metric], values,
                               size=self.result.sizes)
        return True

    @run_after("setup")
    def key_figures(self):
        if self.measure == "lat":
            self.perf_variables = {"latency": make_performance_function(
                lambda: self.result.at("latency", self.result.sizes[0]), "us")}
            return
        # No --report_gbits: perftest reports 2^20 bytes/s whatever its label says.
        self.perf_variables = {"bandwidth": make_performance_function(
            lambda: self.result.at("bandwidth"), "MiB/s")}
        if self.verb.startswith("atomic"):
            self.perf_variables["message_rate"] = make_performance_function(
                lambda: self.result.at("message_rate"), "Mpps")


@rfm.simple_test
class PerftestInterferenceCheck(PerftestBase):
    """8-byte ``verb`` latency or bandwidth, alone and while ``interferer`` saturates the
    same HCA from a second pair; ``degradation`` is the relative loss."""

    verb = parameter(["atomic_fadd", "atomic_cswap", "write", "read"])
    measure = parameter(["bw", "lat"])
    interferer = parameter(["write", "read", "atomic_fadd", "atomic_cswap"])
    num_tasks = 4
    pair_tasks_per_node = 2
    descr = "perftest with interfering traffic on the same HCA"
    #: How long the interfering pair runs (perftest -D), long enough to cover the test.
    interference_seconds = variable(int, value=30)

    def programs_needed(self) -> list[str]:
        return [*super().programs_needed(), program_path(self.interferer, "bw")]

    def compose_steps(self, srun: str) -> None:
        self.pair_steps(srun)
        measured = self.pair(self.verb, self.measure, ["-s", "8"])
        interfering = self.pair(self.interferer, "bw", ["-s", "8"],
                                duration=self.interference_seconds)
        self.executable = "\n".join([
            'echo "# perfguard phase=alone"', f"{measured} || exit $?",
            # The interfering pair uses ports far from ours and runs in the background;
            # we measure once its client has printed its table header (it is sending).
            # It is load, stopped by a kill once we have measured: its steps are helpers.
            f"(pg_port=$((pg_port + 100)); {HELPER_SRUNS}; {interfering}) "
            f"> interference.out 2>&1 &",
            "interference=$!",
            'timeout 60 bash -c "until grep -q \'#bytes\' interference.out; do sleep 0.2; '
            'done" || { echo "perfguard: interfering pair never started" >&2; exit 1; }',
            'echo "# perfguard phase=interfered"', f"{measured}; rc=$?",
            # its status the step's, and the job goes on to its end (cpu_wait.end_step)
            "kill $interference 2>/dev/null; wait $interference; (exit $rc)",
        ])

    @sanity_function
    def validate(self):
        text = read_output(self)
        if "# perfguard phase=interfered" not in text:
            raise SanityError("the measurement under interference did not run")
        alone_text, interfered_text = text.split("# perfguard phase=interfered")
        self.alone = parsed(parser.parse, alone_text)
        self.interfered = parsed(parser.parse, interfered_text)
        metric = "latency" if self.measure == "lat" else "bandwidth"
        for phase, result in (("none", self.alone), (self.interferer, self.interfered)):
            self.record_series(metric, result.units[metric], [result.at(metric)], size=8,
                               interference=phase)
        return True

    @performance_function("")
    def degradation(self):
        """Relative loss: slower latency or lower bandwidth under interference."""
        metric = "latency" if self.measure == "lat" else "bandwidth"
        alone, loaded = self.alone.at(metric), self.interfered.at(metric)
        return (loaded - alone) / alone if metric == "latency" else (alone - loaded) / alone
