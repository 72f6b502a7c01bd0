"""Cluster sanity: MPI ranks land on distinct nodes with the core binding we asked for.

This is the template every perfguard check follows: parameters and variables at
the top, launch and binding from ``common``, sanity that proves the job ran the
way it was meant to run.
"""

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, sanity_function, variable
from reframe.core.exceptions import SanityError

from reframe_tests.common.base import LaunchedCheck
from reframe_tests.common.binding import mask_of, parse_mask, srun_masks


@rfm.simple_test
class MpiHelloCheck(rfm.RegressionTest, LaunchedCheck):
    descr = "MPI hello: ranks on distinct nodes, CPU mask as requested"
    valid_systems = ["+mpi"]
    valid_prog_environs = ["+mpi"]
    sourcepath = "mpi_hello.c"
    build_system = "SingleSource"
    num_tasks = 2
    tags = {"sanity", "demo", "nightly", "acceptance"}

    #: Expected CPU mask per host, e.g. ``node1:0x1,node2:0x2``. Empty: with
    #: ``--cpu-bind=cores`` each rank must own exactly one of its node's cores (the
    #: partition's ``node_cpus``); which one is Slurm's choice on a multi-core node.
    expected_masks = variable(typ.Dict[str, str], value={})

    @run_after("setup")
    def one_rank_per_node(self):
        self.num_tasks_per_node = self.steerable(
            "num_tasks_per_node", 1, fixed="MPI hello proves its ranks land on distinct "
                                          "nodes: one on each")

    @sanity_function
    def validate(self):
        """Every rank reported, on distinct hosts, bound as srun says and as expected."""
        ranks = sn.evaluate(sn.extractall(
            r"rank (?P<rank>\d+) of \d+ host (?P<host>\S+) affinity (?P<mask>0x[0-9a-f]+)",
            self.stdout, tag=("rank", "host", "mask"), conv=(int, str, str)))
        if len(ranks) != self.num_tasks:
            raise SanityError(f"expected {self.num_tasks} ranks to report, got {len(ranks)}")
        hosts = {host for _, host, _ in ranks}
        if len(hosts) != self.num_tasks:
            raise SanityError(f"ranks share a host: {sorted(hosts)}")
        stderr = sn.evaluate(sn.extractall(r".*cpu-bind=.*", self.stderr))
        reported = srun_masks("\n".join(stderr))
        for rank, host, mask in ranks:
            self.check_rank_binding(rank, host, parse_mask(mask), reported)
        return True

    def check_rank_binding(self, rank, host, actual, reported):
        """srun's reported mask == the kernel's mask == the expected mask."""
        if rank not in reported:
            raise SanityError(f"srun reported no cpu-bind mask for task {rank}")
        srun_host, _, srun_mask = reported[rank]
        if (srun_host, srun_mask) != (host, actual):
            raise SanityError(f"rank {rank}: srun bound {srun_host} to {hex(srun_mask)} but "
                              f"the process on {host} runs with {hex(actual)}")
        expected = self.expected_masks.get(host)
        if expected is not None and parse_mask(expected) != actual:
            raise SanityError(f"rank {rank} on {host}: CPU mask {hex(actual)}, "
                              f"expected {expected}")
        own = self.current_partition.extras.get("node_cpus", {}).get(host)
        if expected is None and self.cpu_bind == "cores" and own and not (
                bin(actual).count("1") == 1 and actual & mask_of(own)):
            raise SanityError(f"rank {rank} on {host}: CPU mask {hex(actual)} is not one "
                              f"core of the node's CPUs {own}")
