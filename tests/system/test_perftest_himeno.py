"""perftest and Himeno: parsers on real and malformed outputs, process grids, job scripts."""

from __future__ import annotations

import pytest
from reframe.core.exceptions import SanityError

from reframe_tests.himeno import parser as himeno
from reframe_tests.himeno.himeno import GRIDS, process_grid
from reframe_tests.perftest import parser as perftest
from tests.conftest import DATA, dry_run_scripts

PERFTEST = DATA / "perftest"
BIN = "/opt/perfguard/gcc-openmpi-ucx-cuda/bin"


def test_perftest_gbits_table_from_real_run() -> None:
    result = perftest.parse((PERFTEST / "ib_write_bw_postlist_gbits.out").read_text())
    assert (result.test, result.kind, result.units["bandwidth"]) == (
        "RDMA_Write Post List BW Test", "bw", "Gb/s")
    assert result.sizes == [8] and result.at("message_rate") == 7.498617


def test_perftest_atomic_bw_skips_warning_inside_table() -> None:
    result = perftest.parse((PERFTEST / "ib_atomic_bw_fadd_seed002.out").read_text())
    assert result.atomic == "FETCH_AND_ADD" and result.units["bandwidth"] == "MiB/s"
    assert result.at("bandwidth", 8) == 17.60  # seed 002, Table 2, ConnectX DDR


def test_perftest_atomic_latency_percentiles() -> None:
    result = perftest.parse((PERFTEST / "ib_atomic_lat_fadd_seed002.out").read_text())
    assert result.kind == "lat" and result.at("latency", 8) == 2.08  # seed 002, Table 3
    assert result.at("latency_p99") == 2.51 and result.units["latency_p999"] == "us"


def test_perftest_mib_label_of_newer_versions() -> None:
    header = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
    row = " 65536      5000             11686.69            11685.10\t\t   0.186962"
    text = "\n".join([header, row, "-" * 87, ""])
    assert perftest.parse(text).units["bandwidth"] == "MiB/s"


@pytest.mark.parametrize("cut, message", [
    (lambda t: t[: t.index(" #bytes")], "no '#bytes #iterations' table header"),
    (lambda t: t.rsplit("\n---", 1)[0], "not closed by a dashed line"),
    (lambda t: t.replace("2.306682", ""), "has 4 fields, expected 5"),
    (lambda t: t.replace("17.60", "nan"), "bandwidth is nan"),
])
def test_perftest_truncated_and_malformed(cut, message: str) -> None:
    text = (PERFTEST / "ib_atomic_bw_fadd_seed002.out").read_text()
    with pytest.raises(perftest.ParseError, match=message):
        perftest.parse(cut(text))


def test_himeno_c_and_fortran_outputs() -> None:
    c_out = ("Sequential version array size\n mimax = 513 mjmax = 257 mkmax = 257\n"
             "Loop executed for 200 times\nGosa : 0.000000e+00 \n"
             "MFLOPS measured : 52668.123456\tcpu : 60.12\n"
             "Score based on Pentium III 600MHz : 634.5\n")
    result = himeno.parse(c_out)
    assert (result.mflops, result.loops, result.gosa) == (52668.123456, 200, 0.0)
    fortran = " Loop executed for  200 times\n MFLOPS:   98730.1  time(s):   60.3\n"
    assert himeno.parse(fortran).mflops == 98730.1


def test_himeno_cut_short_after_the_rehearsal_is_an_error() -> None:
    """A real run killed after its 3-iteration rehearsal: the rehearsal's MFLOPS line has
    the Fortran version's shape, but it is no result."""
    real = (DATA / "replay" / "himeno_XS_1x1x2_2n2t.txt").read_text()
    assert himeno.parse(real).loops > 3
    cut = real[:real.index("start the actual measurement")]
    assert "MFLOPS:" in cut
    with pytest.raises(SanityError, match="ends after the rehearsal without 'Loop executed'"):
        himeno.parse(cut)


@pytest.mark.parametrize("text, message", [
    ("Invalid number of PE\nPlease check partitioning pattern or number of PE\n",
     "Invalid number of PE"),
    ("Loop executed for 200 times\nGosa : 1.2e-3\n", "no MFLOPS figure after"),
    ("Loop executed for 2 times\nMFLOPS measured : inf\n", "not a positive number"),
])
def test_himeno_failures(text: str, message: str) -> None:
    with pytest.raises(SanityError, match=message):
        himeno.parse(text)


@pytest.mark.parametrize("ranks, size, grid", [
    (1, "M", (1, 1, 1)), (2, "M", (1, 1, 2)), (8, "XL", (2, 2, 2)), (64, "XL", (4, 4, 4)),
])
def test_process_grid_splits_longest_dimension_first(ranks: int, size: str, grid) -> None:
    assert process_grid(ranks, GRIDS[size]) == grid


