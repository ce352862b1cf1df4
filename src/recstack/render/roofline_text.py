"""The roofline classification of a profile's stages as text lines (``analyse``, ``roofline``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recstack.tree import Profile


def stage_bound_lines(profile: Profile) -> list[str]:
    """One line per stage: its bound class and ceiling fraction, or why it has none."""
    lines = []
    for stage in profile.root.children:
        r = stage.roofline or {}
        frac = r.get("ceiling_fraction")
        what = (
            f"{frac:6.1%} of the {r.get('roof')} roofline ceiling"
            + (f"  [roof suspect: {r.get('roof_suspect_reason')}]" if r.get("roof_suspect") else "")
            if frac is not None
            else f"({stage.bound_reason})"
        )
        lines.append(f"{stage.name:20s} {str(stage.bound):9s} {what}")
    return lines
