"""The parsers and proofs on what real stacks printed, as people posted it publicly.

Every fixture is a verbatim excerpt of a GitHub issue or a repository file, listed with
its source in tests/data/public/SOURCES.md. Each test compares parsed figures with the
literal text of a few rows, and each failure with the tool's own words."""

from __future__ import annotations

import pytest

from perfguard.contract.topology import parse_cpu_list
from perfguard.site.detect import parse_nvidia_topo
from reframe_tests.gpcnet import parser as gpcnet
from reframe_tests.himeno import parser as himeno
from reframe_tests.nccl import parser as nccl
from reframe_tests.omb import parser as omb
from reframe_tests.perftest import parser as perftest
from reframe_tests.ucx import parser as ucx
from tests.facts import DATA

PUBLIC = DATA / "public"


def public(tool: str, name: str) -> str:
    return (PUBLIC / tool / f"{name}.txt").read_text()


# --- nccl-tests with NVIDIA's RDMA/SHARP net plugin -----------------------------------

#: nccl-tests issue 311: 4 nodes x 2 A100, nccl-rdma-sharp-plugins (IBext_v8), NCCL 2.23.4.
COLLNET_FALLBACK = "nccl-tests-311-collnet-fallback-ibext-v8"
#: The six HCAs NCCL_IB_HCA would name on those nodes (the plugin's "Using" line).
HCAS_311 = ["mlx5_2:1", "mlx5_0:1", "mlx5_6:1", "mlx5_8:1", "mlx5_9:1", "mlx5_4:1"]


def test_the_sharp_plugins_ibext_v8_channels_are_net_over_ib_with_gdr() -> None:
    """``via NET/IBext_v8/1/GDRDMA`` (and PXN's ``NET/IBext_v8/5(2)/GDRDMA``) is the
    plugin's IB transport: no problem where IB with GPUDirect RDMA was asked."""
    text = public("nccl", COLLNET_FALLBACK)
    assert nccl.transport_problems(text, HCAS_311, gdr=True) == []


@pytest.mark.parametrize("name", ["nccl-1453-ibext-v8-tagged-output", "nccl-1357-ibext-h100-pxn"])
def test_ibext_channels_of_other_public_runs_are_net_over_ib(name: str) -> None:
    text = public("nccl", name)
    problems = nccl.transport_problems(text, [], gdr=True)
    assert not [p for p in problems if "not NET/IB" in p or "GPUDirect" in p], problems


def test_a_sharp_marked_hca_is_the_hca_itself() -> None:
    """``[0]mlx5_2:1/IB/SHARP``: the plugin marks a SHARP-capable port; the HCA is
    mlx5_2:1, inside NCCL_IB_HCA."""
    text = public("nccl", "nccl-tests-311-collnet-hang-ib-sharp")
    assert not [p for p in nccl.transport_problems(text, HCAS_311, gdr=True)
                if "outside NCCL_IB_HCA" in p]
    strays = [p for p in nccl.transport_problems(text, HCAS_311[:2], gdr=True)
              if "outside NCCL_IB_HCA" in p]
    assert strays == ["NCCL used mlx5_4:1, mlx5_6:1, mlx5_8:1, mlx5_9:1, outside NCCL_IB_HCA "
                      "mlx5_2:1,mlx5_0:1"]


def test_the_collnet_fallback_run_reads_as_its_table_and_is_named() -> None:
    text = public("nccl", COLLNET_FALLBACK)
    result = nccl.parse(text, 4294967296)
    # "      262144         65536     float     sum      -1    167.6    1.56    2.74      0"
    assert (result.at("time", 262144), result.at("algbw", 262144),
            result.at("busbw", 262144)) == (167.6, 1.56, 2.74)
    # "  4294967296    1073741824     float     sum      -1   346304   12.40   21.70      0"
    assert result.at("time", 4294967296) == 346304 and result.at("busbw", 4294967296) == 21.70
    assert result.average_busbw == 8.69534 and len(result.sizes) == 15
    problem = nccl.collnet_problem(text, 8, requested=True)
    assert problem is not None and "8 of 8 ranks" in problem
    assert "NCCL WARN Cannot initialize CollNet, using point-to-point network instead" in \
        nccl.failure_causes(text)


