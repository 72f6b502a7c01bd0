"""nccl-tests' table and NCCL's path lines, pure.

The real outputs are nccl-tests 2.19.6 with NCCL 2.28.9 on one H200, recorded
(tests/data/replay-h200/SOURCES.md): one rank, so no channel crossed the network. The
multi-node text below follows the formats as the sources print them (nccl-tests
``src/common.cu``: the header, rows, "# Out of bounds values" and "# Avg bus bandwidth"
lines; NCCL ``src/transport/net.cc`` and ``net_ib.cc``: the ``Channel … via
NET/IB/0/GDRDMA`` and ``NET/IB : Using [0]mlx5_0:1/IB`` INFO lines). Host names and
figures are made up."""

from __future__ import annotations

import pytest

from reframe_tests.nccl.parser import (
    ParseError,
    bus_number,
    collnet_problem,
    failure_causes,
    network_inside_a_node,
    parse,
    rank_gpu_problems,
    rank_gpus,
    transport_problems,
)
from tests.facts import DATA

H200 = DATA / "replay-h200"

HEADER = """#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""  # noqa: E501
ROWS = """           8             2     float     sum      -1    40.12    0.00    0.00      0    39.87    0.00    0.00      0
          16             4     float     sum      -1    40.55    0.00    0.00      0    40.02    0.00    0.00      0
          32             8     float     sum      -1    41.03    0.00    0.00      0    40.90    0.00    0.00      0
