"""Errors and exit codes.

Every error raised for bad user input (a config, a CLI argument, a data file,
a trace) is a :class:`RecstackError` whose message names the field and what is
allowed, so that a user can fix it without reading a traceback. The CLI prints
it on one line (``error: ...``) and exits with its ``exit_code``.

Exit codes (one table, used everywhere; README lists it):

====  ==========================================================================
0     success
1     a regression found by ``diff --fail-on-regression``
2     bad input, or an error in the user's own code (factory, model, batches)
3     a contended run under ``--strict``
4     partial results (some sweep points failed, a rank died)
5     the environment failed: a full disk, no permission, too many open files, an unreachable cluster
70    an internal error in recstack (please report; ``--debug`` shows the traceback)
130   interrupted (SIGINT)
143   terminated (SIGTERM)
====  ==========================================================================
"""

from __future__ import annotations

import errno

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_CONTENDED = 3
EXIT_PARTIAL = 4
EXIT_ENVIRONMENT = 5
EXIT_INTERNAL = 70
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class RecstackError(Exception):
    """Bad input or an impossible request; the CLI prints it on one line and exits 2."""

    exit_code = EXIT_BAD_INPUT


class ConfigError(RecstackError):
    """A config file or value is invalid. ``field`` names where, ``allowed`` what fits."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None) -> None:
        self.source = source
        self.field = field
        self.detail = message  # without the prefix: lets a caller re-name the field (API name -> CLI flag)
        prefix = ""
        if source:
            prefix += f"{source}: "
        if field:
            prefix += f"{field}: "
        super().__init__(prefix + message)


class DataError(RecstackError):
    """A data file (CSV, trace, profile JSON) cannot be read or is malformed."""


class MemoryPreflightError(RecstackError):
    """The requested model would not fit in memory; the message says what scale would."""


class UserCodeError(RecstackError):
    """The user's own code (a factory, a model's forward, a batch function) raised or returned nonsense.

    ``function`` names the user's function; ``user_frames`` holds the traceback
    lines that belong to the user's code (not recstack's or torch's), which the
    CLI prints after the one-line message.
    """

    def __init__(self, message: str, *, function: str | None = None, user_frames: str = "") -> None:
        self.function = function
        self.user_frames = user_frames
        super().__init__(message)


class ContendedRunError(RecstackError):
    """``--strict`` and the run was contended (the profile is still written); exit 3."""

    exit_code = EXIT_CONTENDED


class PartialResultsError(RecstackError):
    """Some of the work failed (sweep points, ranks); what succeeded is kept; exit 4."""

    exit_code = EXIT_PARTIAL


class EnvironmentFailure(RecstackError):
    """The host, not the input, failed: a full disk, no permission, no file descriptors, a cluster gone; exit 5.

    The message names the path or resource and what failed, in one line.
    """

    exit_code = EXIT_ENVIRONMENT


# errno -> (exit code, what to do): the OSErrors that are the environment's (or a name's), not recstack's bug
ENV_ERRNOS = {
    errno.ENOSPC: (EXIT_ENVIRONMENT, "free some space or write elsewhere"),
    errno.EDQUOT: (EXIT_ENVIRONMENT, "free some space or write elsewhere"),
    errno.EACCES: (EXIT_ENVIRONMENT, "fix its permissions or choose another path"),
    errno.EPERM: (EXIT_ENVIRONMENT, "choose another path"),
    errno.EROFS: (EXIT_ENVIRONMENT, "write elsewhere"),
    errno.EMFILE: (EXIT_ENVIRONMENT, "raise the limit (ulimit -n) or close other programs"),
    errno.ENFILE: (EXIT_ENVIRONMENT, "try again when fewer files are open"),
    errno.EIO: (EXIT_ENVIRONMENT, "check the disk"),
    errno.ENAMETOOLONG: (EXIT_BAD_INPUT, "use a shorter name"),
}


def environment_error(exc: OSError, what: str | None = None) -> RecstackError | None:
    """The one-line error for an OSError the environment caused (None: not one of those, a bug of ours).

    ``what`` names the resource when the exception does not carry a file name.
    """
    if exc.errno not in ENV_ERRNOS:
        return None
    code, fix = ENV_ERRNOS[exc.errno]
    where = exc.filename if exc.filename is not None else what
    if where is not None and len(str(where)) > 120:  # a name too long for the file system: shown shortened
        where = f"{str(where)[:60]}... ({len(str(where))} characters)"
    msg = f"{where}: {exc.strerror or exc}; {fix}" if where else f"{exc.strerror or exc}; {fix}"
    err: RecstackError = EnvironmentFailure(msg) if code == EXIT_ENVIRONMENT else DataError(msg)
    return err


class Terminated(BaseException):
    """Raised by the CLI's SIGTERM handler so that the run unwinds (no partial files) and exits 143.

    A BaseException, like KeyboardInterrupt, so that ``except Exception`` in
    user code does not swallow it.
    """
