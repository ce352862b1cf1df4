"""Time-targeted timing passes: raise a point's ``iters`` so that its timed steps take about ``min_timed_s``.

A sweep's fixed cost per point (warm-up, the contention probes, the op pass's
profiler start-up, the cost model) does not shrink with the step, so on a
small batch 20 timed steps are a few milliseconds beside seconds of overhead,
and their p99 is just the largest of 20. With ``min_timed_s`` (a sweep-file
option) the worker times two plain steps of the built model first and runs the
timing pass with ``iters = ceil(min_timed_s / (2 x step))`` pairs (never
fewer than the point's own ``iters``, at most :data:`MAX_ITERS`). The point
keeps its identity (``config_hash`` of the requested config); the store's
``iters_run`` column and the profile's ``run.iters`` say how many ran.

The estimate is the slowest of a few plain steps timed just before the
passes (a burst of contention then lowers iters rather than raising them); on
a contended host a step can still slow down after it (the point is then
flagged contended), and the per-point timeout bounds the cost.
"""

from __future__ import annotations

import math
import time
from typing import Any

from recstack.config.run import RunConfig

MAX_ITERS = 2000  # bounds a point's time when a step is tiny (and the bootstrap's work on the pairs)


CALIBRATION_STEPS = 5  # timed after one untimed step; the slowest is the estimate (errs towards fewer iters)


def step_seconds(net: Any, spec: Any, cfg: RunConfig) -> float:
    """The slowest of a few plain steps of ``net`` on a batch of ``spec`` at ``cfg``'s batch size (measured)."""
    import torch

    from recstack.profiling.runner import ProfileOptions, Step
    from recstack.workload import bind

    bound = bind(spec, net.features(), net.num_dense, net.num_tasks)
    batch = bound.batch(cfg.batch_size, 0)
    old = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        step = Step(net, ProfileOptions(cfg), None)
        step.run(batch)
        times = []
        for _ in range(CALIBRATION_STEPS):
            t0 = time.perf_counter()
            step.run(batch)
            times.append(time.perf_counter() - t0)
        return max(times)
    finally:
        torch.set_num_threads(old)


def iters_for(min_timed_s: float, step_s: float, floor: int) -> int:
    """Pairs of timing-pass steps (A + B) that take about ``min_timed_s``: at least ``floor``, at most MAX_ITERS."""
    if step_s <= 0:
        return max(floor, MAX_ITERS)
    return int(min(MAX_ITERS, max(floor, math.ceil(min_timed_s / (2 * step_s)))))


__all__ = ["CALIBRATION_STEPS", "MAX_ITERS", "iters_for", "step_seconds"]
