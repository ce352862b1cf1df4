"""Timing loops and the spread summary every machine figure carries.

Contract of a figure: ``{"median", "min", "max", "p10", "p90", "repeats"}``
in the figure's unit (FLOP/s, bytes/s or ns), computed from one rate per
repeat. Rates are computed per repeat (not from the mean time), so ``max``
is the best repeat; interference from other processes only ever lowers a
rate, which is why roofs use the best repeat (as STREAM does) while the
median and p10/p90 show how noisy the host was.

Repeats are *interleaved* across cases (:func:`interleaved`): round 1 times
every case once, then round 2, and so on, so that a burst of interference
from another process spreads over all cases instead of wiping out one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

STAT_KEYS = ("median", "min", "max", "p10", "p90", "repeats")
ROOF_STATISTIC = "max"  # the statistic a roof takes from a figure: the best repeat (see above)
K = TypeVar("K")


def summarize(values: list[float]) -> dict[str, Any]:
    """Median, min, max, p10, p90 and count of ``values`` (which must be non-empty)."""
    if not values:
        raise ValueError("summarize() needs at least one value")
    arr = np.asarray(values, dtype=float)
    p10, p50, p90 = np.percentile(arr, [10, 50, 90])
    return {
        "median": float(p50),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "p10": float(p10),
        "p90": float(p90),
        "repeats": int(arr.size),
    }


def rates(amount: float, seconds: list[float]) -> list[float]:
    """``amount`` (FLOPs or bytes) per second for every timed repeat."""
    return [amount / s for s in seconds]


def interleaved(
    cases: dict[K, Callable[[], Any]],
    *,
    rounds: int,
    warmup: int = 1,
    budget_s: float | None = None,
    min_rounds: int = 3,
    clock: Callable[[], int] = time.perf_counter_ns,
    progress: Callable[[int], None] | None = None,
    before: dict[K, Callable[[], Any]] | None = None,
) -> dict[K, list[float]]:
    """Seconds per call of every case, timed once per round for ``rounds`` rounds.

    Each case is called ``warmup`` times (untimed) first; ``before[case]``,
    if given, runs untimed right before each timed call. With ``budget_s``,
    rounds stop once ``min_rounds`` are done and the timed calls have used
    the budget. ``progress(round)`` is called before each round.
    """
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    out: dict[K, list[float]] = {k: [] for k in cases}
    spent = 0.0
    for r in range(rounds):
        if progress:
            progress(r)
        for k, fn in cases.items():
            if before and k in before:
                before[k]()
            t0 = clock()
            fn()
            dt = (clock() - t0) * 1e-9
            out[k].append(max(dt, 1e-12))
            spent += dt
        if budget_s is not None and r + 1 >= min_rounds and spent >= budget_s:
            break
    return out
