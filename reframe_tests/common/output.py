"""Reading a job's output in sanity functions, with parser errors as ReFrame sanity errors."""

from __future__ import annotations

import os

import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError


def read_output(check, which: str = "stdout") -> str:
    name = sn.evaluate(getattr(check, which))
    path = os.path.join(check.stagedir, name)
    try:
        with open(path, errors="replace") as handle:
            return handle.read()
    except OSError as exc:
        raise SanityError(f"cannot read {which} {path}: {exc.strerror}") from None


def parsed(parse, text: str):
    """Run a benchmark parser; its ValueError becomes a SanityError with the same reason
    (ReFrame's error appends its cause's message to its own: a chained cause said it twice,
    "sanity error: X: X")."""
    try:
        return parse(text)
    except ValueError as exc:
        raise SanityError(str(exc)) from None
