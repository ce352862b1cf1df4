"""Small statistics helpers for per-step samples (medians, percentiles, bootstrap intervals)."""

from __future__ import annotations

import numpy as np


def percentile(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if xs else 0.0


def median(xs: list[float]) -> float:
    return percentile(xs, 50)


def central_steps(totals: list[float], lo: float = 25, hi: float = 75) -> list[int]:
    """Indices of the steps whose total lies between the ``lo`` and ``hi`` percentiles of ``totals``
    (never empty: the step nearest the median when none does)."""
    if not totals:
        return []
    a, b = percentile(totals, lo), percentile(totals, hi)
    idx = [i for i, t in enumerate(totals) if a <= t <= b]
    if not idx:
        m = median(totals)
        idx = [min(range(len(totals)), key=lambda i: abs(totals[i] - m))]
    return idx


def central_mean(xs: list[float], idx: list[int]) -> float:
    """Mean of ``xs`` over the steps ``idx`` (see :func:`central_steps`)."""
    return float(np.mean([xs[i] for i in idx])) if idx else 0.0


