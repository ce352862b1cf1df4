"""``recstack serve --search --p99 S``: the most load a configuration sustains under a tail-latency target.

Per configuration (a point of the grid over max batch B, workers, threads,
backend, dtype and, with a CPU/GPU split, the size threshold):

1. bracket: from the starting QPS, double while the target is met, halve while
   it is not, until one QPS meets it and one does not;
2. bisect between them until the gap is within ``rel_tol`` of the upper end.

A miss while the workers were busy less than :data:`LOW_UTILISATION` of the
time ends the halving: queueing is then not what misses the target (the
service time itself is too long), so lower loads cannot meet it either.

A probe meets the target when its latency percentile is at most the target and
no request failed. Every probe schedules at least ``tail_samples / (1 - p)``
requests (100 samples beyond p99: 10,000 requests), so its percentile rests on
``tail_samples`` observations beyond it; its 95% interval is reported
(:func:`recstack.serving.summary.percentile_ci`). The latency-bounded QPS of a
configuration is the highest QPS that met the target. Configurations are
probed in grid order until the time budget is spent; the best is the one with
the highest latency-bounded QPS. When none meets the target, the result says so
and names the probe closest to it.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from recstack.config.run import RunConfig, usable_cores
from recstack.errors import ConfigError
from recstack.serving.loadgen import SigintFlag
from recstack.serving.service import SPIN, ServeOptions, build_plan, plan_sizes, pool_for, probe

GRID_KEYS = ("max_batch", "workers", "threads", "backend", "dtype", "gpu_threshold")
MAX_PROBES_PER_POINT = 10
QPS_FLOOR = 0.05
LOW_UTILISATION = 0.2  # a miss at a lower mean worker utilisation ends the halving: the target is out of reach


@dataclass(frozen=True)
class Target:
    pct: float  # e.g. 99.0
    latency_s: float
    tail_samples: int = 100

    @property
    def key(self) -> str:
        return {50.0: "p50", 95.0: "p95", 99.0: "p99", 99.9: "p999"}[self.pct]

    def min_requests(self) -> int:
        return int(round(self.tail_samples / (1 - self.pct / 100)))


def parse_grid(text: str | None, cfg: RunConfig, opts: ServeOptions) -> list[dict[str, Any]]:
    """``key=v1,v2;key=...`` over GRID_KEYS; defaults: B in {64, 256, 1024} x (all cores in workers, or in
    threads) at the run's backend and dtype. Points that need more than the usable cores are left out."""
    cores = usable_cores()
    axes: dict[str, list[Any]] = {
        "max_batch": [64, 256, 1024],
        "workers": sorted({cores, 1}),
        "threads": sorted({1, cores}),
        "backend": [cfg.backend],
        "dtype": [cfg.dtype],
        "gpu_threshold": [opts.gpu_threshold],
    }
    if text:
        for part in filter(None, (p.strip() for p in text.split(";"))):
            key, sep, vals = part.partition("=")
            key = key.strip().replace("-", "_")
            if not sep or key not in GRID_KEYS:
                raise ConfigError(f"expected key=v1,v2;... with keys {', '.join(GRID_KEYS)} (got {part!r})",
                                  field="--grid")
            raw = [v.strip() for v in vals.split(",") if v.strip()]
            if not raw:
                raise ConfigError(f"{key} has no values", field="--grid")
            try:
                axes[key] = [int(v) for v in raw] if key in ("max_batch", "workers", "threads", "gpu_threshold") \
                    else raw
            except ValueError:
                raise ConfigError(f"{key} takes integers (got {vals!r})", field="--grid") from None
    points = []
    for combo in itertools.product(*(axes[k] for k in GRID_KEYS)):
        point = dict(zip(GRID_KEYS, combo, strict=True))
        if cfg.model != SPIN and point["workers"] * point["threads"] > cores and not opts.oversubscribe:
            continue
        points.append(point)
    if not points:
        raise ConfigError(f"no grid point fits the {cores} usable cores (workers x threads)", field="--grid")
    return points


