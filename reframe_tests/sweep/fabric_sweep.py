"""Fabric sweep: every node's HCA in loopback, then every node pair once, in one job.

One Slurm allocation of the nodes to test; the rounds of disjoint pairs come from the
circle method (perfguard.sweep), the pairs of a round run at once (``at_once`` caps
that; where virtual nodes share the host's CPUs, one at a time). Each pair is a
ucx_perftest server/client (bandwidth at 1 MiB, latency at 8 B) pinned to the HCA, its
NUMA cores and, for device memory, its GPU, as the UCX check is. A measurement that
fails is recorded as failed and the sweep goes on: a dead link is a finding, not a
reason to stop. `perfguard sweep` runs this check, retests failing pairs (``pairs``)
and blames the node, HCA or link.
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

from perfguard.contract import circle_rounds, disjoint_rounds, in_slots
from reframe_tests.common.binding import binding_errors
from reframe_tests.common.output import parsed, read_output
from reframe_tests.common.pinning import map_cpu, partition_topology
from reframe_tests.common.server_client import ServerClientCheck
from reframe_tests.common.ucx_tool import UcxPerftestTool
from reframe_tests.sweep import parser

# Bash for the job script: one pair's bandwidth and latency (loopback when the server is
# the client), each block headed by its marker; run_pair comes from server_client.
MEASURE_FUNCTION = r"""
sweep_measure() {  # SERVER CLIENT SLOT
    local srun_server=$srun_server
    if [ "$1" = "$2" ]; then srun_server=$srun_loopback_server; fi
    pg_server_node=$1; pg_client_node=$2
    pg_server_addr=$(scontrol show node "$1" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
    pg_port=$((${PG_FIRST_PORT:-$((20000 + SLURM_JOB_ID % 1000 * 12))} + $3 * 4))
    local spec test size iterations cmd
    for spec in $sweep_tests; do
        IFS=: read -r test size iterations <<< "$spec"
        cmd="$sweep_command -t $test -s $size -n $iterations"
        echo "# perfguard sweep server=$1 client=$2 test=$test size=$size"
        run_pair "$cmd" "$cmd \$pg_server_addr" || echo "# perfguard sweep failed rc=$?"
    done
}
""".strip("\n")


@rfm.simple_test
class FabricSweepCheck(UcxPerftestTool, rfm.RunOnlyRegressionTest, ServerClientCheck):
    descr = "fabric sweep: HCA loopback on every node, then every node pair once"
    memory = parameter(["host", "cuda"])
    valid_prog_environs = ["*"]
    num_tasks_per_node = 1
    tags = {"sweep"}
    steps_must_succeed = False  # a failed pair is a result (metric `failed`), not an error
    perfguard_better = {"bandwidth": "higher", "latency": "lower", "failed": "lower",
                        "worst_bandwidth": "higher", "worst_latency": "lower"}

    #: Nodes to sweep; empty: as many as the partition has, whichever Slurm gives.
    nodes = variable(typ.List[str], value=[])
    #: Pairs to measure instead of a full sweep ("node1:node3"): a retest.
    pairs = variable(typ.List[str], value=[])
    #: Pairs measured at once; 0: a whole round (1 where virtual nodes share CPUs).
    at_once = variable(int, value=0)
    bandwidth_size = variable(int, value=1048576)
    latency_size = variable(int, value=8)
    #: Bandwidth iterations; latency runs ten times as many (each is 1000× shorter).
    iterations = variable(int, value=1000)

    @property
    def retest_pairs(self) -> list[tuple[str, str]]:
        return [tuple(p.split(":", 1)) for p in self.pairs]

    @run_after("setup")
    def size_the_allocation(self):
        nodes = list(self.nodes) or sorted({n for p in self.retest_pairs for n in p})
        self.num_tasks = len(nodes) or self.current_partition.extras.get("num_nodes", 2)
        if nodes:
            self.job.options += [f"--nodelist={','.join(nodes)}"]
        if not self.at_once and self.current_partition.extras.get("nodes_share_host"):
            self.at_once = 1  # virtual nodes on one host: concurrent pairs share its cores

    @run_after("setup")
    def locate_and_pin(self):
        self.locate_and_pin_ucx()
        self.perf_variables = {"worst_bandwidth": self.worst_bandwidth(),
                               "worst_latency": self.worst_latency()}

    def schedule(self) -> list[list[tuple[str, str]]]:
        """Rounds of (server, client): loopback first, then the circle method's rounds;
        for a retest, its pairs in as few disjoint rounds as possible."""
        if self.pairs:
            return disjoint_rounds(self.retest_pairs)
        node = [f"${{pg_nodes[{i}]}}" for i in range(self.num_tasks)]
        loopback = [(n, n) for n in node]
        return [loopback] + [[(node[a], node[b]) for a, b in pairs]
                             for pairs in circle_rounds(self.num_tasks)]

    def loopback_server(self) -> str:
        """In loopback the server shares the client's node: it takes the next core near
        the HCA (where virtual nodes share the host's cores, pair_steps chose one)."""
        topology = partition_topology(self.current_partition)
        server = next(line for line in self.prerun_cmds if line.startswith("srun_server="))
        if topology is None or not self.pinned_cores or \
                self.current_partition.extras.get("nodes_share_host"):
            return server.removeprefix("srun_server=")
        node = topology.node
        spare = [c for c in node.cores_near(node.hca(self.hca), 2) if c not in self.pinned_cores]
        return server.removeprefix("srun_server=").replace(self.cpu_bind, map_cpu(spare[:1])) \
            if spare else server.removeprefix("srun_server=")

    def compose_steps(self, srun: str) -> None:
        self.pair_steps(srun)
        self.prerun_cmds += [
            f"srun_loopback_server={self.loopback_server()}",
            # $pg_port stays literal here: run_pair's eval expands it per measurement
            f"sweep_command='{self.ucx_perftest} -m {self.memory},{self.memory} -p $pg_port'",
            f"sweep_tests='tag_bw:{self.bandwidth_size}:{self.iterations} "
            f"tag_lat:{self.latency_size}:{self.iterations * 10}'",
            *MEASURE_FUNCTION.splitlines(), "sweep_schedule() {"]
        for number, pairs in enumerate(self.schedule()):
            self.prerun_cmds.append(f'    echo "# perfguard round {number}"')
            for group, slot in enumerate(in_slots(pairs, self.at_once)):
                for index, (server, client) in enumerate(slot):
                    out = f"sweep.{number}.{group}.{index}"
                    self.prerun_cmds.append(f'    sweep_measure "{server}" "{client}" {index}'
                                            f' >{out}.out 2>{out}.err &')
                self.prerun_cmds.append("    wait")
            self.prerun_cmds.append(f"    cat sweep.{number}.*.out; cat sweep.{number}.*.err >&2")
        self.prerun_cmds.append("}")
        self.executable = "sweep_schedule"

    @sanity_function
    def measured_every_pair(self):
        results = parsed(parser.parse, read_output(self))
        expected = 2 * sum(len(pairs) for pairs in self.schedule())
        if len(results) != expected:
            raise SanityError(f"{len(results)} measurements in the output, the schedule has "
                              f"{expected}")
        done = [r for r in results if r.result is not None]
        if not done:
            raise SanityError("every measurement of the sweep failed (see the job's stderr)")
        errors = binding_errors(read_output(self, "stderr"), 1, self.pinned_cores)
        if errors:
            raise SanityError("client binding differs from the request: " + "; ".join(errors))
        self._record(done, "tag_bw", "bandwidth", "MiB/s", lambda r: r.bandwidth_mib_s)
        self._record(done, "tag_lat", "latency", "us", lambda r: r.latency_us)
        failed = [r for r in results if r.result is None]
        if failed:
            self.record_series("failed", "", [1.0] * len(failed),
                               server=[r.server for r in failed],
                               client=[r.client for r in failed],
                               test=[r.test for r in failed])
        self.results = done
        return True

    def _record(self, done, test: str, metric: str, unit: str, value) -> None:
        chosen = [r for r in done if r.test == test]
        if chosen:
            self.record_series(metric, unit, [value(r.result) for r in chosen],
                               server=[r.server for r in chosen],
                               client=[r.client for r in chosen])

    def _pairs_first(self, test: str) -> list:
        """Node pairs' results of ``test``, or the loopbacks where no pair was measured."""
        mine = [r for r in self.results if r.test == test]
        return [r for r in mine if r.server != r.client] or mine

    @performance_function("MiB/s")
    def worst_bandwidth(self):
        return min(r.result.bandwidth_mib_s for r in self._pairs_first("tag_bw"))

    @performance_function("us")
    def worst_latency(self):
        return max(r.result.latency_us for r in self._pairs_first("tag_lat"))
