"""When is a change beyond noise? The rules recstack judges measurements by, in one place.

A leaf module (standard library only): hardware/ (machine repeatability), the analyses,
diff, compile and serving read their thresholds and verdicts here.
"""

from __future__ import annotations

MACHINE_TOLERANCE = 0.10
"""A machine figure *repeats* when its relative change between two measurements is within this; a
within-run repeat spread (p10-p90 / median) above it marks a noisy host."""


def beyond(change: float, tolerance: float) -> bool:
    """Whether a relative change (``(new - old) / old``) exceeds ``tolerance`` either way."""
    return abs(change) > tolerance


__all__ = ["MACHINE_TOLERANCE", "beyond"]
