"""Small statistics helpers for per-step samples (medians, percentiles, bootstrap intervals)."""

from __future__ import annotations

import numpy as np


def percentile(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if xs else 0.0


def median(xs: list[float]) -> float:
    return percentile(xs, 50)


def bootstrap_ci(xs: list[float], *, stat=np.median, n: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over ``xs``."""
    arr = np.asarray(xs, dtype=float)
    if arr.size == 0:
        return (0.0, 0.0)
    if arr.size == 1:
        return (float(arr[0]), float(arr[0]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n, arr.size))
    vals = stat(arr[idx], axis=1)
    lo, hi = np.percentile(vals, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)
