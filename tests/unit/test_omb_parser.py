"""OMB parser on real outputs of 5.0 to 7.5 and on every header variant and failure."""

from __future__ import annotations

import pytest

from reframe_tests.omb import parser
from tests.conftest import DATA

OMB = DATA / "omb"
SEED_ROWS = "\n".join(line for line in (OMB / "osu_bw_v5.4.3_seed000.out").read_text()
                      .splitlines() if line[:1].isdigit())


def test_seed000_osu_bw_v543() -> None:
    result = parser.parse((OMB / "osu_bw_v5.4.3_seed000.out").read_text(), 4194304)
    assert (result.name, result.version, result.device) == ("Bandwidth", "5.4.3", None)
    assert result.sizes[0] == 1 and result.sizes[-1] == 4194304 and len(result.sizes) == 23
    assert result.at("bandwidth", 1048576) == 5928.17
    assert result.series() == {("bandwidth", "MB/s"): result.table["Bandwidth (MB/s)"]}


def test_v50_latency_starts_at_zero_and_skips_launcher_lines() -> None:
    result = parser.parse((OMB / "osu_latency_v5.0_srun.out").read_text())
    assert result.sizes[0] == 0 and result.at("latency", 8) == 1.86


def test_v72_cuda_device_buffers_datatype_after_size() -> None:
    result = parser.parse((OMB / "osu_bw_v7.2_cuda_dd.out").read_text(), 33554432)
    assert (result.device, result.buffers, result.version) == ("CUDA", ("D", "D"), "7.2")
    assert result.at("bandwidth", 33554432) == 93130.52


def test_v73_collective_full_statistics() -> None:
    result = parser.parse((OMB / "osu_reduce_v7.3_cuda_full.out").read_text())
    assert result.columns == ["Avg Latency(us)", "Min Latency(us)", "Max Latency(us)",
                              "Iterations"]
    series = result.series()
    assert set(series) == {("latency", "us"), ("latency_min", "us"), ("latency_max", "us")}
    assert result.table["Iterations"][0] == 1000 and result.at("latency_max", 8) == 128.73


def test_v75_rocm_title() -> None:
    result = parser.parse((OMB / "osu_bw_v7.5_rocm.out").read_text())
    assert result.device == "ROCM" and result.version == "7.5"


def test_v74_header_order_avg_latency() -> None:
    text = ("\n# OSU MPI Latency Test v7.4\n# Datatype: MPI_CHAR.\n"
            "# Size       Avg Latency(us)\n1                       1.52\n8       1.60\n")
    assert parser.parse(text).at("latency", 8) == 1.60


def test_validation_column_pass_and_fail() -> None:
    header = "# OSU MPI Latency Test v7.4\n# Size       Avg Latency(us)        Validation\n"
    assert parser.parse(header + "1  1.50  Pass\n2  1.51  Pass\n").sizes == [1, 2]
    with pytest.raises(parser.ParseError, match=r"validation failed at sizes \[16\]"):
        parser.parse(header + "8  1.50  Pass\n16  1.51  Fail\n")


def test_tail_latency_columns() -> None:
    text = ("# OSU MPI Latency Test v7.5\n"
            "# Size       Avg Latency(us)   P50 Tail Lat(us)   P90 Tail Lat(us)   "
            "P99 Tail Lat(us)\n8  1.6  1.5  1.9  3.2\n")
    assert parser.parse(text).at("latency_p99", 8) == 3.2


def test_mbw_mr_pairs_and_message_rate() -> None:
    text = ("# OSU MPI Multiple Bandwidth / Message Rate Test v7.4\n"
            "# [ pairs: 4 ] [ window size: 64 ]\n"
            "# Size                  MB/s        Messages/s\n"
            "1                       9.88        9875432.11\n"
            "4194304             12120.42           2889.72\n")
    result = parser.parse(text, 4194304)
    assert result.pairs == 4 and result.at("message_rate", 1) == 9875432.11
    assert result.at("bandwidth", 4194304) == 12120.42


def test_barrier_has_no_size_column() -> None:
    text = ("# OSU MPI Barrier Latency Test v7.4\n"
            "# Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
            "             3.21              3.02              3.40        1000\n")
    result = parser.parse(text)
    assert result.sizes == [] and result.at("latency") == 3.21


@pytest.mark.parametrize("text, message", [
    ("srun: error: Unable to create step\n", "no '# OSU MPI"),
    ("# OSU MPI Bandwidth Test v5.4.3\n", "no column header"),
    ("# OSU MPI Bandwidth Test v5.4.3\n# Size  Bandwidth (MB/s)\n", "no result rows"),
    ("# OSU MPI Bandwidth Test v5.4.3\n# Size  Bandwidth (MB/s)\n" + SEED_ROWS[:200],
     "table ends at"),
    ("# OSU MPI Bandwidth Test v5.4.3\n# Size  Bandwidth (MB/s)\n1  1.8\n2\n",
     "line 4: 0 values"),
    ("# OSU MPI Bandwidth Test v5.4.3\n# Size  Bandwidth (MB/s)\n1  nan\n", "is nan"),
    ("# OSU MPI Bandwidth Test v5.4.3\n# Size  Bandwidth (MB/s)\n4  1.8\n2  0.9\n",
     "size 2 after 4"),
])
def test_malformed_and_truncated(text: str, message: str) -> None:
    with pytest.raises(parser.ParseError, match=message):
        parser.parse(text, 4194304)


def test_v74_built_with_cuda_13_by_our_patch_reads_as_every_cuda_run() -> None:
    """OMB 7.4 with the CUDA 13 patch of our Spack recipe, run on an H200 (tests/data/h200):
    device buffers, and managed memory prefetched through the patched function."""
    h200 = DATA / "h200"
    dd = parser.parse((h200 / "omb74_cuda13_intra_bw_DD.txt").read_text(), 4194304)
    assert dd.at("bandwidth", 4194304) == 496000.70
    managed = parser.parse((h200 / "omb74_cuda13_intra_bw_MM.txt").read_text(), 4194304)
    assert managed.at("bandwidth", 4194304) == 2515.10
    unpatched = (h200 / "omb74_cuda13_make_unpatched.txt").read_text()
    assert "incompatible type for argument 3 of ‘cudaMemPrefetchAsync’" in unpatched
