"""Small statistics helpers for per-step samples (medians, percentiles, bootstrap intervals)."""

from __future__ import annotations

import math

import numpy as np


def percentile(xs: list[float], q: float) -> float:
    """``np.percentile(xs, q)`` (its default, linear method), 0 for no samples. Short lists of finite values are
    worked out here with numpy's own arithmetic (the same float): np.percentile loads numpy.ma, ~20 ms of a
    command's start-up (``recstack import``), for a few per-step figures."""
    if not xs:
        return 0.0
    if len(xs) > 4096 or not 0 <= q <= 100 or not all(math.isfinite(x) for x in xs):
        return float(np.percentile(np.asarray(xs, dtype=float), q))
    s = sorted(float(x) for x in xs)
    v = (len(s) - 1) * (q / 100)  # numpy's virtual index (method "linear")
    if v >= len(s) - 1 or v < 0:
        return s[-1] if v >= 0 else s[0]
    i = math.floor(v)
    a, b, g = s[i], s[i + 1], v - i
    d = b - a
    return b - d * (1 - g) if g >= 0.5 else a + d * g  # numpy's _lerp, both branches


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


