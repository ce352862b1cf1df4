"""The figures of one load run (all measured; the formulas are stated here and in docs/serving.md).

Per request (times from its *scheduled* arrival):

* latency = completion of its last batch - scheduled arrival;
* queue time = start of its first batch - scheduled arrival; service time = latency - queue time;
* completed: every batch finished by the deadline on a worker that stayed alive;
  failed: a batch was in flight on a worker that died; late: neither (unfinished at the deadline).

``latency_s`` percentiles and mean come from an HDR histogram (microseconds, 3
significant digits) of the completed requests' latencies plus, for each late
request, the time it had waited at the deadline (a lower bound: late requests
are never left out). ``queue_s_mean`` and ``service_s_mean`` are exact means
over the completed requests. The 95% confidence interval of a percentile p
over n samples is distribution-free: the order statistics at ranks
n p -/+ 1.96 sqrt(n p (1 - p)) (normal approximation to the binomial).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from recstack.noise import percentile_ci
from recstack.schema.documents import check
from recstack.schema.serving_model import ServingResult
from recstack.serving.loadgen import RunRecord, new_histogram

PERCENTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


def request_times(rec: RunRecord) -> dict[str, np.ndarray]:
    """Per-request end, first start, and the completed / failed / late masks."""
    plan = rec.plan
    idx = plan.request_first_batch[:-1]
    released = np.arange(plan.requests) < rec.released
    if plan.requests:
        end = np.maximum.reduceat(rec.t_end, idx)  # NaN if any batch never finished
        start = np.fmin.reduceat(rec.t_start, idx)
    else:
        end = start = np.zeros(0)
    with np.errstate(invalid="ignore"):
        done = released & ~rec.request_failed & np.isfinite(end) & (end <= rec.deadline_s)
    failed = released & rec.request_failed
    late = released & ~failed & ~done
    return {"end": end, "start": start, "done": done, "failed": failed, "late": late}


def histogram_of(values_s: np.ndarray) -> HdrHistogram:
    h = new_histogram()
    for v in np.maximum(1, np.rint(values_s * 1e6)).astype(np.int64).tolist():
        h.record_value(v)
    return h


def encode(h: HdrHistogram) -> str:
    raw = h.encode()
    return raw.decode("ascii") if isinstance(raw, bytes) else str(raw)


def decode(text: str) -> HdrHistogram:
    """A histogram saved by :func:`encode` (``histogram.latency_us`` of a result)."""
    return HdrHistogram.decode(text.encode("ascii") if isinstance(text, str) else text)


def summarise(rec: RunRecord, *, target_pct: float = 99.0) -> dict[str, Any]:
    """The result object of ``recstack serve --json`` (:class:`recstack.schema.serving_model.ServingResult`;
    docs/serving.md gives every key)."""
    plan = rec.plan
    t = request_times(rec)
    arr = plan.arrivals
    lat_done = t["end"][t["done"]] - arr[t["done"]]
    lat_late = np.maximum(rec.deadline_s - arr[t["late"]], 0.0)
    all_lat = np.sort(np.concatenate([lat_done, lat_late]))
    queue = t["start"][t["done"]] - arr[t["done"]]
    hist = histogram_of(all_lat)
    completed = int(t["done"].sum())
    window = max(rec.elapsed_s, 1e-9)
    per_worker = [round(w["busy_s"] / window, 6) for w in rec.worker_stats if w["served_batches"] or w["alive"]]
    n_tail = all_lat.size * (1 - target_pct / 100)
    started = rec.t_start[np.isfinite(rec.t_start)]
    lateness = rec.lateness
    return check(ServingResult, {
        "complete": rec.stopped is None,
        "stopped": rec.stopped,
        "offered_qps": plan.requests / plan.duration_s if plan.duration_s > 0 else None,
        "achieved_qps": completed / max(window, plan.duration_s),
        "requests": int(rec.released),
        "planned_requests": plan.requests,
        "completed": completed,
        "failed": int(t["failed"].sum()),
        "late": int(t["late"].sum()),
        "latency_s": {
            **{k: (hist.get_value_at_percentile(p) / 1e6 if all_lat.size else None) for k, p in PERCENTILES.items()},
            "mean": (hist.get_mean_value() / 1e6) if all_lat.size else None,
            "max": float(all_lat[-1]) if all_lat.size else None,
        },
        "latency_ci95_s": {k: percentile_ci(all_lat, p) for k, p in PERCENTILES.items()},
        "samples_beyond_target_percentile": round(n_tail, 1),
        "queue_s_mean": float(queue.mean()) if queue.size else None,
        "service_s_mean": float((lat_done - queue).mean()) if queue.size else None,
        "handoff_s_mean": _nanmean(rec.t_start - rec.t_release),
        "utilisation": float(np.mean(per_worker)) if per_worker else 0.0,
        "worker_utilisation": per_worker,
        "duration_s": plan.duration_s,
        "deadline_s": rec.deadline_s,
        "elapsed_s": rec.elapsed_s,
        "batches": {
            "planned": int(plan.batch_size.size),
            "served": int(started.size),
            "mean_size": float(plan.batch_size.mean()) if plan.batch_size.size else None,
        },
        "query_size_mean": float(plan.sizes.mean()) if plan.sizes.size else None,
        "worker_deaths": rec.deaths,
        "workers": rec.worker_stats,
        "loadgen": {
            "cpu_cores": rec.loadgen_cpu_s / window,
            "worker_spin_cores": rec.worker_spin_s / window,
            "lookahead_s": rec.lookahead_s,
            "dispatch_lateness_s": {
                "p50": lateness.get_value_at_percentile(50) / 1e6 if lateness.get_total_count() else None,
                "p99": lateness.get_value_at_percentile(99) / 1e6 if lateness.get_total_count() else None,
                "max": lateness.get_max_value() / 1e6 if lateness.get_total_count() else None,
            },
        },
        "histogram": {
            "format": "HdrHistogram V2, compressed, base64 (hdrhistogram: HdrHistogram.decode)",
            "unit": "us",
            "latency_us": encode(hist),
            "dispatch_lateness_us": encode(lateness),
        },
    })


def _nanmean(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else None