@pytest.mark.parametrize("ranks", [3, 4, 6, 12, 24, 48, 96, 384])
def test_process_grid_matches_rank_count_evenly_where_possible(ranks: int) -> None:
    ndx, ndy, ndz = process_grid(ranks, GRIDS["XL"])
    assert ndx * ndy * ndz == ranks
    uneven = sum(g % n != 0 for g, n in zip(GRIDS["XL"], (ndx, ndy, ndz)))
    assert uneven == (0 if ranks & (ranks - 1) == 0 else 1)  # a factor 3 cannot divide 2^k


def script(system: str, name: str) -> list[str]:
    [lines] = dry_run_scripts(system, name).values()
    return [line for line in lines if not line.startswith("#SBATCH --job-name")]


def test_perftest_pair_command_lines_and_numactl() -> None:
    lines = script("ndr4x4", "PerftestCheck%hca=mlx5_2%verb=write%measure=bw%memory=cuda"
                             "%placement=pair")
    assert "#SBATCH --ntasks-per-node=1" in lines and "#SBATCH --gres=gpu:4" in lines
    assert "srun_server='srun --cpu-bind=verbose,map_cpu:48 --overlap -N1 -n1'" in lines
    command = (f"numactl --localalloc {BIN}/ib_write_bw -p \\$pg_port -F "
               f"-n 5000 -d mlx5_2 -i 1 --use_cuda=2 -a")
    assert lines[-2] == f'run_pair "{command}" "{command} \\$pg_server_addr"'


def test_perftest_loopback_runs_both_sides_on_one_node() -> None:
    lines = script("seedfdr", "PerftestCheck%hca=mlx4_1%verb=atomic_cswap%measure=lat"
                              "%memory=host%placement=loopback")
    assert "#SBATCH --ntasks=2" in lines and "#SBATCH --ntasks-per-node=2" in lines
    assert "pg_server_node=${pg_nodes[0]}" in lines and "pg_client_node=${pg_nodes[-1]}" in lines
    command = (f"numactl --localalloc {'{view}'}/ib_atomic_lat -p \\$pg_port -F "
               f"-n 5000 -A CMP_AND_SWAP -d mlx4_1 -i 1 -s 8")
    assert lines[-2].startswith(
        'echo "# perfguard size=8"; run_pair "numactl --localalloc')
    assert "-A CMP_AND_SWAP -d mlx4_1 -i 1 -s 8 \\$pg_server_addr" in lines[-2]
    assert command.split("/ib_atomic_lat")[1] in lines[-2]


def test_perftest_interference_layout() -> None:
    lines = script("ndr4x4", "PerftestInterferenceCheck%hca=mlx5_0%verb=atomic_fadd"
                             "%measure=lat%interferer=write")
    assert "#SBATCH --ntasks=4" in lines and "#SBATCH --ntasks-per-node=2" in lines
    body = "\n".join(lines)
    alone = body.index('echo "# perfguard phase=alone"')
    background = body.index(f"{BIN}/ib_write_bw -p \\$pg_port -F -D 30 -d mlx5_0 -i 1 -s 8")
    interfered = body.index('echo "# perfguard phase=interfered"')
    assert alone < background < interfered
    # the interfering pair's steps are named helpers: stopped by a kill, not a failure
    assert ('(pg_port=$((pg_port + 100)); srun_server="$srun_server -J perfguard-helper"; '
            'srun_client="$srun_client -J perfguard-helper"; run_pair') in body
    assert lines[-2] == "kill $interference 2>/dev/null; wait $interference; (exit $rc)"


def test_himeno_rank_layout_grid_and_binding() -> None:
    scripts = dry_run_scripts("ndr4x4", "HimenoCheck%size=XL%nodes=4%ranks_step=all")
    [(name, lines)] = [(n, s) for n, s in scripts.items() if "nodes=4" in n]
    assert "#SBATCH --ntasks=384" in lines and "#SBATCH --ntasks-per-node=96" in lines
    # Not pinned (cores): the step keeps --cpus-per-task.
    assert lines[-2] == ("srun --cpus-per-task=1 --mpi=pmix --kill-on-bad-exit=1 "
                         "--cpu-bind=verbose,cores ./himeno")
    build = dry_run_build_lines(name)
    ndx, ndy, ndz = process_grid(384, GRIDS["XL"])
    assert f"sh paramset.sh XL {ndx} {ndy} {ndz}" in build
    assert "mpicc -O3 himenoBMTxps.c -o himeno" in build


def dry_run_build_lines(display_name: str) -> list[str]:
    import glob
    import json
    from pathlib import Path

    from tests.conftest import TEST_STATE

    report = sorted(glob.glob(str(TEST_STATE / "reports" / "*-ndr4x4.json")))[-1]
    for case in json.loads(Path(report).read_text())["runs"][0]["testcases"]:
        if case["display_name"] == display_name:
            return (Path(case["stagedir"]) / "rfm_build.sh").read_text().splitlines()
    raise AssertionError(f"{display_name} not in {report}")
