"""GPCNeT: the fabric under complex patterns and under congestion (seed 003).

``network_test`` measures random- and natural-ring latency and bandwidth, allreduce and
alltoall over every node given; ``network_load_test`` runs the same sensitive tests
alone and then beside four congestors (incast, broadcast, alltoall, allreduce) on the
other nodes, and prints the congestion impact factors: how many times slower the
sensitive traffic became. Congestion control keeps them near 1X; a fabric without it, a
switch misconfigured after an upgrade, shows 10X and more. GPCNeT is meant for the whole
system: the check spans the partition's nodes (``num_nodes``), one rank per node by
default (``ranks_per_node``: GPCNeT's processes per NIC).

Every row of every table becomes a key figure, judged line by line: ``rr_two_sided_lat_avg``
(usec, lower is better), ``congested_rr_two_sided_bw_p99`` (MiB/s/rank, higher),
``impact_rr_two_sided_lat_avg`` (the factor, lower). Sanity proves the scale: GPCNeT's
own "Test with N MPI ranks (M nodes)" must be what was asked.

The impact factors are also judged absolutely, from night one: a fabric without working
congestion management (GPCNeT's README and paper: 10X and more) would otherwise be
learned as normal by its own history. ``impact_limits`` is the shipped bound (3X on the
average, 10X on the 99th percentile), a ReFrame reference of the check's own that a
site's threshold replaces. ``network_load_test`` measures the fabric only where each rank
has its own cores: on nodes that share a host's CPUs (the embedded cluster's virtual
nodes, topology ``nodes_share_host``) or with more ranks than cores, the congestors
compete for CPU, not links (measured there: 0.5X, congestion made an allreduce faster),
so it is skipped saying so unless ``load_test_on_shared_cores`` asks for it anyway.
"""

import math
import re

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, sanity_function, variable
from reframe.core.exceptions import SanityError
from reframe.utility.sanity import make_performance_function

from reframe_tests.common import time_limit
from reframe_tests.common.base import MeasuredCheck
from reframe_tests.common.binding import binding_errors
from reframe_tests.common.output import parsed, read_output
from reframe_tests.common.pinning import mpi_flavours, partition_topology
from reframe_tests.gpcnet import parser

#: GPCNeT's tests and the world allreduces their samples cost (network_test.c,
#: network_load_test.c ``#define NUM_*_TESTS``; at our recipe's samples_divisor 1).
GPCNET_WORK = {"network_test": (8, 2 * 10_000 + 4 * 10_000 + 100_000 + 10_000),
               "network_load_test": (3 + 4 * 4, 5 * (10_000 + 10_000 + 100_000))}
#: How long each GPCNeT test samples (TEST_TIMEOUT_SECS, network_test.h).
TEST_TIMEOUT_S = 10
#: The fewest nodes each program accepts (network_load_test: 2 + 2 per congestor test).
MINIMUM_NODES = {"network_test": 2, "network_load_test": 10}
#: Table title → prefix of its key figures.
PREFIXES = (("Isolated Network Tests", ""), ("Isolated Congestion Tests", "congestor_"),
            ("Network Tests running with Congestion Tests", "congested_"),
            ("Network Tests running with Congestion Tests - Key Results", "impact_"))


def figure_name(prefix: str, test: str, column: str) -> str:
    """``RR Two-sided Lat (8 B)``, ``99%`` → ``rr_two_sided_lat_p99``."""
    words = re.sub(r"\(.*?\)", "", test).lower()
    stem = re.sub(r"[^a-z0-9]+", "_", words).strip("_")
    stat = {"Avg": "avg", "99%": "p99"}.get(column, re.sub(r"\W+", "", column.lower()))
    return f"{prefix}{stem}_{stat}"


