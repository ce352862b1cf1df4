"""argparse pieces shared by every command module: the parser class and argument types.

Each type names its flag in the error it raises. Kept apart from :mod:`recstack.cli`
so that command modules import them without importing the CLI (no cycle).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from recstack.errors import ConfigError


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are ConfigErrors: one line ``error: ...`` and exit 2, like all bad input."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise ConfigError(f"{message} (see {self.prog} --help)")


def config_type(field: str, flag: str) -> Callable[[str], Any]:
    """argparse type: a number checked by RunConfig's rule for ``field`` (one rule everywhere), named ``flag``."""
    from recstack.config.run import RunConfig, check_field

    kind = RunConfig.model_fields[field].annotation
    as_int = kind in (int, int | None)

    def parse(text: str) -> Any:
        try:
            value = int(text) if as_int else float(text)
        except ValueError:
            what = "an integer" if as_int else "a number"
            raise argparse.ArgumentTypeError(f"must be {what} (got {text!r})") from None
        return check_field(field, value, flag)

    return parse


def positive_float(name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number (got {text!r})") from None
        if not v > 0 or v != v or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be a positive number (got {text!r})")
        return v

    return parse


def int_at_least(name: str, low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer (got {text!r})") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{name} must be >= {low} (got {v})")
        return v

    return parse


__all__ = ["Parser", "config_type", "int_at_least", "positive_float"]
