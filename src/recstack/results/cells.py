"""A store cell as plain Python: numpy scalars unwrapped, NaN (pandas' missing value) as None."""

from __future__ import annotations

import math
from typing import Any


def num(v: Any) -> float | None:
    """The cell as a float, or None (missing, NaN, not a number)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def plain(v: Any) -> Any:
    """The cell as a plain Python value (None for NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v.item() if hasattr(v, "item") else v


__all__ = ["num", "plain"]
