"""nccl-tests' table and NCCL's path lines, pure.

No GPU was lent to this project's sessions, so no nccl-tests run was recorded: the text
below follows the formats as the sources print them (nccl-tests ``src/common.cu``: the
header, rows, "# Out of bounds values" and "# Avg bus bandwidth" lines; NCCL
``src/transport/net.cc`` and ``net_ib.cc``: the ``Channel … via NET/IB/0/GDRDMA`` and
``NET/IB : Using [0]mlx5_0:1/IB`` INFO lines). Host names and figures are made up."""

from __future__ import annotations

import pytest

from reframe_tests.nccl.parser import ParseError, collnet_problem, parse, transport_problems

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
