"""Errors a user can act on. Each message says what was wrong and, where it can, what to do."""


class EvbenchError(Exception):
    """Base for errors the CLI reports as one line and exit code 2, without a traceback."""


class PaceError(EvbenchError, ValueError):
    """A pace spec or file that cannot be parsed; the message names the token and its position."""


class RecordFileError(EvbenchError):
    """A record file that cannot be read (truncated, wrong schema); the message names the file."""
