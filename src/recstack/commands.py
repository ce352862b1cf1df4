"""CLI commands beyond zoo and workload: profile, show, demo."""

from __future__ import annotations

import argparse


def register_all(sub: argparse._SubParsersAction) -> None:
    """Register the profiling commands (added as they land)."""
    return None
