"""Parse Himeno output (C+MPI and Fortran 90 versions).

C, rank 0::

    Loop executed for 200 times
    Gosa : 1.234567e-04
    MFLOPS measured : 52668.123456
    Score based on Pentium III 600MHz : 634.539

Fortran 90 dynamic version: `` MFLOPS:   52668.12  time(s):   60.2`` after its
``Loop executed`` line. Both versions first print a 3-iteration rehearsal
(`` MFLOPS: 8498.19 time(s): 0.0058 3.3e-03``): that figure is no result, so
only what follows ``Loop executed`` counts, and output cut short before it (time
limit, out of memory, a crash) is an error. A rank count that does not match
NDX·NDY·NDZ prints ``Invalid number of PE`` and still exits 0, so the output,
not the exit code, decides.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from reframe.core.exceptions import SanityError

MFLOPS_C = re.compile(r"MFLOPS measured\s*:\s*(?P<v>\S+)")
MFLOPS_F90 = re.compile(r"^\s*MFLOPS:\s*(?P<v>\S+)\s+time\(s\):\s*(?P<t>\S+)", re.M)
LOOPS = re.compile(r"Loop executed for\s+(?P<n>\d+)\s+times")
GOSA = re.compile(r"Gosa\s*:\s*(?P<g>\S+)")


@dataclass(frozen=True)
class HimenoResult:
    mflops: float
    loops: int
    gosa: float | None


def parse(text: str) -> HimenoResult:
    if "Invalid number of PE" in text:
        raise SanityError("Himeno: Invalid number of PE: the rank count does not match the "
                          "NDX×NDY×NDZ process grid compiled into param.h")
    loops = LOOPS.search(text)
    if loops is None:
        rehearsal = "after the rehearsal " if MFLOPS_F90.search(text) else ""
        raise SanityError(f"Himeno: output ends {rehearsal}without 'Loop executed': the "
                          f"measurement did not finish (killed, out of time or crashed)")
    final = text[loops.end():]
    match = MFLOPS_C.search(final) or MFLOPS_F90.search(final)
    if match is None:
        raise SanityError("Himeno: no MFLOPS figure after 'Loop executed': the output was cut "
                          "short")
    try:
        mflops = float(match["v"])
    except ValueError:
        raise SanityError(f"Himeno: MFLOPS value {match['v']!r} is not a number") from None
    if not math.isfinite(mflops) or mflops <= 0:
        raise SanityError(f"Himeno: MFLOPS value {match['v']} is not a positive number")
    gosa = GOSA.search(final)
    return HimenoResult(mflops, int(loops["n"]), float(gosa["g"]) if gosa else None)
