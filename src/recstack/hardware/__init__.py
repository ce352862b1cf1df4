"""Machine figures (roofs), hardware counters and their CLI commands.

``measure_machine`` / ``get_machine`` / ``load_machine`` (:mod:`recstack.hardware.machine`),
``detect_perf`` / ``parse_perf_stat_csv`` / ``measure_counters`` (:mod:`recstack.hardware.counters`).
Imports are lazy so that ``import recstack.hardware`` stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["get_machine", "load_machine", "measure_machine"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from recstack.hardware import machine

        return getattr(machine, name)
    raise AttributeError(f"module 'recstack.hardware' has no attribute {name!r}")
