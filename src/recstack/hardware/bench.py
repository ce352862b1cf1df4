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
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import numpy as np

STAT_KEYS = ("median", "min", "max", "p10", "p90", "repeats")
ROOF_STATISTIC = "max"  # the statistic a roof takes from a figure: the best repeat (see above)
K = TypeVar("K")
MIN_ROUNDS_UNDER_BUDGET = 3  # a time cap never leaves a figure with fewer repeats than this


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


@dataclass(frozen=True)
class StopRule:
    """When to stop repeating: the best time of every case has stopped improving.

    Rounds are taken in blocks of ``block``. After each block (from
    ``min_rounds`` on), every case's best time so far is compared with its
    best before that block; when no case improved by more than ``margin``
    (relative: ``best_before / best_now - 1``), the estimate of the best
    repeat has settled and the rounds stop (``stopped_by = "stable"``).
    Caps: ``max_rounds`` rounds, and ``budget_s`` seconds of wall time
    spent in the rounds (warm-up excluded; never fewer than
    :data:`MIN_ROUNDS_UNDER_BUDGET` rounds) (``"max_rounds"``, ``"budget"``).
    ``warm_s``: untimed calls per case before the first round.
    """

    block: int = 5
    margin: float = 0.01
    min_rounds: int = 10
    max_rounds: int = 200
    budget_s: float = 30.0
    warm_s: float = 0.25

    def capped(self, budget_s: float) -> StopRule:
        """The same rule with another time cap (modes differ only in caps)."""
        return StopRule(self.block, self.margin, self.min_rounds, self.max_rounds, budget_s, self.warm_s)

    def settled(self, times: list[list[float]]) -> bool:
        """True when no case's best time improved by more than ``margin`` in the last block."""
        for ts in times:
            if len(ts) <= self.block:
                return False
            before, now = min(ts[: -self.block]), min(ts)
            if before / now - 1.0 > self.margin:
                return False
        return True


def interleaved(
    cases: dict[K, Callable[[], Any]],
    *,
    rounds: int = 0,
    warmup: int = 1,
    budget_s: float | None = None,
    min_rounds: int = 3,
    clock: Callable[[], int] = time.perf_counter_ns,
    progress: Callable[[int], None] | None = None,
    before: dict[K, Callable[[], Any]] | None = None,
    stop: StopRule | None = None,
    info: dict[str, Any] | None = None,
) -> dict[K, list[float]]:
    """Seconds per call of every case, timed once per round.

    With ``stop`` (:class:`StopRule`), rounds go on until the rule says the
    best times have settled or a cap is reached; each case first runs
    untimed for ``stop.warm_s`` seconds (at least ``warmup`` calls).
    Without it, ``rounds`` rounds after ``warmup`` untimed calls per case;
    with ``budget_s``, rounds stop once ``min_rounds`` are done and the
    timed calls have used the budget. ``before[case]``, if given, runs
    untimed right before each timed call. ``progress(round)`` is called
    before each round. ``info``, if given, receives ``rounds``,
    ``stopped_by`` and ``elapsed_s`` (and ``rule`` with a stop rule).
    """
    warm_ns = int((stop.warm_s if stop else 0.0) * 1e9)
    for fn in cases.values():
        t_warm, calls = clock(), 0
        while calls < warmup or clock() - t_warm < warm_ns:
            fn()
            calls += 1
    out: dict[K, list[float]] = {k: [] for k in cases}
    spent = 0.0
    start = clock()
    stopped_by = "rounds"
    n_rounds = stop.max_rounds if stop else rounds
    for r in range(n_rounds):
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
        done = r + 1
        if stop is not None:
            if done >= stop.min_rounds and done % stop.block == 0 and stop.settled(list(out.values())):
                stopped_by = "stable"
                break
            if (clock() - start) * 1e-9 >= stop.budget_s and done >= MIN_ROUNDS_UNDER_BUDGET:
                stopped_by = "budget"
                break
            if done == n_rounds:
                stopped_by = "max_rounds"
        elif budget_s is not None and done >= min_rounds and spent >= budget_s:
            stopped_by = "budget"
            break
    if info is not None:
        info.update(rounds=len(next(iter(out.values()), [])), stopped_by=stopped_by, elapsed_s=(clock() - start) * 1e-9)
        if stop is not None:
            info["rule"] = asdict(stop)
    return out