def test_each_of_eight_ranks_is_on_its_own_gpu_from_the_public_init_lines() -> None:
    text = public("nccl", COLLNET_FALLBACK)
    gpus = nccl.rank_gpus(text)
    assert sorted(gpus) == list(range(8))
    assert (gpus[4].host, gpus[4].cuda_device, gpus[4].bus_id) == ("gpu40", 0, 0x4c000)
    assert nccl.rank_gpu_problems(text, [], 2) == []


def test_ranks_that_printed_no_init_line_are_named() -> None:
    """The same 8-rank run cut short after six ranks said ``Init COMPLETE`` (a killed job
    leaves a prefix of its output): ranks 4 and 5 are unproven, named."""
    text = public("nccl", COLLNET_FALLBACK)
    cut = text[:text.index("gpu40:9455:9487 [0] NCCL INFO ncclCommInitRank")]
    assert sorted(nccl.rank_gpus(cut)) == [0, 1, 2, 3, 6, 7]
    problems = nccl.rank_gpu_problems(cut, [], 2)
    assert problems == ["ranks 4, 5 of 8 printed no 'NCCL INFO ncclCommInitRank… cudaDev …' "
                        "line: which GPU they used is unproven"]


def test_nccl_tests_cuda_failure_is_named_in_its_own_words() -> None:
    text = public("nccl", "nccl-tests-369-busy-exclusive-process")
    assert nccl.failure_causes(text) == [
        "nccl-tests: Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are busy "
        "or unavailable'"]
    with pytest.raises(nccl.ParseError, match="is/are busy or unavailable"):
        nccl.parse(text)


@pytest.mark.parametrize(("name", "cause"), [
    ("nccl-tests-338-system-not-initialized",
     "nccl-tests: Test CUDA failure common.cu:1030 'system not yet initialized'"),
    ("nccl-tests-355-illegal-memory-access",
     "nccl-tests: Test CUDA failure common.cu:389 'an illegal memory access was encountered'"),
])
def test_a_cuda_failure_before_or_inside_the_table_is_the_cause(name: str, cause: str) -> None:
    text = public("nccl", name)
    assert nccl.failure_causes(text)[0] == cause
    with pytest.raises(nccl.ParseError, match=cause.split(": ", 1)[1].replace("(", r"\(")
                       .replace(")", r"\)")):
        nccl.parse(text)


def test_wrong_results_at_one_size_are_named_and_the_figures_still_read() -> None:
    text = public("nccl", "nccl-tests-369-wrong-results-libfabric")
    with pytest.raises(nccl.ParseError, match="wrong results at 1048576 B"):
        nccl.parse(text)
    assert nccl.failure_causes(text) == ["nccl-tests: Test failure common.cu:1189"]


# --- nvidia-smi topo -m as people pasted it ----------------------------------------------

def topo(name: str) -> list[dict]:
    return parse_nvidia_topo(public("topo", name), f"topo/{name}")


def test_a_cpu_list_that_fills_its_column_is_apart_from_the_numa_affinity() -> None:
    """``GPU4    112-127,240-255 7``: one space between CPU and NUMA affinity where the
    CPU list fills its column (TransformerEngine's README, ``nvidia-smi topo -mp``)."""
    gpus = topo("transformerengine-encoder-readme-topo-mp")
    assert [(g["index"], g["numa"]) for g in gpus] == [
        (0, 3), (1, 3), (2, 1), (3, 1), (4, 7), (5, 7), (6, 5), (7, 5)]
    assert gpus[4]["cpus"] == [*range(112, 128), *range(240, 256)]


def test_columns_the_driver_printed_without_a_separator_are_apart() -> None:
    """Drivers 550 print ``NIC7NIC8`` in the header and ``SYSSYS`` in the rows of a
    10-NIC node (nccl-tests issue 311); each level is its own column."""
    gpus = topo("nccl-tests-311-a100-spaces-glued-columns")
    assert len(gpus) == 8 and gpus[0]["affinity"]["mlx5_0"] == "PXB"
    assert gpus[6]["affinity"]["mlx5_7"] == "PXB" and gpus[6]["affinity"]["mlx5_8"] == "SYS"
    assert (gpus[4]["numa"], gpus[4]["cpus"][:2], gpus[4]["cpus"][-1]) == (7, [56, 57], 127)


