"""Run one sweep point in this process and summarise its profile into store rows.

Used by both executors: the local workers (:mod:`recstack.sweeps.worker`) and the
Ray tasks (:mod:`recstack.sweeps.ray_executor`). A zoo model built for one
point is kept (:class:`BuildCache`) and profiled again by the next point with
the same build fields (:data:`recstack.sweeps.spec.BUILD_FIELDS`) in inference
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

from typing import Any


def failed(reason: str, wall_s: float, status: str = "failed") -> dict[str, Any]:
    """The result of a point that produced no profile."""
    return {"status": status, "reason": reason[:2000], "wall_s": wall_s, "stages": []}


def summarise(prof: Any) -> dict[str, Any]:
    """The store's figures of one profile (:class:`recstack.schema.sweep_model.PointSummary`; the module
    docstring gives each formula)."""
    root = prof.root
    lat = root.latency_s or {}
    ov = prof.overhead or {}
    cont = (prof.environment or {}).get("contention") or {}
    pairs = ov.get("pairs") or 0
    timed = pairs * ((ov.get("uninstrumented_step_s") or 0) + (ov.get("stage_pass_step_s") or 0))
    timed += (prof.run.get("op_iters") or 0) * (ov.get("op_pass_step_s") or 0)
    total = root.time_s or 0.0
    stages = []
    for st in root.children:
        roof = st.roofline or {}
        stages.append({
            "stage": st.name,
            "time_s": st.time_s,
            "share": (st.time_s / total) if total > 0 else None,
            "flops": st.flops,
            "bytes": st.bytes,
            "bound": st.bound,
            "roof_fraction": roof.get("ceiling_fraction"),
        })
    from recstack.schema.documents import check
    from recstack.schema.sweep_model import PointSummary

    return check(PointSummary, {
        "step_p50_s": lat.get("p50"),
        "step_p90_s": lat.get("p90"),
        "step_p99_s": lat.get("p99"),
        "throughput": root.throughput_samples_per_s,
        "overhead": ov.get("stage_pass_ratio"),
        "iters_run": prof.run.get("iters"),
        "timed_s": timed,
        "contended": bool(cont.get("detected")),
        "contention_evidence": "; ".join(str(e) for e in cont.get("evidence", [])[:3]) or None,
        "cpu_model": (prof.environment or {}).get("cpu_model"),
        "stages": stages,
    })


__all__ = ["failed", "summarise"]
