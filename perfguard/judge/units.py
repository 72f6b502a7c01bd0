"""A threshold's unit, converted to the unit its metric is stored in.

A table, not pint: the units checks report are a few names in three dimensions, and pint
knows no FLOPS and reads ``KB`` as kelvin-bytes, so it would need definitions and a map
from ReFrame's spellings anyway; this table is the whole of it (tests/unit/test_units.py).
A unit outside the table converts to itself only (``msg/s``, ``%``, none).
"""

from __future__ import annotations

from perfguard.errors import UsageError

#: unit → (dimension, size in the dimension's base unit: s, B/s, FLOPS)
UNITS: dict[str, tuple[str, float]] = {
    **{name: ("time", size) for names, size in (
        (("ns", "nsec"), 1e-9), (("us", "µs", "μs", "usec"), 1e-6),
        (("ms", "msec"), 1e-3), (("s", "sec"), 1.0)) for name in names},
    **{name: ("bandwidth", size) for name, size in (
        ("B/s", 1.0), ("KB/s", 1e3), ("kB/s", 1e3), ("MB/s", 1e6), ("GB/s", 1e9),
        ("TB/s", 1e12), ("KiB/s", 2.0**10), ("MiB/s", 2.0**20), ("GiB/s", 2.0**30),
        ("TiB/s", 2.0**40), ("Mb/s", 1e6 / 8), ("Gb/s", 1e9 / 8))},
    **{name: ("rate", size) for name, size in (
        ("FLOPS", 1.0), ("MFLOPS", 1e6), ("GFLOPS", 1e9), ("TFLOPS", 1e12))},
}


def factor(given: str, stored: str, metric: str) -> float:
    """What a value in ``given`` is multiplied by to be in ``stored``, the unit ``metric``
    is measured in; a unit of another dimension (or unknown) is refused, naming both."""
    if given == stored:
        return 1.0
    have, want = UNITS.get(given), UNITS.get(stored)
    if have is None or want is None or have[0] != want[0]:
        same = sorted(u for u, (dim, _) in UNITS.items() if want and dim == want[0])
        raise UsageError(f"--unit {given!r}: {metric} is measured in {stored!r}; give the "
                         f"threshold in {stored!r}" + (f" or another {want[0]} unit "
                                                       f"({', '.join(same)})" if same else ""))
    return have[1] / want[1]
