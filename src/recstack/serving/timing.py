"""Waking on time: how a serving worker waits for a batch's scheduled arrival.

A batch handed to a worker before its arrival (:mod:`recstack.serving.loadgen`'s
lookahead) starts no earlier than that arrival. A sleeping process wakes late
(on a VM by 0.05-0.3 ms, more on a busy host), and a request's latency counts
from its scheduled arrival, so the worker sleeps only until a wake margin
before it (a running estimate of its own wake-up lateness, :class:`WakeMargin`)
and spins the rest: at most :data:`SPIN_MAX_S` per batch and
:data:`SPIN_SHARE` of the worker's time in all (beyond it, it sleeps to each
arrival; a wait shorter than :data:`SPIN_ALWAYS_S` is spun whatever the share,
since a wake-up would cost about as much CPU). The worker spins only while it is idle -- it has nothing to serve
before that arrival -- so the spin takes no time from service. Timer slack is
1 ns meanwhile (Linux ``PR_SET_TIMERSLACK``; the default 50 us would add to
every wake-up).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

SPIN_MAX_S = 200e-6  # the most a worker spins before an arrival
SPIN_MIN_S = 5e-6
SPIN_SHARE = 0.03  # spinning stops (the worker sleeps to each arrival) once it took this share of its time
SPIN_ALWAYS_S = 40e-6  # waits this short are spun whatever the share: a wake-up costs about as much CPU (VM)
PR_SET_TIMERSLACK, PR_GET_TIMERSLACK = 29, 30
TIMER_SLACK_NS = 1


@contextlib.contextmanager
def tight_timers() -> Iterator[None]:
    """Linux: 1 ns timer slack for this thread (default 50 us), so that a sleep ends at its timeout rather
    than up to 50 us after; best effort elsewhere."""
    libc = None
    old = None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        old = libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)
        if old <= 0 or libc.prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0) != 0:
            old = None
    except (OSError, AttributeError):
        old = None
    try:
        yield
    finally:
        if libc is not None and old:
            libc.prctl(PR_SET_TIMERSLACK, old, 0, 0, 0)


class WakeMargin:
    """How long before an arrival a waiter stops sleeping and spins: the mean plus three mean deviations of
    how late a sleep woke past its timeout (exponentially weighted over about the last 32 sleeps), within
    [:data:`SPIN_MIN_S`, :data:`SPIN_MAX_S`]."""

    WEIGHT = 1 / 32

    def __init__(self) -> None:
        self.mean, self.dev = 50e-6, 25e-6
        self.value = self._clamp()

    def _clamp(self) -> float:
        return min(SPIN_MAX_S, max(SPIN_MIN_S, self.mean + 3 * self.dev))

    def observe(self, late_s: float) -> None:
        d = late_s - self.mean
        self.mean += self.WEIGHT * d
        self.dev += self.WEIGHT * (abs(d) - self.dev)
        self.value = self._clamp()


class Waiter:
    """Sleeps, then spins, to a point in time (:func:`time.perf_counter`); keeps its margin and spin total."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.margin = WakeMargin()
        self.since = clock()
        self.spun_s = 0.0

    def until(self, t: float) -> tuple[float, float]:
        """Wait until ``t``; (the time it ended, seconds spun)."""
        clock = self.clock
        now = clock()
        spin = t - now <= SPIN_ALWAYS_S or self.spun_s <= SPIN_SHARE * max(now - self.since, 1.0)
        sleep = 0.0 if t - now <= SPIN_ALWAYS_S else t - now - (self.margin.value if spin else 0.0)
        if sleep > 0:
            time.sleep(sleep)
            woke = clock()
            self.margin.observe(woke - now - sleep)
        else:
            woke = now
        if not spin:
            return woke, 0.0
        start = woke
        while woke < t:
            woke = clock()
        self.spun_s += woke - start
        return woke, woke - start
