"""Errors that the CLI turns into a one-line message and exit code 2.

Every error raised for bad user input (a config, a CLI argument, a data file,
a trace) is a :class:`RecstackError` whose message names the field and what is
allowed, so that a user can fix it without reading a traceback.
"""

from __future__ import annotations


class RecstackError(Exception):
    """Bad input or an impossible request; the CLI prints it on one line and exits 2."""

    exit_code = 2


class ConfigError(RecstackError):
    """A config file or value is invalid. ``field`` names where, ``allowed`` what fits."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None) -> None:
        self.source = source
        self.field = field
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
