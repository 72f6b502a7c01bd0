"""Himeno (MPI C version): memory-bound Jacobi sweeps, scaled over nodes × ranks per node.

The C version fixes grid size and process grid at compile time, so each variant
builds its own binary: RIKEN's ``paramset.sh SIZE NDX NDY NDZ`` writes param.h
for a process grid chosen to match the rank count. The sources come from the
partition's binary provider (``share/himeno`` of the project's Spack package).

A sweep (seed 004) is every (nodes, ranks per node) pair for one size; each run
stores MFLOPS at its point, and speed-up and parallel efficiency relative to the
sweep's smallest run (1 node × 1 rank, a ReFrame dependency), so the scaling
table can be rebuilt from the database.
"""

import itertools

import reframe as rfm
import reframe.utility.udeps as udeps
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
)
from reframe.core.exceptions import SanityError

from reframe_tests.common.base import MeasuredCheck
from reframe_tests.common.binding import binding_errors
from reframe_tests.common.output import parsed, read_output
from reframe_tests.himeno.parser import parse

#: Interior grid (I, J, K) of each size, in the order of RIKEN's paramset.sh
#: (XS: mimax 33, mjmax 33, mkmax 65); the arrays are one larger in every dimension.
GRIDS = {"XS": (32, 32, 64), "S": (64, 64, 128), "M": (128, 128, 256),
         "L": (256, 256, 512), "XL": (512, 512, 1024)}
#: Single-precision arrays Himeno allocates over the grid: p, a[4], b[3], c[3], bnd, wrk1,
#: wrk2 (each one larger than the interior in every dimension).
ARRAYS = 14


def memory_mib(size: str, nodes: int) -> int:
    """What one node of a ``nodes``-node run holds of the grid (XL: ~14.4 GiB in all)."""
    cells = 1
    for extent in GRIDS[size]:
        cells *= extent + 1
    return -(-cells * 4 * ARRAYS // (nodes * 2**20))


#: Ranks per node as a share of the node's cores: 1 rank, a quarter, half, all.
RANK_STEPS = {"1": 0, "quarter": 4, "half": 2, "all": 1}


def process_grid(ranks: int, grid: tuple[int, int, int]) -> tuple[int, int, int]:
    """NDX·NDY·NDZ = ranks, splitting the longest dimensions first (least halo)."""
    best = None
    for ndx, ndy in itertools.product(range(1, ranks + 1), repeat=2):
        if ranks % (ndx * ndy):
            continue
        ndz = ranks // (ndx * ndy)
        local = (grid[0] / ndx, grid[1] / ndy, grid[2] / ndz)
        halo = local[0] * local[1] + local[1] * local[2] + local[0] * local[2]
        uneven = sum(g % n != 0 for g, n in zip(grid, (ndx, ndy, ndz)))
        key = (uneven, max(local), halo, max(ndx, ndy, ndz), -ndx)
        if best is None or key < best[0]:
            best = (key, (ndx, ndy, ndz))
    return best[1]


@rfm.simple_test
class HimenoCheck(rfm.RegressionTest, MeasuredCheck):
    size = parameter(list(GRIDS))
    nodes = parameter([1, 2, 4])
    ranks_step = parameter(list(RANK_STEPS))
    valid_systems = ["+mpi"]
    valid_prog_environs = ["+mpi"]
    build_system = "SingleSource"
    sourcesdir = None
    tags = {"himeno", "scaling", "acceptance"}
    descr = "Himeno MPI scaling over nodes and ranks per node"
    perfguard_better = {"mflops": "higher", "speedup": "higher", "efficiency": "higher"}

    @run_after("init")
    def depend_on_smallest_run(self):
        if (self.nodes, self.ranks_step) != (1, "1"):
            [first] = type(self).get_variant_nums(size=self.size, nodes=1, ranks_step="1")
            self.depends_on(type(self).variant_name(first), udeps.by_case)

    @run_after("setup")
    def shape(self):
        nodes = self.node_limit() or 1
        self.skip_saying_if(self.nodes > nodes,
                            f"needs {self.nodes} nodes, {self.node_limit_source()} {nodes}")
        needed, has = memory_mib(self.size, self.nodes), \
            self.current_partition.extras.get("memory_mib")
        self.skip_saying_if(has is not None and needed > has,
                            f"size {self.size} needs {needed} MiB per node on {self.nodes} "
                            f"node(s), the partition's nodes have {has} MiB (node.memory_mib)")
        cores = self.current_partition.processor.num_cpus or 1
        divisor = RANK_STEPS[self.ranks_step]
        self.ranks_per_node = 1 if divisor == 0 else max(1, cores // divisor)
        self.skip_saying_if(self.ranks_step != "1" and self.ranks_per_node == 1,
                            f"{cores} core(s) per node: this step is the 1-rank run")
        self.num_tasks_per_node = self.steerable(
            "num_tasks_per_node", self.ranks_per_node,
            fixed=f"ranks_step={self.ranks_step} fixes the ranks per node ({self.ranks_per_node} "
                  f"of {cores} cores): the sweep's points are its parameters")
        self.num_tasks = self.nodes * self.ranks_per_node
        self.grid = process_grid(self.num_tasks, GRIDS[self.size])

    @run_before("compile")
    def generate_parameters(self):
        """RIKEN's paramset.sh writes param.h for this size and process grid."""
        self.executable = "./himeno"
        if self.replaying:
            self.replay_instead_of_build()
            return
        ndx, ndy, ndz = self.grid
        source = self.provided("share/himeno/himenoBMTxps.c")
        directory = source.rsplit("/", 1)[0]
        self.prebuild_cmds = [f"cp {directory}/himenoBMTxps.c {directory}/paramset.sh .",
                              f"sh paramset.sh {self.size} {ndx} {ndy} {ndz}"]
        self.build_system.srcfile = "himenoBMTxps.c"
        self.build_system.executable = "himeno"
        self.build_system.cflags = ["-O3"]

    def replay_instead_of_build(self):
        """Replay provider: ./himeno replays the recording of this size and grid."""
        replay = self.provided("bin/himeno")
        self.build_system = "CustomBuild"
        self.build_system.commands = [
            f"printf '#!/bin/sh\\nexec {replay} \"$@\"\\n' > himeno", "chmod +x himeno"]
        ndx, ndy, ndz = self.grid
        self.env_vars["PERFGUARD_REPLAY_VARIANT"] = f"{self.size}-{ndx}x{ndy}x{ndz}"

    @sanity_function
    def validate(self):
        self.result = parsed(parse, read_output(self))
        errors = binding_errors(read_output(self, "stderr"), self.num_tasks, [])
        if errors:
            raise SanityError("core binding missing: " + "; ".join(errors))
        self.record_series("mflops", "MFLOPS", [self.result.mflops], nodes=self.nodes,
                           ranks_per_node=self.ranks_per_node, ranks=self.num_tasks,
                           ndx=self.grid[0], ndy=self.grid[1], ndz=self.grid[2])
        return True

    def smallest_run(self):
        if (self.nodes, self.ranks_step) == (1, "1"):
            return self
        [first] = type(self).get_variant_nums(size=self.size, nodes=1, ranks_step="1")
        return self.getdep(type(self).variant_name(first))

    @performance_function("MFLOPS")
    def mflops(self):
        return self.result.mflops

    @performance_function("")
    def speedup(self):
        return self.result.mflops / self.smallest_run().result.mflops

    @performance_function("")
    def efficiency(self):
        base = self.smallest_run()
        return self.result.mflops / base.result.mflops / (self.num_tasks / base.num_tasks)