"""  # noqa: E501
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.00123 \n#\n"
INFO = """hgx01:4711:4790 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:10.1.0.1<0>
hgx01:4711:4790 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] [send] via NET/IB/0/GDRDMA
hgx01:4711:4790 [0] NCCL INFO Channel 00/0 : 12[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
hgx01:4711:4790 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
"""  # noqa: E501
HCAS = ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"]


def test_a_complete_table_gives_every_size_out_of_place() -> None:
    result = parse(HEADER + ROWS + FOOTER, max_size=32)
    assert result.sizes == [8, 16, 32] and result.time == [40.12, 40.55, 41.03]
    assert result.at("busbw", 32) == 0.0 and result.average_busbw == 0.00123


@pytest.mark.parametrize("text, message", [
    ("NCCL WARN NET/IB : No device found.\n", "no nccl-tests table header"),
    (HEADER + FOOTER, "header but no result rows"),
    (HEADER + ROWS.replace("      0\n", "      3\n", 1) + FOOTER, "wrong results at 8 B"),
    (HEADER + ROWS, "Out of bounds values : 0 OK"),
    (HEADER + ROWS + FOOTER, "ends at 32 B, expected 1073741824 B")])
def test_an_incomplete_or_wrong_run_is_named(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse(text, max_size=1 << 30)


def test_net_ib_with_gdrdma_through_the_topologys_hcas_is_the_asked_path() -> None:
    assert transport_problems(INFO, HCAS, gdr=True) == []


def test_sockets_bounce_buffers_and_stray_hcas_are_named() -> None:
    socket = INFO.replace("NET/IB/0/GDRDMA", "NET/Socket/0")
    assert transport_problems(socket, HCAS, gdr=True) == [
        "a channel went via NET/Socket/0, not NET/IB"]
    bounce = INFO.replace("/GDRDMA", "")
    assert transport_problems(bounce, HCAS, gdr=True) == [
        "a channel went via NET/IB/0 without GPUDirect RDMA (/GDRDMA), which the topology's "
        "GPU–HCA affinity allows"]
    assert transport_problems(bounce, HCAS, gdr=False) == []
    assert transport_problems(INFO, HCAS[:2], gdr=True) == [
        "NCCL used mlx5_2:1, mlx5_3:1, outside NCCL_IB_HCA mlx5_0:1,mlx5_1:1"]
    assert "no 'NCCL INFO Channel … via NET/…' line" in transport_problems("", HCAS, True)[0]


def test_collnet_is_proven_by_every_rank_connecting_it() -> None:
    """``rank %d Connected CollNet`` (NCCL src/init.cc) per rank; a rank without it fell
    back to rings and trees, silently."""
    lines = "".join(f"hgx0{r // 4 + 1}:4711:4790 [{r % 4}] NCCL INFO rank {r} Connected "
                    f"CollNet\n" for r in range(8))
    assert collnet_problem(lines, 8, requested=True) is None
    assert collnet_problem("", 8, requested=False) is None
    half = "".join(line + "\n" for line in lines.splitlines()[:4])
    assert collnet_problem(half, 8, requested=True).startswith(
        "CollNet (SHARP) requested but 4 of 8 ranks never said 'Connected CollNet'")
    assert collnet_problem(lines, 8, requested=False) == \
        "CollNet not requested but 8 ranks connected it"


@pytest.mark.parametrize("test, busbw, algbw", [
    ("all_reduce", 0.0, 2111.6), ("all_gather", 0.0, 2109.6), ("reduce_scatter", 0.0, 2110.7),
    ("sendrecv", 1904.4, 1904.4)])
def test_the_h200_recordings_give_28_sizes_out_of_place(test: str, busbw: float,
                                                         algbw: float) -> None:
    """The real table: two spaces before ``#wrong``, ``N/A`` and ``1e+06`` in place; the
    gathers' 8 B, rounded down to whole elements per rank, printed as 0 B."""
    result = parse((H200 / f"{test}_perf_g1.txt").read_text(), max_size=1 << 30)
    first = 0 if test in ("all_gather", "reduce_scatter") else 8
    assert result.sizes == [first] + [8 << i for i in range(1, 28)]
    assert (result.at("busbw", 1 << 30), result.at("algbw", 1 << 30)) == (busbw, algbw)


def test_the_mean_busbw_leaves_out_the_in_place_copy_of_nothing() -> None:
    """One rank sending to itself in place copies nothing (516831 GB/s): nccl-tests'
    average (18866.2) is not a figure of the GPU; the out-of-place mean is."""
    result = parse((H200 / "sendrecv_perf_g1.txt").read_text(), max_size=1 << 30)
    assert result.average_busbw == 18866.2
    assert result.mean_busbw == pytest.approx(460.56357, rel=1e-6)


def test_one_node_without_a_network_channel_is_the_asked_path() -> None:
    text = (H200 / "all_reduce_perf_g1.txt").read_text()
    assert "Using network Socket" in text  # NCCL set sockets up, and no channel used them
    assert network_inside_a_node(text) == []
    assert network_inside_a_node(INFO) == [
        "a channel inside the node went via NET/IB/0/GDRDMA: NCCL found no P2P or "
        "shared-memory path between the GPUs"]


def test_a_run_that_never_measured_says_nccls_own_cause() -> None:
    """NCCL_NET=IB on the H200 without an HCA: NCCL's WARN and the failed call, named."""
    with pytest.raises(ParseError) as error:
        parse((H200 / "all_reduce_perf_g1_net_ib_absent.txt").read_text(), max_size=1 << 20)
    assert str(error.value).endswith(
        "did not get to measuring; NCCL WARN Failed to initialize any NET plugin; NCCL call "
        "failed: invalid usage")


H200_BUS = "00000000:00:06.0"  # nvidia-smi's pci.bus_id of the recorded H200


def test_each_ranks_gpu_is_read_from_nccls_own_init_line() -> None:
    """nccl-tests with MPI on the H200: rank 0's communicator on cudaDev 0, busId 60, the
    GPU nvidia-smi names 00000000:00:06.0; the topology's choice holds."""
    text = (H200 / "nccl_mpi_np1_all_reduce.txt").read_text()
    [gpu] = rank_gpus(text).values()
    assert (gpu.rank, gpu.host, gpu.cuda_device, gpu.nvml_device) == (0, "vm", 0, 0)
    assert gpu.bus_id == bus_number(H200_BUS) == 0x60
    assert rank_gpu_problems(text, [[0, H200_BUS]], 1) == []
    assert rank_gpu_problems(text, [[1, "00000000:00:07.0"]], 1) == [
        "rank 0 on vm ran on busId 60 (cudaDev 0), the topology chose GPU 1 "
        "(00000000:00:07.0)"]


def test_two_ranks_on_one_gpu_are_named_and_nccls_refusal_quoted() -> None:
    """Recorded with NCCL_TESTS_DEVICE=0 and both ranks seeing the one GPU: NCCL refuses
    ("Duplicate GPU detected"); sanity names the pair from the init lines."""
    text = (H200 / "nccl_mpi_np2_one_visible_fixed.txt").read_text()
    assert rank_gpu_problems(text, [], 2) == ["ranks 0 and 1 on vm share the GPU at busId 60"]
    assert failure_causes(text)[0] == ("NCCL WARN Duplicate GPU detected : rank 0 and rank 1 "
                                       "both on CUDA device 60")


def test_a_local_rank_past_the_visible_gpus_is_nccl_tests_own_words() -> None:
    """Recorded without NCCL_TESTS_DEVICE, each rank seeing one GPU (today's job script
    under --gpu-bind): local rank 1 asks for device 1 and nccl-tests stops before NCCL."""
    text = (H200 / "nccl_mpi_np2_one_visible_today.txt").read_text()
    assert failure_causes(text) == [
        "nccl-tests: Invalid number of GPUs: 2 requested but only 1 were found."]
    with pytest.raises(ParseError, match="Invalid number of GPUs"):
        parse(text)


def test_ranks_without_init_lines_are_unproven() -> None:
    assert "unproven" in rank_gpu_problems("no nccl here", [[0, H200_BUS]], 1)[0]
