"""Proof that a collective ran in the network (SHARP), or did not, from UCC's own trace.

SHARP fails silently: without the aggregation manager, or after a switch firmware or UFM
upgrade, the collective library falls back to software and the job only gets slower. So
a SHARP variant is judged by what the library says it used, as pinning is judged by the
mask srun reports.

With ``UCC_COLL_TRACE=info`` UCC prints one line per collective it initialises, ending
``; <CL> {<TLs>}, team_id <N>`` (``ucc_coll_str`` in openucx/ucc
``src/utils/ucc_coll_utils.c``): ``CL_BASIC {TL_SHARP}`` is the switch reducing,
``CL_BASIC {TL_UCP}`` software over UCX, ``CL_HIER {TL_SHARP, TL_UCP}`` a hierarchical
schedule whose inter-node step is SHARP. The collective's name (``Allreduce``,
``Bcast``, ``Barrier``) starts the trace's argument string. libsharp_coll's own errors
(``SHARP_COLL_LOG_LEVEL``) are quoted as the cause where the fallback printed one.
"""

from __future__ import annotations

import re

#: OMB program → the name UCC's trace gives its collective.
#: (UCC ``src/utils/ucc_log.h``, ``ucc_coll_type_str``); the three UCC's SHARP TL runs.
COLLECTIVE = {"osu_allreduce": "Allreduce", "osu_barrier": "Barrier", "osu_bcast": "Bcast"}
#: ``…Allreduce …; CL_BASIC {TL_SHARP}, team_id 32768``
TRACE = re.compile(r"\b(?P<coll>[A-Z][a-z_]+)\b[^;\n]*; (?P<cl>CL_\w+) \{(?P<tls>[^}]*)\}, "
                   r"team_id (?P<team>\d+)")
#: The cause of a fallback, in the job's words: a libsharp_coll error (its lines start
#: ``[host:rank:pid - file.c:line][date]``, NVIDIA's "Using NVIDIA SHARP with UCC"), or a
#: UCC line about its SHARP TL that failed ("sharp group create failed", tl_sharp_team.c).
SHARP_ERROR = re.compile(r"^(?:\[\S+ - \S+\.c:\d+\]\[[^]]+\]\s*ERROR\b.*"
                         r"|.*\b(?:TL_SHARP|tl_sharp|sharp)\b.*\b(?:ERROR|failed)\b.*)$", re.M)


def collective_tls(text: str, collective: str) -> list[tuple[str, ...]]:
    """The TLs UCC ran each ``collective`` on, one tuple per traced initialisation."""
    return [tuple(tl.strip() for tl in match["tls"].split(","))
            for match in TRACE.finditer(text) if match["coll"] == collective]


def sharp_problem(text: str, program: str, requested: bool) -> str | None:
    """Why the job's output does not prove what was asked of SHARP, or None.

    Requested: every traced ``program`` collective ran on TL_SHARP. Not requested: none
    did (a "software" line that the switch reduced is not software); an MPI without UCC
    prints no trace and needs none for its software collectives."""
    collective = COLLECTIVE[program]
    runs = collective_tls(text, collective)
    if not runs and not requested:
        return None  # software collectives without UCC: nothing reached the switches
    if not runs:
        return (f"no UCC collective trace of {collective} in the output: UCC did not run "
                f"the collectives (Open MPI without coll/ucc, `ompi_info | grep ucc`, or "
                f"UCC_COLL_TRACE not passed to the ranks), so SHARP use cannot be proven")
    on_sharp = [tls for tls in runs if "TL_SHARP" in tls]
    if requested and len(on_sharp) < len(runs):
        fell_back = next(tls for tls in runs if "TL_SHARP" not in tls)
        error = SHARP_ERROR.search(text)
        cause = f"; the job said: {error.group(0).strip()}" if error else ""
        return (f"SHARP requested but UCC ran {len(runs) - len(on_sharp)} of {len(runs)} "
                f"{collective} initialisations on {{{', '.join(fell_back)}}}: fell back to "
                f"software collectives (aggregation manager down or unreachable, SHARP "
                f"disabled on the switches, or no SHARP resources left){cause}")
    if not requested and on_sharp:
        return (f"SHARP not requested but UCC ran {collective} on {{{', '.join(on_sharp[0])}}}:"
                f" this is no software baseline")
    return None
