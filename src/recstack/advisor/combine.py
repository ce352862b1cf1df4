"""The combination: the non-conflicting recommended levers, applied together and measured (not multiplied)."""

from __future__ import annotations

from typing import Any

from recstack.advisor.levers import Lever


def pick(ranked: list[tuple[Lever, float]]) -> list[Lever]:
    """From recommended levers (best first, with their speedups), the best of each conflict group; where two
    levers set the same RunConfig field differently the later one is left out."""
    chosen: list[Lever] = []
    groups: set[str] = set()
    fields: dict[str, Any] = {}
    for lever, _ in ranked:
        if lever.group in groups:
            continue
        if any(k in fields and fields[k] != v for k, v in lever.change.items()):
            continue
        chosen.append(lever)
        groups.add(lever.group)
        fields.update(lever.change)
    return chosen


def merged(levers: list[Lever]) -> Lever:
    """One lever that applies every one of ``levers``."""
    change: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for lv in levers:
        change.update(lv.change)
        options.update(lv.options)
    return Lever(" + ".join(lv.name for lv in levers), "combination", "step", "combination", change, options,
                 why="the non-conflicting recommended levers together, measured as one",
                 numeric=any(lv.numeric for lv in levers))


__all__ = ["merged", "pick"]