def configure(cfg: RunConfig, opts: ServeOptions, point: dict[str, Any]) -> tuple[RunConfig, ServeOptions]:
    over = {k: point[k] for k in ("backend", "dtype") if point.get(k) is not None}
    if cfg.model != SPIN:
        over["threads"] = point["threads"]
    c = RunConfig.build(cfg, over, name=lambda n: "--grid " + n)
    o = replace(opts, max_batch=point["max_batch"], workers=point["workers"],
                gpu_threshold=point.get("gpu_threshold"))
    return c, o


def capacity_estimate(pool: Any, plan: Any) -> float | None:
    """Queries per second the CPU workers could complete back to back: workers / mean service per query,
    the service per batch interpolated from the workers' timed warm-up batches (an estimate: a start point)."""
    import numpy as np

    from recstack.serving.plan import CPU

    times = [w.info.get("service_s_by_size") or {} for w in pool.live() if w.cls == CPU]
    if not times or not times[0] or plan.requests == 0:
        return None
    sizes = sorted(int(k) for k in times[0])
    secs = [float(np.median([t[k] for t in times if k in t])) for k in sizes]
    cpu = plan.batch_class == CPU
    per_batch = np.interp(plan.batch_size[cpu], sizes, secs)
    per_query = per_batch.sum() / plan.requests
    return len(times) / per_query if per_query > 0 else None


def meets(result: dict[str, Any], target: Target) -> bool:
    value = (result.get("latency_s") or {}).get(target.key)
    return value is not None and value <= target.latency_s and not result.get("failed")


