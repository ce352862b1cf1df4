"""When is a change beyond noise? The rules recstack judges measurements by, in one place.

A leaf module (standard library only; numpy imported when a bootstrap runs), so that hardware/ can use it:

* :func:`judge` with a :class:`NoiseRule`: two measured intervals (p10-p90 spreads, or 95 % bootstrap
  intervals of the medians) that do not overlap, and a change past a floor. ``recstack diff`` (spreads)
  and ``recstack advise`` (bootstrap intervals) judge with it.
* :func:`beyond`: a relative change past a fixed tolerance: machine repeatability
  (:data:`MACHINE_TOLERANCE`, ``recstack machine --compare``, the noisy-host warning).
* :func:`twin_floor`: the gain a candidate must beat where two identical arms measured in the same rounds
  already differed: ``recstack compile --recommend``'s gain thresholds, its noise table's deviations.
* :func:`bootstrap_ci` and :func:`percentile_ci`: the 95 % intervals a verdict or a report states (profiling's
  A/B overhead ratio, advise's arms, serving's latency percentiles).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from recstack.errors import DataError

MACHINE_TOLERANCE = 0.10
"""A machine figure *repeats* when its relative change between two measurements is within this; a
within-run repeat spread (p10-p90 / median) above it marks a noisy host."""

Z95 = 1.959964  # the two-sided 95 % normal quantile

Interval = tuple[float, float]


def beyond(change: float, tolerance: float) -> bool:
    """Whether a relative change (``(new - old) / old``) exceeds ``tolerance`` either way."""
    return abs(change) > tolerance


def deviation(ratio: float) -> float:
    """How far a ratio of two times is from 1 (either way): ``|ratio - 1|``."""
    return abs(ratio - 1)


def twin_floor(twin_ratio: float | None, minimum: float) -> float:
    """The speedup a candidate must reach: ``minimum``, or more where two identical arms measured in the same
    rounds already differed by more (``1 + |ratio - 1|``, measured)."""
    return minimum if twin_ratio is None else max(minimum, 1 + deviation(twin_ratio))


def disjoint(a: Interval, b: Interval) -> bool:
    """Whether two intervals (lo, hi) do not overlap."""
    return b[0] > a[1] or b[1] < a[0]


@dataclass(frozen=True)
class NoiseRule:
    """When a change in time counts as real; see :mod:`recstack.report.diff` for the rule in full."""

    min_change_pct: float = 2.0
    fixed_noise_pct: float = 10.0
    min_abs_share: float = 0.005

    def __post_init__(self) -> None:
        for name in ("min_change_pct", "fixed_noise_pct", "min_abs_share"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise DataError(f"noise rule {name} must be a number >= 0 (got {v!r})")

    def describe(self) -> str:
        return (
            f"run and stages: real when the two runs' p10-p90 intervals do not overlap and the medians differ by "
            f"more than {self.min_change_pct:g}%; modules and ops (apportioned): real when their intervals (their "
            f"stage's relative p10-p90 spread) do not overlap, the change exceeds {self.fixed_noise_pct:g}% and "
            f"{100 * self.min_abs_share:g}% of run A's step time; without any spread: a fixed noise floor of "
            f"{self.fixed_noise_pct:g}% and {100 * self.min_abs_share:g}% of run A's step time"
        )


def judge(
    time_a: float, time_b: float, spread_a: Interval | None, spread_b: Interval | None,
    run_time_a: float, rule: NoiseRule, *, apportioned: bool = False,
) -> tuple[str, str]:
    """(verdict, basis) for one matched pair of times (A the baseline): ``regression``, ``improvement`` or ``noise``.

    ``apportioned``: the spreads are the stage's relative spread applied to this node (modules, ops),
    so the fixed floor and the absolute floor apply on top of the interval test.
    """
    delta = time_b - time_a
    rel_pct = abs(delta) / time_a * 100 if time_a > 0 else (math.inf if delta else 0.0)
    floors = rel_pct > rule.fixed_noise_pct and abs(delta) >= rule.min_abs_share * run_time_a
    if spread_a is not None and spread_b is not None:
        real = disjoint(spread_a, spread_b) and (floors if apportioned else rel_pct > rule.min_change_pct)
        basis = "stage p10-p90" if apportioned else "p10-p90"
    else:
        real = floors
        basis = "noise floor"
    if not real:
        return "noise", basis
    return ("regression" if delta > 0 else "improvement"), basis


def bootstrap_ci(xs: Sequence[float], *, stat: Callable[..., Any] | None = None, n: int = 2000, level: float = 0.95,
                 seed: int = 0) -> Interval:
    """Percentile bootstrap interval of ``stat`` (default: the median) over ``xs``."""
    import numpy as np

    stat = np.median if stat is None else stat
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


def percentile_ci(sorted_s: Any, pct: float) -> list[float] | None:
    """95% CI of the ``pct`` percentile of a sorted array from order statistics (None when n is too small)."""
    n = sorted_s.size
    p = pct / 100
    half = Z95 * math.sqrt(n * p * (1 - p))
    lo, hi = math.floor(n * p - half), math.ceil(n * p + half)
    if n == 0 or lo < 0 or hi > n - 1:
        return None
    return [float(sorted_s[lo]), float(sorted_s[hi])]


__all__ = ["MACHINE_TOLERANCE", "Z95", "NoiseRule", "beyond", "bootstrap_ci", "deviation", "disjoint", "judge",
           "percentile_ci", "twin_floor"]
