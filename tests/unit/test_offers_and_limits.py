"""What a provider offers beyond programs, read from what it has; every job's time limit
from its work. Pure, on real files: this host's Open MPI, a prefix laid out as UCC and a
net plugin install themselves."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from perfguard.contract import offers
from perfguard.paths import SPACK_ENVS_DIR
from reframe_tests.common import time_limit
from reframe_tests.common.launch import TIME_LIMIT

HAVE_OMPI = shutil.which("ompi_info") is not None


@pytest.mark.skipif(not HAVE_OMPI, reason="needs Debian's openmpi-bin (install.sh)")
def test_debians_open_mpi_is_looked_at_and_has_no_coll_ucc(tmp_path: Path) -> None:
    """Debian's Open MPI 4.1 ships no coll/ucc and no CUDA: a prefix of it offers
    neither (the embedded cluster's MPI; said in a SHARP variant's skip)."""
    prefix = tmp_path / "debian-openmpi"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "ompi_info").symlink_to(shutil.which("ompi_info"))
    assert offers.prefix_offers(str(prefix)) == frozenset()


def test_ompi_info_lines_name_coll_ucc_and_cuda() -> None:
    """``ompi_info --parsable --all`` as Open MPI 5 with UCC and CUDA prints it."""
    text = ("mca:coll:ucc:version:mca:2.1.0\nmca:pml:ucx:version:mca:2.1.0\n"
            "mca:mpi:base:param:mpi_built_with_cuda_support:value:true\n")
    components, cuda = offers.parse_ompi_info(text)
    assert cuda and offers.ompi_offers(components, cuda) == {"mpi-ucc", "cuda-mpi"}
    assert offers.parse_ompi_info(text.replace("value:true", "value:false"))[1] is False


def test_ucc_sharp_tl_and_a_net_plugin_in_a_prefix(tmp_path: Path) -> None:
    (tmp_path / "lib" / "ucc").mkdir(parents=True)
    assert offers.prefix_offers(str(tmp_path)) == frozenset()
    offers.prefix_offers.cache_clear()
    (tmp_path / "lib" / "ucc" / "libucc_tl_sharp.so").touch()
    (tmp_path / "lib" / "libnccl-net.so").touch()
    assert offers.prefix_offers(str(tmp_path)) == {"ucc-sharp", "nccl-collnet"}
    assert offers.prefix_offers(str(tmp_path / "absent")) is None  # not seen: unknown


def test_every_shipped_stack_says_what_it_offers_in_known_words() -> None:
    for stack in (p for p in SPACK_ENVS_DIR.iterdir() if (p / "spack.yaml").is_file()):
        said = offers.stack_offers(stack)
        assert said is not None, f"{stack} has no {offers.STACK_OFFERS_FILE}"
        assert not offers.unknown_offers(said), (stack, said)


def test_unknown_offers_are_missing_nothing() -> None:
    """Nothing known (None) skips nothing: the variant runs and its sanity proves."""
    assert offers.missing({"mpi-ucc"}, None) == []
    assert offers.missing({"mpi-ucc", "ucc-sharp"}, frozenset({"mpi-ucc"})) == ["ucc-sharp"]


def test_time_limit_from_sizes_and_iterations() -> None:
    """osu_bw 1 B-4 MiB at OMB's counts (100 x 64 small, 20 x 64 large): 12.5 s at the
    floor rate; 300 s to start and 4 x the work is 6 min."""
    sizes = time_limit.doubling_sizes(1, 4 << 20)
    assert len(sizes) == 23
    work = time_limit.sweep_seconds([((100 if s <= 8192 else 20) * 64, s) for s in sizes])
    assert 12 < work < 13
    assert time_limit.limit_seconds(work) == 360
    assert time_limit.limit_seconds(None) == 60 * 25  # no estimate: the default allowance
    assert time_limit.minutes(60) == "1 min"


def test_slurmstepds_time_limit_words_are_read() -> None:
    """slurmstepd's words (src/slurmd/slurmstepd/req.c), as a job's stderr holds them."""
    assert TIME_LIMIT.search("slurmstepd: error: *** STEP 123.0 ON node2 CANCELLED AT "
                             "2026-11-28T20:01:07 DUE TO TIME LIMIT ***")
    assert TIME_LIMIT.search("slurmstepd: error: *** JOB 123 ON node1 CANCELLED AT "
                             "2026-11-28T20:01:07 DUE TO TIME LIMIT ***")
    assert not TIME_LIMIT.search("slurmstepd: error: *** JOB 123 ON node1 CANCELLED AT "
                                 "2026-11-28T20:01:07 ***")
