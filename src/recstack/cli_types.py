"""argparse argument types shared by every command module: each names its flag in the error it raises."""

from __future__ import annotations

import argparse
from collections.abc import Callable


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
