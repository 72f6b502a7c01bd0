"""Fabric sweep: every node's HCA in loopback, then every node pair once, in one job.

One Slurm allocation of the nodes to test; the rounds of disjoint pairs come from the
circle method (perfguard.contract.rounds), the pairs of a round run at once (``at_once``
caps that; where virtual nodes share the host's CPUs, one at a time). Where the leaf
switches are known (``switch_groups``), the rounds pair nodes within every leaf at once,
then one pair per leaf pair across the spine. Each pair is a
ucx_perftest server/client (bandwidth at 1 MiB, typical latency at 8 B) pinned to the HCA, its
NUMA cores and, for device memory, its GPU, as the UCX check is. A measurement that
fails is recorded as failed and the sweep goes on: a dead link is a finding, not a
reason to stop. `perfguard sweep` runs this check, retests failing pairs (``pairs``)
and blames the node, HCA or link.
"""

import shutil
from pathlib import Path

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

from perfguard.contract import circle_rounds, disjoint_rounds, in_slots, leaf_rounds
from reframe_tests.common.binding import binding_errors
from reframe_tests.common.output import parsed, read_output
from reframe_tests.common.pinning import map_cpu, partition_topology
from reframe_tests.common.server_client import ServerClientCheck
from reframe_tests.common.ucx_tool import UcxPerftestTool
from reframe_tests.sweep import parser

#: Runs on every node of a round's steps: its node's part in the round's pairs.
AGENT = Path(__file__).with_name("sweep_agent.sh")
#: The rounds, one per line, in the stage directory (kept with the output).
SCHEDULE = "sweep.schedule"
#: The job's time limit, unless set: the partition's, or this much for the job's start
#: and this much per slot of pairs (at once), whichever is longer; a pair measured in
#: 0.6 s on the embedded cluster, a slot of 256 pairs on a fabric in a few seconds.
SETUP_SECONDS, SLOT_SECONDS = 300, 3

# Bash for the job script: every node's address once (not an RPC per pair), and a round
# as one server step and one client step over the round's nodes (sweep_agent.sh).
ROUND_FUNCTIONS = r"""
pg_nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
declare -A pg_addr
while read -r pg_name pg_at; do pg_addr[$pg_name]=$pg_at; done < <(
    scontrol -o show node "$SLURM_JOB_NODELIST" |
    sed -n 's/^NodeName=\([^ ]*\) .*NodeAddr=\([^ ]*\) .*/\1 \2/p')
export PG_FIRST_PORT=${PG_FIRST_PORT:-$((20000 + SLURM_JOB_ID % 1000 * 12))}
sweep_schedule() {  # every round of sweep.schedule: NUMBER SLOT:SERVER:CLIENT...
    local number pairs
    while read -r -u 3 number pairs; do sweep_round "$number" $pairs; done 3< sweep.schedule
}
sweep_round() {  # NUMBER SLOT:SERVER:CLIENT... (@I: the I-th node of the allocation)
    local round=sweep.$1 pair slot server client index=0 servers=() clients=()
    shift
    : > "$round"
    for pair in "$@"; do
        IFS=: read -r slot server client <<< "$pair"
        if [ "${server:0:1}" = @ ]; then server=${pg_nodes[${server:1}]}; fi
        if [ "${client:0:1}" = @ ]; then client=${pg_nodes[${client:1}]}; fi
        echo "$slot $index $server $client ${pg_addr[$server]}" >> "$round"
        : > "$round.$index.port"; : > "$round.$index.done"
        servers+=("$server"); clients+=("$client"); index=$((index + 1))
    done
    local srun_role=$srun_server count=${#servers[@]}
    if [ "${servers[0]}" = "${clients[0]}" ]; then srun_role=$srun_loopback_server; fi
    echo "# perfguard ${round/sweep./round }"
    # No `wait -n` and no `kill -0 PID` here: the virtual nodes share the host's pids,
    # which wrap (pid_max 32768) within a 64-node sweep, and bash then took a new srun
    # for an old, finished job. The server step marks its own end in a file instead.
    { $srun_role -N "$count" -n "$count" -w "$(IFS=,; echo "${servers[*]}")" \
        bash sweep_agent.sh server "$round"; : > "$round.servers-ended"; } \
        >>server.out 2>>server.err &
    local server_step=$!
    $srun_client -N "$count" -n "$count" -w "$(IFS=,; echo "${clients[*]}")" \
        bash sweep_agent.sh client "$round" 2>"$round.err"
    for _ in 1 2 3 4 5 6 7 8 9 10; do  # the clients are done: servers end by themselves
        [ -e "$round.servers-ended" ] && break
        sleep 0.5
    done
    [ -e "$round.servers-ended" ] || kill "$server_step" 2>/dev/null
    wait "$server_step"
    cat "$round".*.out; cat "$round.err" "$round".*.err "$round".*.server >&2
}
""".strip("\n")


