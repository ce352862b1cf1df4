"""The point runner of a sweep: profile one point, and ``recstack.sweep(...)`` over it.

The point runner calls the run session (:func:`recstack.session.build_zoo`,
:func:`recstack.session.profile_built_zoo`);
the sweep machinery (:mod:`recstack.sweeps.run`, the executors) gets it passed in.
A zoo model built for one point is kept (:class:`BuildCache`) and profiled
again by the next point with the same build fields
(:data:`recstack.sweeps.spec.BUILD_FIELDS`) in inference mode, after a memory
preflight at that point's batch size.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from recstack.config.run import RunConfig
from recstack.errors import MemoryPreflightError, RecstackError
from recstack.sweeps.point import failed, summarise
from recstack.sweeps.spec import build_key

SWEEP_COUNTERS = False  # hardware-counter replays (perf) are left out of sweeps: they are per-profile detail


# -- running one point ------------------------------------------------------------------------------
class BuildCache:
    """The last built zoo model and its workload spec, by build key (one kept: memory stays one model's)."""

    def __init__(self) -> None:
        self.key: tuple[str, ...] | None = None
        self.net: Any = None
        self.spec: Any = None

    def get(self, cfg: RunConfig) -> tuple[Any, Any, float]:
        """(model, spec, build seconds: 0 when reused) for ``cfg``; preflight at its batch size either way."""
        from recstack import session

        key = build_key(cfg)
        if cfg.mode == "inference" and key == self.key and self.net is not None:
            from recstack.config.build import BuildOptions
            from recstack.zoo.build import preflight

            preflight(cfg.model, scale=cfg.scale, options=BuildOptions.of(cfg), workload=self.spec)
            return self.net, self.spec, 0.0
        self.key = self.net = self.spec = None  # free the old model before building the next
        t0 = time.perf_counter()
        net, spec = session.build_zoo(cfg)
        if cfg.mode == "inference":
            self.key, self.net, self.spec = key, net, spec
        return net, spec, time.perf_counter() - t0


_CACHE = BuildCache()  # one per process: a worker, or a Ray worker running many tasks


def run_point(cfg: RunConfig, profile_path: str | Path, cache: BuildCache | None = None, *,
              min_timed_s: float | None = None) -> dict[str, Any]:
    """Profile ``cfg``, save its profile to ``profile_path`` (atomic), return {status, reason, figures, stages}.

    A failure (bad input, the memory preflight, an exception in the model) is the result, not an exception.
    ``min_timed_s``: raise ``iters`` so that the timing pass takes about this long
    (:mod:`recstack.sweeps.calibrate`; zoo models).
    """
    t0 = time.perf_counter()
    try:
        prof, build_s = _profile(cfg, cache or _CACHE, min_timed_s)
    except MemoryPreflightError as exc:
        return failed(f"memory preflight: {exc}", time.perf_counter() - t0)
    except RecstackError as exc:
        return failed(f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
    except Exception as exc:  # a crash in the model or in recstack loses this point only
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        where = tb[-2].strip().replace("\n", " ") if len(tb) > 1 else ""
        return failed(f"{type(exc).__name__}: {exc} [{where}]", time.perf_counter() - t0)
    from recstack.outputs import atomic_output

    with atomic_output(profile_path) as tmp:
        prof.save(tmp)
    out = summarise(prof)
    out.update(status="ok", reason=None, wall_s=time.perf_counter() - t0, build_s=build_s)
    return out


def _profile(cfg: RunConfig, cache: BuildCache, min_timed_s: float | None) -> tuple[Any, float]:
    from recstack import session
    from recstack.usercode import is_factory

    if is_factory(cfg.model or ""):
        return session.profile_config(cfg), 0.0
    parts = session.resolve(cfg)
    net, spec, build_s = cache.get(cfg)
    run_cfg = cfg
    if min_timed_s:
        from recstack.sweeps.calibrate import iters_for, step_seconds

        run_cfg = cfg.updated(iters=iters_for(min_timed_s, step_seconds(net, spec, cfg), cfg.iters))
    # The profile's run.config is what ran (iters raised); the store row keys the requested config.
    prof = session.profile_built_zoo(net, spec, run_cfg, parts, counters=SWEEP_COUNTERS)
    return prof, build_s


def worker_main() -> int:
    """A local sweep worker's process (:mod:`recstack.sweeps.local` starts it)."""
    from recstack.sweeps.worker import serve

    return serve(run_point)


def sweep(spec: Any, out: str | Path = "sweep-out", **options: Any) -> Any:
    """Run a sweep: ``recstack.sweep(spec, out, executor=..., parallel=..., timeout_s=..., retry_failed=...)``.

    ``spec``: a sweep YAML, a dict or a :class:`~recstack.sweeps.spec.SweepSpec`; see
    :func:`recstack.sweeps.run.sweep` for the options. Returns a SweepResult.
    """
    from recstack.sweeps.run import sweep as run_sweep

    return run_sweep(spec, out, runner=run_point, **options)


__all__ = ["BuildCache", "run_point", "sweep", "worker_main"]
