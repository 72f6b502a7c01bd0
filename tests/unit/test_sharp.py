"""SHARP proven from UCC's collective trace, pure.

The trace lines below follow UCC's format as its source writes it (openucx/ucc,
``src/utils/ucc_coll_utils.c``: ``ucc_coll_args_str`` prints the collective, its
operation and buffers, ``ucc_coll_str`` appends ``; <CL> {<TLs>}, team_id <N>``; UCC
prints it with ``UCC_COLL_TRACE=info`` behind UCS's ``[time] [host:pid:thread]
file:line`` prefix); libsharp_coll's error line starts ``[host:rank:pid - file.c:line]
[date]`` as NVIDIA's "Using NVIDIA SHARP with UCC" shows it. No SHARP fabric was at hand
to record one: the layouts are the sources', host names, addresses and the error text are
made up. The no-trace case is real output:
osu_allreduce recorded on 4 embedded nodes (Debian's Open MPI has no coll/ucc)."""

from __future__ import annotations

from reframe_tests.omb.sharp import collective_tls, sharp_problem
from tests.conftest import DATA

PREFIX = "[1764107062.412337] [hgx01:81231:0]        ucc_coll.c:301  UCC_COLL INFO  coll_init: "
BUFFERS = "src={0x7f2d1c000000, 2, float32, host}, dst={0x7f2d1c001000, 2, float32, host}"


def trace(collective: str, tls: str, cl: str = "CL_BASIC") -> str:
    args = "Barrier" if collective == "Barrier" else f"{collective} sum: {BUFFERS}"
    return f"{PREFIX}{args}; {cl} {{{tls}}}, team_id 32768"


def test_allreduce_on_the_switch_proves_sharp() -> None:
    text = "\n".join([trace("Allreduce", "TL_SHARP")] * 3 + [trace("Barrier", "TL_UCP")])
    assert collective_tls(text, "Allreduce") == [("TL_SHARP",)] * 3
    assert sharp_problem(text, "osu_allreduce", requested=True) is None
    hier = trace("Allreduce", "TL_SHARP, TL_UCP", cl="CL_HIER")  # SHARP between the nodes
    assert sharp_problem(hier, "osu_allreduce", requested=True) is None


def test_a_fallback_names_the_software_path_and_the_librarys_error() -> None:
    error = ("[hgx01:0:81231 - context.c:669][2026-11-25 21:44:22] ERROR failed to connect "
             "to AM - error -53 received")
    text = "\n".join([error, trace("Allreduce", "TL_UCP"), trace("Allreduce", "TL_UCP")])
    problem = sharp_problem(text, "osu_allreduce", requested=True)
    assert problem.startswith("SHARP requested but UCC ran 2 of 2 Allreduce initialisations "
                              "on {TL_UCP}: fell back to software collectives")
    assert problem.endswith("; the job said: " + error)


def test_the_software_baseline_must_not_have_used_the_switch() -> None:
    assert sharp_problem(trace("Bcast", "TL_UCP"), "osu_bcast", requested=False) is None
    assert "SHARP not requested but UCC ran Bcast on {TL_SHARP}" in sharp_problem(
        trace("Bcast", "TL_SHARP"), "osu_bcast", requested=False)


def test_sharp_lines_are_the_collectives_uccs_sharp_tl_runs() -> None:
    """UCC_TL_BASIC_SHARP_SUPPORTED_COLLS (openucx/ucc tl_sharp.h): Allreduce, Barrier,
    Bcast. A Reduce is never on TL_SHARP, so a SHARP line for it would 'fall back' every
    night on a healthy fabric."""
    from reframe_tests.omb.sharp import COLLECTIVE
    assert sorted(COLLECTIVE.values()) == ["Allreduce", "Barrier", "Bcast"]


def test_output_without_ucc_proves_nothing() -> None:
    recorded = (DATA / "replay" / "osu_allreduce_scaling_4n4t.txt").read_text()
    assert "Allreduce" in recorded or "Latency" in recorded  # a real, complete table
    problem = sharp_problem(recorded, "osu_allreduce", requested=True)
    assert problem.startswith("no UCC collective trace of Allreduce in the output")
    # the software series runs on any MPI: without UCC nothing reached the switches
    assert sharp_problem(recorded, "osu_allreduce", requested=False) is None
