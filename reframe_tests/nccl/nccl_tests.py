"""NCCL bus bandwidth with nccl-tests (seed 003): all_reduce, all_gather, reduce_scatter
and sendrecv across the GPU partition's nodes, one rank per GPU.

The figure every GPU acceptance test reads is ``busbw``: the algorithm bandwidth scaled
to what each link carried, comparable across GPU counts. Each local rank owns one GPU
(``-g 1``; ``--gpu-bind=map_gpu`` and its cores on that GPU's NUMA domain, from the
topology); NCCL may use only the topology's HCAs (``NCCL_IB_HCA``, exact names) and
picks the one closest to each GPU itself. Sanity proves the path from NCCL's own INFO
lines: every peer across the fabric over NET/IB, through those HCAs, with GPUDirect RDMA
where each GPU shares a PCIe switch with an HCA (PIX/PXB, where NCCL enables it by
default); a silent fall-back to sockets or to bounce buffers is test-failed, not a slow
pass. Where the fabric reduces in the switches (topology feature ``sharp``) all_reduce
also runs with NCCL's collective network (CollNet, SHARP) on, every rank proven to have
connected it. Every size's busbw, algbw and time is stored as a curve; the key figures
are the busbw at the largest size and the mean busbw over the sizes, out of place.

A GPU partition without an RDMA HCA runs on one node (its GPUs over NVLink, PCIe or
shared memory, proven by the absence of a network channel). One rank in all (a node with
one GPU) measures no collective: busbw is 0 by definition, so those skip saying so;
sendrecv then sends to itself, a copy on the GPU (1904 GB/s at 1 GiB on an H200).

Which GPU a rank computes on is nccl-tests' own rule, not OMB's (``src/common.cu``,
``run()``: ``gpus[i] = (NCCL_TESTS_DEVICE set ? it : localRank*nThreads*nGpus) + i``,
localRank counted from the hostnames of the MPI ranks): with every GPU visible, local rank
R takes device R, which is the topology's order once CUDA_VISIBLE_DEVICES lists it; where
Slurm binds each task to one GPU (GRES, ``--gpu-bind=map_gpu``) every rank sees a single
device 0, so ``NCCL_TESTS_DEVICE=0`` (without it local rank 1 asks for device 1: "Invalid
number of GPUs: 2 requested but only 1 were found", recorded on an H200). Sanity then
reads each rank's GPU from NCCL's own ``ncclCommInitRank… cudaDev D nvmlDev N busId B``
lines; two ranks on one GPU are NCCL's own refusal ("Duplicate GPU detected").
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, sanity_function, variable
from reframe.core.exceptions import SanityError
from reframe.utility.sanity import make_performance_function

from reframe_tests.common import providers, time_limit
from reframe_tests.common.base import MeasuredCheck
from reframe_tests.common.output import parsed, read_output
from reframe_tests.common.pinning import partition_topology, with_feature
from reframe_tests.nccl import parser


@rfm.simple_test
class NcclTestsCheck(rfm.RunOnlyRegressionTest, MeasuredCheck):
    """nccl-tests' ``*_perf`` over every GPU of ``num_nodes`` nodes, the path proven."""

    test = parameter(["all_reduce_perf", "all_gather_perf", "reduce_scatter_perf",
                      "sendrecv_perf"])
    #: NCCL's collective network (SHARP through the plugin) on, where the partition's
    #: topology says ``sharp``, and off; all_reduce only, the collective it serves.
    collnet = parameter(["off", "on"])
    descr = "NCCL bus bandwidth (nccl-tests), one rank per GPU, NET/IB and GDR proven"
    valid_systems = ["+gpu"]
    valid_prog_environs = ["+mpi"]
    tags = {"nccl", "gpu", "collectives", "acceptance"}
    perfguard_better = {"busbw": "higher", "algbw": "higher", "time": "lower",
                        "mean_busbw": "higher"}
    #: Nodes to span; 0 takes the partition's ``num_nodes`` (topology ``nodes``), or one
    #: node where the partition has no RDMA HCA.
    num_nodes = variable(int, value=0)
    #: Message sizes (nccl-tests ``-b``/``-e``, doubling with ``-f 2``).
    min_size = variable(int, value=8)
    max_size = variable(int, value=1 << 30)
    #: The HCAs NCCL may use (``mlx5_0:1``) and whether GPUDirect RDMA is expected: set
    #: from the topology after setup, read by sanity.
    nccl_hcas = variable(list, value=[])
    expect_gdr = variable(bool, value=False)

    @run_after("init")
    def collnet_only_where_the_fabric_reduces(self):
        if self.collnet == "on":
            self.valid_systems = with_feature(self.valid_systems, "sharp") \
                if self.test == "all_reduce_perf" else []

    @run_after("setup")
    def one_rank_per_gpu(self):
        topology = partition_topology(self.current_partition)
        self.skip_saying_if(topology is None, f"{self.current_partition.fullname} has no "
                                              f"topology file: its GPUs and HCAs are unknown")
        node = topology.node
        self.nccl_hcas = [f"{hca.name}:{hca.port}" for hca in node.hcas if hca.rdma]
        nodes = (self.num_nodes or self.current_partition.extras.get("num_nodes", 2)
                 if self.nccl_hcas else 1)
        self.num_tasks_per_node = self.steerable(
            "num_tasks_per_node", len(node.gpus),
            fixed=f"one rank per GPU, {len(node.gpus)} on a node of "
                  f"{self.current_partition.fullname} (nccl-tests' -g 1)")
        self.num_tasks = nodes * len(node.gpus)
        self.skip_saying_if(self.num_tasks < 2 and self.test != "sendrecv_perf",
                            f"one GPU in all on {self.current_partition.fullname}: a collective "
                            f"over one rank moves nothing (busbw 0 by definition)")
        self.executable = self.provided(f"bin/{self.test}")
        if self.collnet == "on":
            self.collnet_through_the_plugin()
        self.executable_opts = self.steerable("executable_opts", [
            "-b", str(self.min_size), "-e", str(self.max_size), "-f", "2", "-g", "1"])
        self.pin_cores(node.cores_near_gpus(node.gpus))
        self.pin_gpus(topology, node.gpus)
        if self.srun_gpu_bound():
            self.env_vars["NCCL_TESTS_DEVICE"] = "0"  # each task sees its one GPU only
        self.expect_gdr = node.every_gpu_shares_a_switch_with_an_hca()
        only_these_hcas = ({"NCCL_IB_HCA": "=" + ",".join(self.nccl_hcas)}
                           if self.nccl_hcas else {})
        self.env_vars.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
                              **only_these_hcas,
                              "NCCL_COLLNET_ENABLE": "1" if self.collnet == "on" else "0"})
        self.perf_variables = {
            "busbw": make_performance_function(
                lambda: self.result.at("busbw", self.max_size), "GB/s"),
            "mean_busbw": make_performance_function(lambda: self.result.mean_busbw, "GB/s")}

    def expected_work_s(self) -> float:
        """nccl-tests' own counts at each size (``src/common.cu``: 20 timed iterations,
        warm-up 1 in 2.19, 5 in older releases (5 counted), one data check, out of place
        and in place), each moving about twice the size per rank (an allreduce's
        reduce-scatter and all-gather), at the floor rate (time_limit.py)."""
        sizes = time_limit.doubling_sizes(self.min_size, self.max_size)
        return time_limit.sweep_seconds([(2 * (5 + 20 + 1) * 2, size) for size in sizes])

    def collnet_through_the_plugin(self) -> None:
        """CollNet exists only through a net plugin (NCCL ``src/plugin/net.cc``: without
        NCCL_NET_PLUGIN it dlopens ``libnccl-net.so``; ``collNetSupport()`` is
        ``comm->ncclCollNet != nullptr``): a stack known to have none skips the variant
        saying how to add one. dlopen searches LD_LIBRARY_PATH, not libnccl's RUNPATH
        (the NCCL package's own prefix, not the view or prefix beside it): the
        provider's library directory goes first on it, in every NCCL version."""
        lacking = self.lacks("nccl-collnet")
        self.skip_saying_if(lacking is not None, f"CollNet asked for, but {lacking}")
        library_dir = providers.library_dir(self.binary_provider)
        if library_dir:
            self.env_vars["LD_LIBRARY_PATH"] = f"{library_dir}:$LD_LIBRARY_PATH"

    def last_before_the_benchmark(self) -> list[str]:
        """No rank-GPU helper step: it applies OMB's device rule, and NCCL's own init lines
        prove each rank's GPU (sanity)."""
        return []

    def explain_job_problem(self, problem: str) -> str:
        """A job that failed says NCCL's own cause where NCCL gave one (a fabric forced
        with ``NCCL_NET=IB`` and no HCA up: 'Failed to initialize any NET plugin')."""
        causes = parser.failure_causes(read_output(self) + read_output(self, "stderr"))
        return f"{problem}: " + "; ".join(causes) if causes else problem

    @sanity_function
    def validate(self):
        """A complete, correct table; NCCL's path as asked; each rank on its GPU."""
        self.result = parsed(lambda text: parser.parse(text, self.max_size), read_output(self))
        text = read_output(self) + read_output(self, "stderr")
        problems = (parser.transport_problems(text, self.nccl_hcas, self.expect_gdr)
                    if self.nccl_hcas else parser.network_inside_a_node(text))
        problems += parser.rank_gpu_problems(text, self.rank_gpus, self.num_tasks_per_node)
        collnet = parser.collnet_problem(text, self.num_tasks, self.collnet == "on")
        problems += [collnet] if collnet else []
        if problems:
            raise SanityError("NCCL's path differs from the request: " + "; ".join(problems))
        for metric, unit in (("busbw", "GB/s"), ("algbw", "GB/s"), ("time", "us")):
            self.record_series(metric, unit, getattr(self.result, metric),
                               size=self.result.sizes)
        return True