@rfm.simple_test
class FabricSweepCheck(UcxPerftestTool, rfm.RunOnlyRegressionTest, ServerClientCheck):
    descr = "fabric sweep: HCA loopback on every node, then every node pair once"
    memory = parameter(["host", "cuda"])
    valid_prog_environs = ["*"]
    tags = {"sweep"}
    steps_must_succeed = False  # a failed pair is a result (metric `failed`), not an error
    perfguard_better = {"bandwidth": "higher", "latency": "lower", "failed": "lower",
                        "worst_bandwidth": "higher", "worst_latency": "lower"}

    #: Nodes to sweep; empty: as many as the partition has, whichever Slurm gives.
    nodes = variable(typ.List[str], value=[])
    #: Pairs to measure instead of a full sweep ("node1:node3"): a retest.
    pairs = variable(typ.List[str], value=[])
    #: Each node's leaf switch ("node1:0"): pairs within every leaf, then one pair per
    #: leaf pair across the spine, instead of every pair.
    switch_groups = variable(typ.List[str], value=[])
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
        nodes = list(self.nodes) or sorted({n for p in self.retest_pairs for n in p}) or \
            [n for nodes in self.leaves_in_order().values() for n in nodes]
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

    def leaves_in_order(self) -> dict[str, list[str]]:
        """Leaf → its nodes, as ``switch_groups`` lists them."""
        leaves: dict[str, list[str]] = {}
        for entry in self.switch_groups:
            node, _, leaf = entry.partition(":")
            leaves.setdefault(leaf, []).append(node)
        return leaves

    def schedule(self) -> list[list[tuple[str, str]]]:
        """Rounds of (server, client): loopback first, then the circle method's rounds
        (within each leaf and across the spine where the switches are known); for a
        retest, its pairs in as few disjoint rounds as possible."""
        if self.pairs:
            return disjoint_rounds(self.retest_pairs)
        if self.switch_groups:
            leaves = list(self.leaves_in_order().values())
            return [[(n, n) for nodes in leaves for n in nodes]] + leaf_rounds(leaves)
        node = [f"@{i}" for i in range(self.num_tasks)]  # the i-th node Slurm allocated
        loopback = [(n, n) for n in node]
        return [loopback] + [[(node[a], node[b]) for a, b in pairs]
                             for pairs in circle_rounds(self.num_tasks)]

    def loopback_server(self, server: str) -> str:
        """In loopback the server shares the client's node: it takes the next core near
        the HCA (where virtual nodes share the host's cores, pair_sruns chose one)."""
        topology = partition_topology(self.current_partition)
        if topology is None or not self.pinned_cores or \
                self.current_partition.extras.get("nodes_share_host"):
            return server
        node = topology.node
        spare = [c for c in node.cores_near(node.hca(self.hca), 2) if c not in self.pinned_cores]
        return server.replace(self.cpu_bind, map_cpu(spare[:1])) if spare else server

    def compose_steps(self, srun: str) -> None:
        if self.first_port:
            self.env_vars["PG_FIRST_PORT"] = str(self.first_port)
        server, client = self.pair_sruns(srun)
        self.prerun_cmds += [
            f"srun_server='{server}'", f"srun_client='{client}'",
            f"srun_loopback_server='{self.loopback_server(server)}'",
            f"export PG_SWEEP_COMMAND='{self.ucx_perftest} -m {self.memory},{self.memory}"
            f"{''.join(' ' + option for option in self.users_options())}'",
            f"export PG_SWEEP_TESTS='tag_bw:{self.bandwidth_size}:{self.iterations} "
            f"tag_lat:{self.latency_size}:{self.iterations * 10}'",
            *ROUND_FUNCTIONS.splitlines()]
        # The schedule is a file beside the job script, not in it: a 512-node sweep is
        # 131,000 pairs, more than Slurm's largest batch script (4 MB by default).
        lines = []
        for number, pairs in enumerate(self.schedule()):
            slots = in_slots(pairs, self.at_once)
            lines.append(f"{number} " + " ".join(
                f"{slot}:{server}:{client}"
                for slot, chosen in enumerate(slots) for server, client in chosen))
        (Path(self.stagedir) / SCHEDULE).write_text("\n".join(lines) + "\n")
        self.keep_files = [*self.keep_files, SCHEDULE]
        if self.time_limit is None:  # not set by the user (-S): as long as the sweep needs
            slots = sum(len(in_slots(pairs, self.at_once)) for pairs in self.schedule())
            default = self.current_partition.time_limit or 0
            if isinstance(default, str):
                default = typ.Duration.__rfm_cast_str__(default)
            self.time_limit = max(default, SETUP_SECONDS + slots * SLOT_SECONDS)
        self.executable = "sweep_schedule"

    @run_before("run")
    def ship_the_agent(self):
        shutil.copy(AGENT, Path(self.stagedir) / AGENT.name)

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
        self._record(done, "tag_lat", "latency", "us", parser.typical_latency)
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
        return max(parser.typical_latency(r.result) for r in self._pairs_first("tag_lat"))
