"""The failures the user can act on, each with a message naming what and where.

The CLI prints the message instead of a stack trace: ``UsageError`` (a bad argument
or input file) exits 2, ``AlreadyRunning`` (another nightly holds the lock) exits 75
(EX_TEMPFAIL: try again later), any other ``PerfguardError`` (a failure) exits 1.
"""


class PerfguardError(Exception):
    """A failure with a message that tells the user what and where."""

    exit_code = 1


class UsageError(PerfguardError):
    """The command was given something it cannot use: an argument, option or file."""

    exit_code = 2


class AlreadyRunning(PerfguardError):
    """Another run of the same kind is under way; this one did not start."""

    exit_code = 75