class Search:
    """The search over the grid; ``on_probe(row)`` sees each probe as it lands (store, progress)."""

    def __init__(self, cfg: RunConfig, opts: ServeOptions, target: Target, *, budget_s: float,
                 points: list[dict[str, Any]], on_probe: Callable[[str, dict[str, Any], dict[str, Any] | None], None],
                 rel_tol: float = 0.05, start_qps: float | None = None,
                 announce: Callable[[float], None] | None = None) -> None:
        self.cfg, self.opts, self.target, self.points = cfg, opts, target, points
        self.deadline = time.monotonic() + budget_s
        self.budget_s = budget_s
        self.on_probe = on_probe
        self.rel_tol = rel_tol
        self.start_qps = start_qps  # None: 0.7 x each point's capacity estimate
        self.search_id = uuid.uuid4().hex[:12]
        self.probes: list[dict[str, Any]] = []
        self.stopped: str | None = None  # a probe was interrupted (SIGINT): the search ends there
        self.announce = announce  # called with the QPS as each probe's load starts (progress)
        self.sigint = SigintFlag()  # SIGINT between probes (starting workers, planning) ends the search too

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self) -> dict[str, Any]:
        results, skipped = [], []
        with self.sigint.installed():
            for point in self.points:
                if self.left() <= 0 or self._interrupted():
                    skipped.append(point)
                    continue
                res = self._point(point)
                (results if res["probes"] else skipped).append(res if res["probes"] else point)
        return self._verdict(results, skipped)

    def _interrupted(self) -> bool:
        if self.sigint.reason and not self.stopped:
            self.stopped = self.sigint.reason
        return self.stopped is not None

    def _probe_time(self, qps: float) -> float:
        return max(self.opts.duration_s, self.target.min_requests() / qps) + self.opts.grace()

    def _point(self, point: dict[str, Any]) -> dict[str, Any]:
        cfg, opts = configure(self.cfg, self.opts, point)
        info = {**point, "model": cfg.model, "config_key": cfg.key(), "run_config": cfg.model_dump(mode="json")}
        plan0 = build_plan(cfg, opts, qps=opts.qps, min_requests=self.target.min_requests())
        good: tuple[float, dict[str, Any]] | None = None
        bad: tuple[float, dict[str, Any]] | None = None
        tried: list[dict[str, Any]] = []
        unreachable = False
        with pool_for(cfg, opts, plan_sizes(plan0)) as pool:
            pool.start()
            cap = capacity_estimate(pool, plan0)
            qps = self.start_qps or (0.7 * cap if cap else opts.qps)
            info["capacity_estimate_qps"] = cap
            for _ in range(MAX_PROBES_PER_POINT):
                if self.left() < self._probe_time(qps) or qps < QPS_FLOOR or self._interrupted():
                    break
                plan = build_plan(cfg, opts, qps=qps, min_requests=self.target.min_requests())
                announce = None if self.announce is None else (lambda q=qps: self.announce(q))
                res = probe(pool, plan, opts, qps=qps, target_pct=self.target.pct, announce=announce)
                ok = meets(res, self.target)
                res["meets_target"] = ok
                tried.append({"qps": qps, "result": res})
                self.on_probe("probe", {**info, "meets_target": ok}, res)
                if res.get("stopped"):  # interrupted: its figures are partial, and the search ends here
                    self.stopped = res["stopped"]
                    break
                if ok and (good is None or qps > good[0]):
                    good = (qps, res)
                if not ok and (bad is None or qps < bad[0]):
                    bad = (qps, res)
                if not ok and good is None and res.get("utilisation", 1.0) < LOW_UTILISATION:
                    unreachable = True  # missed with the workers mostly idle: less load cannot help
                    break
                if good and bad:
                    if (bad[0] - good[0]) <= self.rel_tol * bad[0]:
                        break
                    qps = (good[0] + bad[0]) / 2
                else:
                    qps = qps * 2 if ok else qps / 2
        out = {**info, "qps_at_target": good[0] if good else None, "meets_target": good is not None,
               "probes": len(tried), "unreachable": unreachable, "bracket": [good[0] if good else None, bad[0] if bad else None],
               "at_target": good[1] if good else None,
               "curve": [{"qps": t["qps"], "p99_s": (t["result"].get("latency_s") or {}).get("p99"),
                          "meets_target": t["result"]["meets_target"]} for t in sorted(tried, key=lambda t: t["qps"])],
               "closest": min(tried, key=lambda t: _miss(t["result"], self.target))["result"] if tried else None}
        if tried:  # a point the budget left no time for is listed as not probed, with no result row
            self.on_probe("result", out, out["at_target"] or out["closest"])
        return out

    def _verdict(self, results: list[dict[str, Any]], skipped: list[dict[str, Any]]) -> dict[str, Any]:
        met = [r for r in results if r["meets_target"]]
        best = max(met, key=lambda r: r["qps_at_target"]) if met else None
        closest = None
        if not met and results:
            closest = min((r for r in results if r["closest"]), key=lambda r: _miss(r["closest"], self.target),
                          default=None)
        verdict = {
            "search_id": self.search_id,
            "target": {"percentile": self.target.pct, "latency_s": self.target.latency_s,
                       "tail_samples": self.target.tail_samples, "min_requests": self.target.min_requests()},
            "budget_s": self.budget_s,
            "complete": self.stopped is None,
            "stopped": self.stopped,
            "met": best is not None,
            "best": _brief(best) if best else None,
            "closest": _brief(closest) if closest else None,
            "configurations": [_brief(r) for r in results],
            "not_probed": skipped,
        }
        self.on_probe("best", {**(best or closest or {}), "meets_target": best is not None},
                      (best or {}).get("at_target") or (closest or {}).get("closest"))
        return verdict


def _miss(result: dict[str, Any], target: Target) -> float:
    v = (result.get("latency_s") or {}).get(target.key)
    return float("inf") if v is None else v - target.latency_s


def _brief(r: dict[str, Any]) -> dict[str, Any]:
    """A configuration's result without the bulky per-probe objects (latencies at target kept)."""
    at = r.get("at_target") or r.get("closest") or {}
    return {
        **{k: r.get(k) for k in (*GRID_KEYS, "qps_at_target", "meets_target", "probes", "unreachable", "bracket",
                                 "capacity_estimate_qps", "curve")},
        "latency_s": at.get("latency_s"), "latency_ci95_s": at.get("latency_ci95_s"),
        "achieved_qps": at.get("achieved_qps"), "utilisation": at.get("utilisation"),
        "contended": bool((at.get("contention") or {}).get("detected")),
    }
