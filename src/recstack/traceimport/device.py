"""Device-side figures of one imported trace, from the device events' own times (never host-side factors).

Per step (its span, the ProfilerStep range on the host): GPU busy (the union of every device event's
interval, clipped to the span), GPU idle (span minus busy), compute (the union of non-collective kernels),
communication (the union of collective kernels: NCCL/RCCL) and their overlap (compute + communication minus
their union). Copies and sets count as busy, neither compute nor communication. Intervals are unions, so
concurrent streams are not counted twice; a step's device time by kind (sums, not unions) is in
``device_us_by_kind`` beside them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from recstack.traceimport.collect import DEVICE_KINDS, Collector

KERNEL, COLLECTIVE = DEVICE_KINDS.index("kernel"), DEVICE_KINDS.index("collective")


def _union_in(ts: np.ndarray, end: np.ndarray, reach: np.ndarray, lo: float, hi: float) -> float:
    """Length of the union of [ts, end) clipped to [lo, hi); ``ts`` sorted, ``reach`` the running max of end."""
    i0 = int(np.searchsorted(reach, lo, side="right"))  # the first interval that reaches past lo
    i1 = int(np.searchsorted(ts, hi, side="left"))  # intervals starting before hi
    if i1 <= i0:
        return 0.0
    s = np.clip(ts[i0:i1], lo, hi)
    e = np.clip(end[i0:i1], lo, hi)
    prev = np.maximum.accumulate(np.concatenate(([lo], e[:-1])))
    return float(np.maximum(0.0, e - np.maximum(s, prev)).sum())


class _Track:
    """Device intervals of one selection, sorted, for unions over any span."""

    def __init__(self, ts: np.ndarray, dur: np.ndarray) -> None:
        order = np.argsort(ts, kind="stable")
        self.ts = ts[order]
        self.end = self.ts + dur[order]
        self.reach = np.maximum.accumulate(self.end) if len(self.end) else self.end

    def union(self, lo: float, hi: float) -> float:
        return _union_in(self.ts, self.end, self.reach, lo, hi)


def step_figures(c: Collector, starts: list[float], ends: list[float]) -> list[dict[str, Any]]:
    """Per step: span, busy, idle, compute, communication, overlap (seconds)."""
    ts = np.frombuffer(c.cols.k_ts, dtype=np.float64)
    dur = np.frombuffer(c.cols.k_dur, dtype=np.float64)
    kind = np.frombuffer(c.cols.k_kind, dtype=np.int8)
    work = (kind == KERNEL) | (kind == COLLECTIVE)
    every, work_track = _Track(ts, dur), _Track(ts[work], dur[work])
    compute = _Track(ts[kind == KERNEL], dur[kind == KERNEL])
    comm = _Track(ts[kind == COLLECTIVE], dur[kind == COLLECTIVE])
    out = []
    for lo, hi in zip(starts, ends, strict=True):
        busy, cu, co = every.union(lo, hi), compute.union(lo, hi), comm.union(lo, hi)
        both = work_track.union(lo, hi) if cu and co else cu + co
        out.append({"span_s": (hi - lo) * 1e-6, "busy_s": busy * 1e-6, "idle_s": max(0.0, hi - lo - busy) * 1e-6,
                    "compute_s": cu * 1e-6, "communication_s": co * 1e-6,
                    "overlap_s": max(0.0, cu + co - both) * 1e-6})
    return out