def test_tab_separated_with_glued_columns_and_the_gpu_numa_id() -> None:
    """vLLM issue 13855, an 8 x H100 node: tabs, ``NIC8NIC9``/``NODEPXB`` glued, the empty
    cell before ``GPU NUMA ID``."""
    gpus = topo("vllm-13855-h100-tabs-glued-columns")
    assert [g["numa"] for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[5]["affinity"]["NIC9"] == "PXB" and gpus[5]["affinity"]["NIC8"] == "NODE"
    assert gpus[7]["affinity"]["NIC11"] == "PXB" and gpus[0]["affinity"]["NIC0"] == "PXB"
    assert gpus[4]["cpus"][0] == 56 and len(gpus[4]["cpus"]) == 112


def test_an_empty_cpu_affinity_is_no_cpus_not_the_numa_node() -> None:
    """Under a Slurm cgroup nvidia-smi leaves the CPU Affinity of GPUs outside the job's
    CPUs empty (dask-cuda issue 1381): NUMA 1 is the NUMA affinity, no CPU list."""
    gpus = topo("dask-cuda-1381-a100-empty-cpu-affinity")
    assert [(g["numa"], len(g["cpus"])) for g in gpus] == [(0, 32)] * 4 + [(1, 0)] * 4
    assert gpus[6]["affinity"] == {"NIC0": "PHB"}


@pytest.mark.parametrize(("name", "numas", "cpus0"), [
    ("dask-cuda-1358-a100-2gpu-10nic", [3, 3], "48-63,176-191"),
    ("club-3090-46-5gpu", [1, 0, 0, 0, 0], "8-15,24-31"),
])
def test_plain_space_separated_matrices(name: str, numas: list[int], cpus0: str) -> None:
    gpus = topo(name)
    assert [g["numa"] for g in gpus] == numas
    assert gpus[0]["cpus"] == list(parse_cpu_list(cpus0, "test"))


# --- OSU Micro-Benchmarks ---------------------------------------------------------------

def test_omb_75_device_buffers_are_the_ones_asked_when_omb_prints_none() -> None:
    """OMB 7.4+ point-to-point prints no buffer line (``osu_bw.c`` calls
    ``print_preamble``, which prints the title only; ``print_header`` with "# Send Buffer
    on …" is no longer called): ``-d rocm D D`` measured D,D, asked and stored."""
    text = public("omb", "easybuild-25902-osu_bw-v7.5-rocm-DD-pair01")
    result = omb.parse(text, 134217728, buffers=("D", "D"))
    assert (result.version, result.device, result.buffers) == ("7.5", "ROCM", ("D", "D"))
    # "2048                  206.46" and "134217728          139961.80"
    assert result.at("bandwidth", 2048) == 206.46
    assert result.at("bandwidth", 134217728) == 139961.80


def test_omb_72_prints_its_buffers_and_they_must_be_the_asked_ones() -> None:
    text = public("omb", "eessi-716-osu_bw-v7.2-cuda-DD")
    result = omb.parse(text, 33554432, buffers=("D", "D"))
    assert result.buffers == ("D", "D") and result.at("bandwidth", 16384) == 3857.74
    with pytest.raises(omb.ParseError, match=r"asked H,H.*printed D,D"):
        omb.parse(text, buffers=("H", "H"))


def test_one_sided_omb_prints_its_buffers_as_rank_memory() -> None:
    """OMB 7.4 ``print_header_one_sided`` (``c/util/osu_util_mpi.c``): "# Rank 0 Memory
    on DEVICE (D) and Rank 1 Memory on HOST (H)"."""
    text = ("# OSU MPI-CUDA One Sided MPI_Put Bandwidth Test v7.4\n# Window creation: "
            "MPI_Win_allocate\n# Synchronization: MPI_Win_flush\n# Datatype: MPI_CHAR.\n"
            "# Rank 0 Memory on DEVICE (D) and Rank 1 Memory on HOST (H)\n"
            "# Size      Bandwidth (MB/s)\n1                       0.50\n")
    assert omb.parse(text).buffers == ("D", "H")


def test_omb_541_crash_after_its_header_is_no_result() -> None:
    text = public("omb", "ompi-4899-osu_bw-v5.4.1-cuda-psm2-segfault")
    with pytest.raises(omb.ParseError, match="no result rows"):
        omb.parse(text, buffers=("D", "D"))


def test_omb_73_collective_full_statistics_equal_the_text() -> None:
    result = omb.parse(public("omb", "ompi-12318-osu_reduce-v7.3-cuda-full"))
    # "128                    53.91             23.22            160.13        1000"
    assert (result.at("latency", 128), result.at("latency_min", 128),
            result.at("latency_max", 128)) == (53.91, 23.22, 160.13)
    assert result.table["Iterations"][-1] == 1000 and result.buffers == ("H", "H")


# --- perftest, ucx_perftest, GPCNeT ------------------------------------------------------

def test_perftest_gbits_row_equals_the_text() -> None:
    result = perftest.parse(public("perftest", "perftest-273-write-bw-postlist-gbits"))
    # " 8          224958464        0.00               0.48   \t\t   7.498617"
    assert (result.test, result.sizes, result.units["bandwidth"]) == (
        "RDMA_Write Post List BW Test", [8], "Gb/s")
    assert (result.at("bandwidth"), result.at("message_rate")) == (0.48, 7.498617)


def test_ucx_perftest_final_row_of_a_public_tag_bw_run() -> None:
    block = public("ucx", "ucx-10649-tag_bw-bond")
    # "Final:  1000  0.240  1675.942  1671.351  46615.58  46743.62  597  598"
    result = ucx.parse_final(block, 0, "tag_bw")
    assert (result.iterations, result.latency_p50_us, result.latency_us,
            result.bandwidth_mib_s, result.message_rate) == (1000, 0.240, 1671.351,
                                                             46743.62, 598)


def test_gpcnet_verbose_table_of_a_1790_node_run() -> None:
    result = gpcnet.parse(public("gpcnet", "gpcnet-8-network-test-14320-ranks"))
    assert (result.ranks, result.nodes) == (14320, 1790)
    table = result.table("Isolated Network Tests")
    assert table is not None
    assert table.rows["RR Two-sided Lat (8 B)"] == {
        "Min": 1.2, "Max": 22.2, "Avg": 1.5, "Avg(Worst)": 4.7, "99%": 3.6, "99.9%": 5.1}
    assert table.units["RR Two-sided Lat (8 B)"] == "usec"


# --- Himeno ----------------------------------------------------------------------------

def test_himeno_c_mpi_1999_small_run_equals_the_text() -> None:
    """RIKEN's himenoBMT_m.c (the 1999 C+MPI version, "Score based on MMX Pentium
    200MHz") run as one rank: no rehearsal line, MFLOPS after ``Loop executed``."""
    result = himeno.parse(public("himeno", "ogalush-anything-himenobmt-m-small-1rank"))
    # "Loop executed for 200 times" / "Gosa : 1.688606e-03 " / "MFLOPS measured : 3201.993813"
    assert (result.loops, result.gosa, result.mflops) == (200, 1.688606e-03, 3201.993813)


# --- OSU Micro-Benchmarks, host buffers, 5.0 to 7.4 --------------------------------------

@pytest.mark.parametrize(("name", "version", "metric", "rows", "last"), [
    # "0                       1.84" ... "4194304               497.37"
    ("libfabric-cray-859-osu_latency-v5.0-gni", "5.0", "latency",
     {0: 1.84, 16384: 13.62}, (4194304, 497.37)),
    # "131072                 96.99"
    ("aws-parallelcluster-osu_latency-v5.7.1-c5n-ubuntu2204-openmpi", "5.7.1", "latency",
     {0: 18.01, 131072: 96.99}, (4194304, 1469.88)),
    # "131072              12918.36" (the dip after 65536's 16349.49)
    ("aws-parallelcluster-osu_bibw-v5.7.1-p5-openmpi", "5.7.1", "bandwidth",
     {65536: 16349.49, 131072: 12918.36}, (4194304, 18666.02)),
    ("aws-parallelcluster-osu_alltoall-v5.7.1-p5-openmpi", "5.7.1", "latency",
     {1: 120.93, 256: 787.85}, (1048576, 682622.79)),
    # 7.4 prints "# Datatype: MPI_CHAR." before "# Size       Avg Latency(us)"
    ("ai-fabric-lab-osu_latency-v7.4-rxe", "7.4", "latency",
     {1: 24.87, 1024: 34.61}, (4194304, 43092.92)),
    ("ai-fabric-lab-osu_bw-v7.4-rxe", "7.4", "bandwidth",
     {1: 0.07, 8: 0.49}, (4194304, 101.40)),
    ("ai-fabric-lab-osu_allreduce-v7.4-rxe", "7.4", "latency",
     {2: 79.43, 8: 40.03}, (1048576, 18815.58)),
])
def test_omb_host_buffer_tables_equal_the_text(name: str, version: str, metric: str,
                                               rows: dict[int, float],
                                               last: tuple[int, float]) -> None:
    """Host-buffer runs print no buffer line in any version: host asked, host stored."""
    result = omb.parse(public("omb", name), last[0], buffers=("H", "H"))
    assert (result.version, result.device, result.buffers) == (version, None, ("H", "H"))
    assert {size: result.at(metric, size) for size in rows} == rows
    assert (result.sizes[-1], result.at(metric)) == last


def test_omb_titles_of_5x_collectives_and_bibw_are_read() -> None:
    assert omb.parse(public("omb", "aws-parallelcluster-osu_alltoall-v5.7.1-p5-openmpi")).name \
        == "All-to-All Personalized Exchange Latency"
    assert omb.parse(public("omb", "aws-parallelcluster-osu_bibw-v5.7.1-p5-openmpi")).name \
        == "Bi-Directional Bandwidth"


def test_omb_that_never_started_names_the_mpi_failure_in_its_own_words() -> None:
    """Open MPI over UCX on soft-RoCE: MPI_Init fails before OMB prints its title; the
    cause is UCX's and pml_ucx's, not "not OSU Micro-Benchmarks output"."""
    text = public("omb", "ai-fabric-lab-osu_allreduce-ucx-mpi-init-unreachable")
    assert omb.failure_causes(text) == [
        "UCX ERROR no auxiliary transport to <no debug data>: Unsupported operation",
        "pml_ucx: ucp_ep_create(proc=0) failed: Destination is unreachable",
        "It looks like MPI_INIT failed",
        "pml_ucx: ucp_ep_create(proc=1) failed: Destination is unreachable"]
    with pytest.raises(omb.ParseError,
                       match=r"ucp_ep_create\(proc=0\) failed: Destination is unreachable"):
        omb.parse(text)


# --- perftest, current labels ------------------------------------------------------------

def test_perftest_send_lat_percentile_row_equals_the_text() -> None:
    """ib_send_lat on rxe0: tabs inside the row, nine fields from #bytes to 99.9%."""
    result = perftest.parse(public("perftest", "ai-fabric-lab-ib_send_lat-rxe"))
    # " 1048576 200  3876.48  12387.37  9578.29  9079.12  2497.56  12209.71  12387.37"
    assert (result.test, result.kind, result.sizes[0], result.sizes[-1]) == (
        "Send Latency Test", "lat", 2, 8388608)
    assert [result.at(m, 1048576) for m in ("latency_min", "latency_max", "latency",
                                            "latency_avg", "latency_stdev", "latency_p99",
                                            "latency_p999")] == [
        3876.48, 12387.37, 9578.29, 9079.12, 2497.56, 12209.71, 12387.37]


def test_perftest_read_bw_row_equals_the_text() -> None:
    """ib_read_bw prints a second dashed line before its banner and a warning after the
    table; the row figures are the posted ones."""
    result = perftest.parse(public("perftest", "ai-fabric-lab-ib_read_bw-rxe"))
    # " 32768      300              414.47             270.51 \t\t   0.008656"
    assert (result.test, result.units["bandwidth"]) == ("RDMA_Read BW Test", "MiB/s")
    assert (result.at("bandwidth_peak", 32768), result.at("bandwidth", 32768),
            result.at("message_rate", 32768)) == (414.47, 270.51, 0.008656)
    assert len(result.sizes) == 23 and result.at("bandwidth") == 137.32
