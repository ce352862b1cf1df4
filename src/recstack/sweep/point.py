"""Run one sweep point in this process and summarise its profile into store rows.

Used by both executors: the local workers (:mod:`recstack.sweep.worker`) and the
Ray tasks (:mod:`recstack.sweep.ray_executor`). A zoo model built for one
point is kept (:class:`BuildCache`) and profiled again by the next point with
the same build fields (:data:`recstack.sweep.spec.BUILD_FIELDS`) in inference
mode, after a memory preflight at that point's batch size.

Figures, and how each is obtained:

* ``step_p50_s`` / ``step_p90_s`` / ``step_p99_s``: percentiles of the
  uninstrumented steps of the timing pass (measured; ``root.latency_s``).
* ``throughput``: ``batch_size / step_p50_s`` (samples/s; formula).
* ``overhead``: the stage pass's step time over the uninstrumented step's
  (median of paired ratios; ``overhead.stage_pass_ratio``).
* ``timed_s``: time inside the timed steps: ``pairs x (uninstrumented + stage-pass
  median step) + op_iters x op-pass median step`` (formula on measured medians).
* stage ``share``: stage time over the run's time; ``bound`` and ``roof_fraction``
  (``roofline.ceiling_fraction``) from the roofline analysis when a machine file is known.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from recstack.config.run import RunConfig
from recstack.errors import MemoryPreflightError, RecstackError
from recstack.sweep.spec import build_key

SWEEP_COUNTERS = False  # hardware-counter replays (perf) are left out of sweeps: they are per-profile detail


class BuildCache:
    """The last built zoo model and its workload spec, by build key (one kept: memory stays one model's)."""

    def __init__(self) -> None:
        self.key: tuple[str, ...] | None = None
        self.net: Any = None
        self.spec: Any = None

    def get(self, cfg: RunConfig) -> tuple[Any, Any, float]:
        """(model, spec, build seconds: 0 when reused) for ``cfg``; preflight at its batch size either way."""
        from recstack import api

        key = build_key(cfg)
        if cfg.mode == "inference" and key == self.key and self.net is not None:
            from recstack.zoo.build import preflight

            preflight(cfg.model, scale=cfg.scale, options=api.zoo_build_options(cfg), workload=self.spec)
            return self.net, self.spec, 0.0
        self.key = self.net = self.spec = None  # free the old model before building the next
        t0 = time.perf_counter()
        net, spec = api.build_zoo(cfg)
        if cfg.mode == "inference":
            self.key, self.net, self.spec = key, net, spec
        return net, spec, time.perf_counter() - t0


def run_point(cfg: RunConfig, profile_path: str | Path, cache: BuildCache) -> dict[str, Any]:
    """Profile ``cfg``, save its profile to ``profile_path`` (atomic), return {status, reason, figures, stages}."""
    t0 = time.perf_counter()
    build_s = 0.0
    try:
        prof, build_s = _profile(cfg, cache)
    except MemoryPreflightError as exc:
        return _failed(f"memory preflight: {exc}", t0)
    except RecstackError as exc:
        return _failed(f"{type(exc).__name__}: {exc}", t0)
    except Exception as exc:  # a crash in the model or in recstack loses this point only
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        return _failed(f"{type(exc).__name__}: {exc} [{tb[-2].strip() if len(tb) > 1 else ''}]", t0)
    from recstack.outputs import atomic_output

    with atomic_output(profile_path) as tmp:
        prof.save(tmp)
    out = summarise(prof)
    out.update(status="ok", reason=None, wall_s=time.perf_counter() - t0, build_s=build_s)
    return out


def _failed(reason: str, t0: float) -> dict[str, Any]:
    return {"status": "failed", "reason": reason[:2000], "wall_s": time.perf_counter() - t0, "stages": []}


def _profile(cfg: RunConfig, cache: BuildCache) -> tuple[Any, float]:
    from recstack import api

    if api.is_factory(cfg.model or ""):
        return api.profile_config(cfg), 0.0
    resolved = api.resolve_files(cfg)
    net, spec, build_s = cache.get(cfg)
    prof = api.profile_built_zoo(net, spec, cfg, resolved=resolved, counters=SWEEP_COUNTERS)
    return prof, build_s


def summarise(prof: Any) -> dict[str, Any]:
    """The store's figures of one profile (see the module docstring for each formula)."""
    root = prof.root
    lat = root.extra.get("latency_s") or {}
    ov = prof.overhead or {}
    cont = (prof.environment or {}).get("contention") or {}
    pairs = ov.get("pairs") or 0
    timed = pairs * ((ov.get("uninstrumented_step_s") or 0) + (ov.get("stage_pass_step_s") or 0))
    timed += (prof.run.get("op_iters") or 0) * (ov.get("op_pass_step_s") or 0)
    total = root.time_s or 0.0
    stages = []
    for st in root.children:
        roof = st.extra.get("roofline") or {}
        stages.append({
            "stage": st.name,
            "time_s": st.time_s,
            "share": (st.time_s / total) if total > 0 else None,
            "flops": st.flops,
            "bytes": st.bytes,
            "bound": st.extra.get("bound"),
            "roof_fraction": roof.get("ceiling_fraction"),
        })
    return {
        "step_p50_s": lat.get("p50"),
        "step_p90_s": lat.get("p90"),
        "step_p99_s": lat.get("p99"),
        "throughput": root.extra.get("throughput_samples_per_s"),
        "overhead": ov.get("stage_pass_ratio"),
        "timed_s": timed,
        "contended": bool(cont.get("detected")),
        "contention_evidence": "; ".join(str(e) for e in cont.get("evidence", [])[:3]) or None,
        "cpu_model": (prof.environment or {}).get("cpu_model"),
        "stages": stages,
    }


__all__ = ["BuildCache", "run_point", "summarise"]