@rfm.simple_test
class GpcnetCheck(rfm.RunOnlyRegressionTest, MeasuredCheck):
    program = parameter(["network_test", "network_load_test"])
    descr = "GPCNeT network and congestion tests over the partition's nodes"
    valid_systems = ["+mpi"]
    valid_prog_environs = ["+mpi"]
    tags = {"gpcnet", "congestion", "acceptance"}
    #: Nodes to span; 0 takes the partition's ``num_nodes`` (topology ``nodes``).
    num_nodes = variable(int, value=0)
    #: GPCNeT's processes per NIC: 1 loads the fabric least (its README's first setting);
    #: a user's ``num_tasks_per_node`` (-S) is taken for it.
    ranks_per_node = variable(int, value=1)
    #: The congestion impact factor a fabric may show at all, per column (``avg``, ``p99``).
    impact_limits = variable(typ.Dict[str, float], value={"avg": 3.0, "p99": 10.0})
    #: Run network_load_test where ranks share cores (its figures are then not a fabric's).
    load_test_on_shared_cores = variable(bool, value=False)

    @run_after("setup")
    def shape(self):
        self.ranks_per_node = self.steerable("num_tasks_per_node", self.ranks_per_node)
        nodes = self.num_nodes or self.current_partition.extras.get("num_nodes", 2)
        self.skip_saying_if(nodes < MINIMUM_NODES[self.program],
                            f"{self.program} needs {MINIMUM_NODES[self.program]} nodes, the "
                            f"partition has {nodes} (set num_nodes or the topology's nodes)")
        shared = self.ranks_share_cores()
        self.skip_saying_if(
            self.program == "network_load_test" and shared and not self.load_test_on_shared_cores,
            f"network_load_test measures congestion in the fabric, but {shared}: the congestors "
            f"would compete for CPU, not links (set load_test_on_shared_cores to run it anyway)")
        self.num_tasks_per_node = self.ranks_per_node
        self.num_tasks = nodes * self.ranks_per_node
        self.executable = self.provided(f"bin/{self.program}")
        flavour = self.current_partition.extras.get("mpi_flavour", "openmpi-ucx")
        self.env_vars.update(mpi_flavours()[flavour].get("one_sided", {}))
        self.one_core_per_rank_where_nodes_share_a_host()

    def one_core_per_rank_where_nodes_share_a_host(self) -> None:
        """Virtual nodes on one host: each node's ranks on its own cores, as every other
        check there (pinning.plan's per-node maps). ``--cpu-bind=cores`` alone bound each
        node's rank to the first core of the node's share, so all 16 ranks of 16 virtual
        nodes ran on CPU 0 (srun reported ``mask 0x1`` for every task) and network_test
        took 14 min 35 s, and hit a 25-min limit, where one core each took 297 s."""
        topology = partition_topology(self.current_partition)
        if topology is not None and topology.nodes_share_host and topology.node.hcas:
            self.pin_to_hca(topology.node.hcas[0].name, self.ranks_per_node)

    def expected_work_s(self) -> float:
        """GPCNeT's cost from its source: each test samples until TEST_TIMEOUT_SECS (10 s,
        network_test.h), but checks that timeout with a blocking MPI_Allreduce over all
        ranks before every one of its samples, also after it has stopped measuring
        (``random_ring.c``, ``collectives.c``: ``if (TEST_TIMEOUT_SECS <= timeout)
        continue;`` after the allreduce). So a test costs 10 s plus its sample count of
        world allreduces (network_test: 2 x 10,000 latency, 4 x 10,000 bandwidth, 100,000
        allreduce and 10,000 alltoall samples; network_load_test: its three tests alone
        and beside each of four congestors), each a tree of 2 log2(ranks) messages at the
        floor rate (time_limit.py)."""
        tests, samples = GPCNET_WORK[self.program]
        hops = 2 * max(1, math.ceil(math.log2(max(2, self.num_tasks))))
        return tests * TEST_TIMEOUT_S + time_limit.sweep_seconds([(samples * hops, 8)])

    def ranks_share_cores(self) -> str:
        """Why this partition's ranks would share cores ('' where they would not)."""
        topology = partition_topology(self.current_partition)
        if topology is None:
            return ""
        if topology.nodes_share_host:
            return f"the nodes of {self.current_partition.fullname} share one host's CPUs"
        if self.ranks_per_node > topology.node.cores:
            return (f"{self.ranks_per_node} ranks per node exceed the node's "
                    f"{topology.node.cores} cores")
        return ""

    def impact_reference(self, names: list[str]) -> None:
        """The shipped bound on each impact factor, as the check's own reference."""
        bounds = {name: (1.0, None, self.impact_limits[name.rsplit("_", 1)[1]] - 1.0, "X")
                  for name in names if name.rsplit("_", 1)[1] in self.impact_limits}
        self.reference = {self.current_partition.fullname: bounds}

    @sanity_function
    def validate(self):
        """GPCNeT ran at the scale asked, each rank bound where asked, and printed its
        tables; each row's figures become key figures with their direction."""
        result = parsed(parser.parse, read_output(self))
        errors = binding_errors(read_output(self, "stderr"), self.num_tasks,
                                self.pinned_cores, self.expected_node_cores())
        if errors:
            raise SanityError("core binding differs from the request: " + "; ".join(errors))
        nodes = self.num_tasks // self.num_tasks_per_node
        if (result.ranks, result.nodes) != (self.num_tasks, nodes):
            raise SanityError(f"GPCNeT ran {result.ranks} ranks on {result.nodes} nodes, "
                              f"asked for {self.num_tasks} on {nodes}")
        if self.program == "network_load_test" and result.table(PREFIXES[3][0]) is None:
            raise SanityError("network_load_test printed no congestion impact factors")
        self.perf_variables, better = {}, {}
        for table in result.tables:
            prefix = next(p for title, p in reversed(PREFIXES) if table.title.startswith(title))
            for test, row in table.rows.items():
                unit = table.units[test]
                for column, value in row.items():
                    name = figure_name(prefix, test, column)
                    self.perf_variables[name] = make_performance_function(
                        lambda value=value: value, unit)
                    better[name] = "higher" if unit.startswith("MiB/s") else "lower"
        self.perfguard_better = better
        self.impact_reference([name for name in better if name.startswith(PREFIXES[3][1])])
        return True
