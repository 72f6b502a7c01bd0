"""One exception type for every failure the user can act on.

The CLI prints its message (what failed and where) instead of a stack trace.
"""


class PerfguardError(Exception):
    """A failure with a message that tells the user what and where."""
