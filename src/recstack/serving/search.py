"""``recstack serve --search --p99 S``: the most load a configuration sustains under a tail-latency target.

The search spends its budget in three steps:

1. **Screen** every grid point (at most :data:`SCREEN_SHARE` of the budget):
   start its workers (one pool for the points that differ only in B) and
   measure its **service floor**: the least latency of :data:`FLOOR_QUERIES`
   queries of the p99 size served one at a time on idle workers (measured;
   where that fails, an estimate from the warm-up timings: the query's batches
   spread over the workers longest first, each the fastest of 3 timed batches
   of its size, interpolated). Then serve a burst of a few hundred requests
   back to back (all scheduled at time 0, so the workers never idle; cut at 3x
   its aimed length if the warm-up guess was high): its **capacity** =
   completed / elapsed (measured, closed loop). A point whose floor is above
   the target gets no burst (it is not probed, below).
2. **Order and prune**: points are probed in decreasing capacity. A point is
   not probed when its service floor exceeds the target (a query that size
   cannot finish in time even on idle workers: the p99 latency is at least the
   p99 service time), unless no point's floor is below the target (then the
   lowest-floor point is probed, to measure the closest); and when its
   capacity x (1 + :data:`CAPACITY_MARGIN`) is below the best QPS already
   confirmed at the target: open-loop load above a configuration's capacity
   grows its queue without bound, so its QPS at target is below its capacity
   and it cannot beat the best (the margin covers the burst's noise).
3. **Probe** a point by bisection on QPS from 0.8 x its capacity, with the
   bracket's upper end at 1.1 x capacity (assumed to miss; dropped if a probe
   near it meets), until the bracket is within ``rel_tol`` (at least
   :data:`SCREEN_REL_TOL` on screening probes). These probes are
   **screening** probes of ``screen_samples`` samples beyond the percentile
   (20 by default: 2,000 requests for p99; their 95% interval is wider and is
   reported). The highest screening QPS that met is then **confirmed** by a full
   probe of ``tail_samples`` beyond the percentile (100: 10,000 requests, the
   issue's rule); if the full probe misses, the highest screening QPS that met
   at most :data:`CONFIRM_STEP` x the missed one (or that QPS itself) is
   confirmed instead, up to :data:`MAX_CONFIRMS_PER_POINT` full probes. A point's
   latency-bounded QPS is its highest *full* probe that met; screening alone
   never makes a result. The bisection stops early rather than leave no time
   for that full probe. With ``screen_samples >= tail_samples`` every probe is
   full and no confirmation is needed.

A probe meets the target when its latency percentile is at most the target and
no request failed. A miss while the workers were busy less than
:data:`LOW_UTILISATION` of the time ends the halving: queueing is then not what
misses the target, so lower loads cannot meet it either. The best point is the
one with the highest confirmed QPS; when none meets the target, the result
names the probe closest to it and the lowest service floor of the grid.
Every probe, every burst (kind ``capacity``) and every result lands in the
store; points not probed are listed with the reason.
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
from recstack.serving import MAX_WORKERS, QUERY_SIZE_MAX
from recstack.serving.loadgen import SigintFlag
from recstack.serving.service import SPIN, ServeOptions, build_plan, plan_sizes, pool_for, probe

GRID_KEYS = ("max_batch", "workers", "threads", "backend", "dtype", "gpu_threshold")
MAX_PROBES_PER_POINT = 10
MAX_CONFIRMS_PER_POINT = 3
QPS_FLOOR = 0.05
LOW_UTILISATION = 0.2  # a miss at a lower mean worker utilisation ends the halving: the target is out of reach
SCREEN_SHARE = 0.3  # of the budget, for screening every point (pool start, warm-up, burst)
BURST_REQUESTS = (30, 300)  # requests in a capacity burst: at least, at most
BURST_S = 3.0  # a burst's length aimed at, from the warm-up estimate (less when the screening share runs low)
BURST_LIMIT_FACTOR, BURST_LIMIT_MIN_S = 3.0, 2.0  # a burst is cut at max(min, factor x its aimed length)
START_FRACTION = 0.8  # the first probe, x capacity
UPPER_FRACTION = 1.1  # the bracket's assumed upper end, x capacity
SCREEN_REL_TOL = 0.1  # bisection on screening probes stops at this bracket (their p99 is noisier)
CONFIRM_STEP = 0.9  # after a full probe misses, the next confirmation is at most this x its QPS
FLOOR_QUERIES = 5  # p99-sized queries served one at a time for the measured service floor
CAPACITY_MARGIN = 0.15  # pruning: capacity x (1 + margin) below the best confirmed QPS


@dataclass(frozen=True)
class Target:
    pct: float  # e.g. 99.0
    latency_s: float
    tail_samples: int = 100
    screen_samples: int = 20  # samples beyond the percentile in a screening probe

    @property
    def key(self) -> str:
        return {50.0: "p50", 95.0: "p95", 99.0: "p99", 99.9: "p999"}[self.pct]

    @property
    def screens(self) -> bool:
        """Whether screening probes are shorter than full ones (else every probe is full)."""
        return self.screen_samples < self.tail_samples

    def min_requests(self, samples: int | None = None) -> int:
        return int(round((self.tail_samples if samples is None else samples) / (1 - self.pct / 100)))


def _counts(cores: int) -> list[int]:
    """1, the powers of two below ``cores``, and ``cores``: the workers and threads axes."""
    return sorted({1, cores} | {1 << k for k in range(cores.bit_length()) if 1 << k <= cores})


def _check_counts(key: str, values: list[Any]) -> None:
    """A grid's counts: max_batch, workers, threads >= 1 and gpu_threshold >= 0, within the serve limits."""
    low = 0 if key == "gpu_threshold" else 1
    high = {"workers": MAX_WORKERS, "threads": MAX_WORKERS}.get(key, QUERY_SIZE_MAX)
    if key in ("max_batch", "workers", "threads", "gpu_threshold"):
        bad = [v for v in values if not low <= v <= high]
        if bad:
            raise ConfigError(f"{key} must be within {low}..{high} (got {bad[0]})", field="--grid")


def parse_grid(text: str | None, cfg: RunConfig, opts: ServeOptions) -> list[dict[str, Any]]:
    """``key=v1,v2;key=...`` over GRID_KEYS; defaults: B in {64, 256, 1024} x workers and threads in
    {1, powers of two, all cores} at the run's backend and dtype. Points that need more than the usable
    cores are left out."""
    cores = usable_cores()
    axes: dict[str, list[Any]] = {
        "max_batch": [64, 256, 1024],
        "workers": _counts(cores),
        "threads": _counts(cores),
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
            _check_counts(key, axes[key])
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


def _warmup_table(pool: Any) -> tuple[int, list[int], list[float]] | None:
    """(live CPU workers, batch sizes, median warm-up seconds per size across them); None without timings."""
    import numpy as np

    from recstack.serving.plan import CPU

    times = [w.info.get("service_s_by_size") or {} for w in pool.live() if w.cls == CPU]
    if not times or not times[0]:
        return None
    sizes = sorted(int(k) for k in times[0])
    return len(times), sizes, [float(np.median([t[k] for t in times if k in t])) for k in sizes]


def capacity_estimate(pool: Any, plan: Any) -> float | None:
    """Queries per second the CPU workers could complete back to back: workers / mean service per query,
    the service per batch interpolated from the workers' timed warm-up batches (an estimate: a start point)."""
    import numpy as np

    from recstack.serving.plan import CPU

    tab = _warmup_table(pool)
    if tab is None or plan.requests == 0:
        return None
    n, sizes, secs = tab
    cpu = plan.batch_class == CPU
    per_batch = np.interp(plan.batch_size[cpu], sizes, secs)
    per_query = per_batch.sum() / plan.requests
    return n / per_query if per_query > 0 else None


def service_floor(pool: Any, plan: Any, opts: ServeOptions, pct: float) -> tuple[float | None, int]:
    """(service seconds of a query of the ``pct`` percentile size, that size): its batches of at most B spread
    over the CPU workers longest first, each batch's time interpolated from the warm-up timings (an estimate
    from measurements; None when the warm-up gave none or the query goes to the accelerator)."""
    import numpy as np

    from recstack.serving.plan import batch_sizes_of

    if plan.requests == 0:
        return None, 0
    size = int(np.percentile(plan.sizes, pct, method="higher"))
    tab = _warmup_table(pool)
    if tab is None or (opts.gpu_threshold is not None and size > opts.gpu_threshold):
        return None, size
    n, known, secs = tab
    loads = [0.0] * n
    for t in sorted(np.interp(batch_sizes_of(np.array([size]), opts.max_batch), known, secs), reverse=True):
        loads[loads.index(min(loads))] += float(t)
    return max(loads), size


def floor_probe(pool: Any, opts: ServeOptions, size: int, guess_s: float | None,
                target_pct: float) -> dict[str, Any]:
    """Serve :data:`FLOOR_QUERIES` queries of ``size`` candidates one at a time (spaced 3x the guessed service
    apart, so none queues behind another): ``service_floor_s`` = the least latency among them (measured)."""
    import numpy as np

    from recstack.serving.plan import make_plan
    from recstack.serving.summary import decode

    gap = max(0.02, 3 * (guess_s or 0.02))
    n = FLOOR_QUERIES
    plan = make_plan(np.arange(n) * gap, np.full(n, size), opts.max_batch, n * gap, opts.gpu_threshold)
    res = probe(pool, plan, replace(opts, grace_s=max(2.0, 10 * gap)), target_pct=target_pct)
    res["qps"] = None  # spaced queries, not a load level
    res["floor_query_size"] = size
    ok = res["completed"] == n and not res["failed"]
    res["service_floor_s"] = decode(res["histogram"]["latency_us"]).get_min_value() / 1e6 if ok else None
    return res


def capacity_burst(pool: Any, cfg: RunConfig, opts: ServeOptions, requests: int, limit_s: float,
                   target_pct: float) -> dict[str, Any]:
    """Serve ``requests`` queries all scheduled at time 0 (closed loop: the workers never wait for work),
    cut at ``limit_s``; ``capacity_qps`` = completed / elapsed (measured; the workers were busy throughout,
    so a burst cut at its limit still gives the back-to-back rate)."""
    import numpy as np

    from recstack.serving.plan import make_plan, query_sizes
    from recstack.serving.service import size_distribution

    sizes = query_sizes(size_distribution(cfg, opts), requests, cfg.seed)
    plan = make_plan(np.zeros(requests), sizes, opts.max_batch, 1e-3, opts.gpu_threshold)
    res = probe(pool, plan, replace(opts, grace_s=limit_s), target_pct=target_pct)
    res["qps"] = None  # no scheduled rate: a burst
    res["burst"] = True
    ok = res["completed"] > 0 and not res["failed"] and res["elapsed_s"] > 0 and not res.get("stopped")
    res["capacity_qps"] = res["completed"] / res["elapsed_s"] if ok else None
    return res


def meets(result: dict[str, Any], target: Target) -> bool:
    value = (result.get("latency_s") or {}).get(target.key)
    return value is not None and value <= target.latency_s and not result.get("failed")


@dataclass
class Screen:
    """What screening learnt of one grid point (``screened`` False: the screening share ran out first)."""

    point: dict[str, Any]
    screened: bool = False
    capacity_qps: float | None = None  # burst, measured
    capacity_estimate_qps: float | None = None  # warm-up timings, estimate
    service_floor_s: float | None = None  # p99-sized query on idle workers: measured, else the estimate
    floor_estimate_s: float | None = None  # the same from the warm-up timings (estimate)
    floor_measured: bool = False
    query_size: int | None = None  # the p99-sized query's candidates
    burst_requests: int = 0
    seconds: float = 0.0  # wall time of the screening (the first of a pool's points: its start included)
    floor_exempt: bool = False  # probed although its floor is above the target (the lowest floor of all)

    def fields(self) -> dict[str, Any]:
        """What screening measured, as the store's rows and the output carry it."""
        return {k: getattr(self, k) for k in ("capacity_qps", "capacity_estimate_qps", "service_floor_s",
                                              "floor_measured", "floor_estimate_s", "query_size")}

    def brief(self) -> dict[str, Any]:
        return {**self.point, "screened": self.screened, **self.fields(), "burst_requests": self.burst_requests,
                "seconds": self.seconds}


class Search:
    """The search over the grid; ``on_probe(kind, point, result)`` sees each probe as it lands (store, progress)."""

    def __init__(self, cfg: RunConfig, opts: ServeOptions, target: Target, *, budget_s: float,
                 points: list[dict[str, Any]], on_probe: Callable[[str, dict[str, Any], dict[str, Any] | None], None],
                 rel_tol: float = 0.05, start_qps: float | None = None,
                 announce: Callable[[float], None] | None = None, screen_share: float = SCREEN_SHARE) -> None:
        self.cfg, self.opts, self.target, self.points = cfg, opts, target, points
        self.deadline = time.monotonic() + budget_s
        self.budget_s = budget_s
        self.on_probe = on_probe
        self.rel_tol = rel_tol
        self.screen_share = screen_share
        self.start_qps = start_qps  # None: START_FRACTION x each point's capacity
        self.search_id = uuid.uuid4().hex[:12]
        self.stopped: str | None = None  # a probe was interrupted (SIGINT): the search ends there
        self.announce = announce  # called with the QPS as each probe's load starts (progress)
        self.sigint = SigintFlag()  # SIGINT between probes (starting workers, planning) ends the search too

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self) -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        not_probed: list[dict[str, Any]] = []
        with self.sigint.installed():
            screens = self._screen_all()
            for sc in self._order(screens):
                reason = self._skip_reason(sc, results)
                res = None if reason else self._point(sc)
                if res is not None and res["probes"]:
                    results.append(res)
                else:
                    not_probed.append({**sc.brief(), "reason": reason or (res or {}).get("reason")})
        return self._verdict(results, not_probed, screens)

    def _interrupted(self) -> bool:
        if self.sigint.reason and not self.stopped:
            self.stopped = self.sigint.reason
        return self.stopped is not None

    def _probe_time(self, qps: float, requests: int) -> float:
        return max(self.opts.duration_s, requests / qps) + self.opts.grace()

    # -- 1. screening --------------------------------------------------------------------
    def _screen_all(self) -> list[Screen]:
        """Screen the points, one worker pool per pool shape (B changes only the plan, so the points that
        differ in B alone share one pool start), in grid order until the screening share is spent."""
        share_end = time.monotonic() + self.screen_share * self.budget_s
        groups: dict[tuple, list[int]] = {}
        for i, point in enumerate(self.points):
            groups.setdefault(tuple(point.get(k) for k in GRID_KEYS if k != "max_batch"), []).append(i)
        screens: dict[int, Screen] = {}
        done = 0
        for members in groups.values():
            share_left = share_end - time.monotonic()
            if share_left <= 0 or self._interrupted():
                screens.update({i: Screen(self.points[i]) for i in members})
                continue
            # each burst aims at most at an equal part of the share left
            burst_s = min(BURST_S, share_left / (len(self.points) - done))
            screens.update(zip(members, self._screen_group([self.points[i] for i in members], burst_s),
                               strict=True))
            done += len(members)
        out = [screens[i] for i in range(len(self.points))]
        floors = [s for s in out if s.service_floor_s is not None]
        if floors and all(s.service_floor_s > self.target.latency_s for s in floors):
            min(floors, key=lambda s: s.service_floor_s).floor_exempt = True  # measure the closest
        return out

    def _screen_group(self, points: list[dict[str, Any]], burst_s: float) -> list[Screen]:
        t0 = time.monotonic()
        confs = [configure(self.cfg, self.opts, p) for p in points]
        plans = [build_plan(c, o, qps=o.qps, min_requests=self.target.min_requests()) for c, o in confs]
        sizes: dict[int, set[int]] = {}
        for plan in plans:
            for cls, ss in plan_sizes(plan).items():
                sizes.setdefault(cls, set()).update(ss)
        out = []
        with pool_for(*confs[0], {c: sorted(ss) for c, ss in sizes.items()}) as pool:
            pool.start()
            started_s = time.monotonic() - t0
            for point, (cfg, opts), plan0 in zip(points, confs, plans, strict=True):
                out.append(self._screen(pool, point, cfg, opts, plan0, burst_s))
        out[0].seconds += started_s
        return out

    def _screen(self, pool: Any, point: dict[str, Any], cfg: RunConfig, opts: ServeOptions, plan0: Any,
                burst_s: float) -> Screen:
        t0 = time.monotonic()
        sc = Screen(point, screened=True)
        sc.capacity_estimate_qps = capacity_estimate(pool, plan0)
        sc.floor_estimate_s, sc.query_size = service_floor(pool, plan0, opts, self.target.pct)
        sc.service_floor_s = sc.floor_estimate_s
        if sc.query_size and not self._interrupted():
            res = floor_probe(pool, opts, sc.query_size, sc.floor_estimate_s, self.target.pct)
            if res.get("stopped"):
                self.stopped = res["stopped"]
            if res["service_floor_s"] is not None:
                sc.service_floor_s, sc.floor_measured = res["service_floor_s"], True
            self.on_probe("floor", {**self._info(cfg, point), **sc.fields(), "meets_target": None}, res)
        lo, hi = BURST_REQUESTS
        guess = sc.capacity_estimate_qps
        sc.burst_requests = int(min(hi, max(lo, guess * burst_s))) if guess else lo
        if not self._interrupted() and not self._floor_rules_out(sc):  # floor_exempt is set after all screening  # a point its floor rules out needs no capacity
            limit = max(BURST_LIMIT_MIN_S, BURST_LIMIT_FACTOR * burst_s)
            res = capacity_burst(pool, cfg, opts, sc.burst_requests, limit, self.target.pct)
            if res.get("stopped"):
                self.stopped = res["stopped"]
            sc.capacity_qps = res["capacity_qps"]
            self.on_probe("capacity", {**self._info(cfg, point), **sc.fields(), "meets_target": None},
                          res)
        else:
            sc.burst_requests = 0
        sc.seconds = time.monotonic() - t0
        return sc

    def _info(self, cfg: RunConfig, point: dict[str, Any]) -> dict[str, Any]:
        return {**point, "model": cfg.model, "config_key": cfg.key(), "run_config": cfg.model_dump(mode="json")}

    # -- 2. order and prune --------------------------------------------------------------
    def _order(self, screens: list[Screen]) -> list[Screen]:
        """Screened points by decreasing capacity (those whose floor rules them out last), then the others
        in grid order."""
        def key(s: Screen) -> tuple:
            return (not s.screened, self._floor_rules_out(s), -(s.capacity_qps or s.capacity_estimate_qps or 0.0))

        return sorted(screens, key=key)

    def _floor_rules_out(self, sc: Screen) -> bool:
        return (sc.service_floor_s is not None and sc.service_floor_s > self.target.latency_s
                and not sc.floor_exempt)

    def _skip_reason(self, sc: Screen, results: list[dict[str, Any]]) -> str | None:
        if self._interrupted():
            return f"search stopped ({self.stopped})"
        if self._floor_rules_out(sc):
            how = (f"least of {FLOOR_QUERIES} served alone, measured" if sc.floor_measured
                   else "estimate from the warm-up timings")
            return (f"service floor: a p{self.target.pct:g}-sized query ({sc.query_size} candidates) takes "
                    f"{sc.service_floor_s * 1e3:.3g} ms on idle workers ({how}) > target "
                    f"{self.target.latency_s * 1e3:g} ms")
        if self.left() <= 0:
            return "budget spent"
        best = max((r["qps_at_target"] for r in results if r["qps_at_target"] is not None), default=None)
        cap = sc.capacity_qps
        if best is not None and cap is not None and cap * (1 + CAPACITY_MARGIN) < best:
            return (f"capacity: {cap:.4g} QPS back to back (measured) x {1 + CAPACITY_MARGIN:g} < "
                    f"{best:.4g} QPS already confirmed at target")
        return None

    # -- 3. probing ----------------------------------------------------------------------
    def _point(self, sc: Screen) -> dict[str, Any]:
        cfg, opts = configure(self.cfg, self.opts, sc.point)
        info = {**self._info(cfg, sc.point), **sc.fields()}
        plan0 = build_plan(cfg, opts, qps=opts.qps, min_requests=self.target.min_requests())
        tried: list[dict[str, Any]] = []
        with pool_for(cfg, opts, plan_sizes(plan0)) as pool:
            pool.start()
            if info["capacity_estimate_qps"] is None:
                info["capacity_estimate_qps"] = capacity_estimate(pool, plan0)
            cap = sc.capacity_qps or info["capacity_estimate_qps"]
            good, unreachable = self._bisect(pool, cfg, opts, info, cap, tried)
            confirmed = good
            if self.target.screens:
                confirmed = self._confirm(pool, cfg, opts, info, tried)
        full = [t for t in tried if not t["screening"]]
        at = next((t["result"] for t in full if t["qps"] == confirmed and t["ok"]), None)
        out = {**info, "qps_at_target": confirmed, "meets_target": confirmed is not None,
               "screening_qps": good if self.target.screens else None,
               "probes": len(tried), "full_probes": len(full), "unreachable": unreachable,
               "at_target": at,
               "curve": [{"qps": t["qps"], "p99_s": (t["result"].get("latency_s") or {}).get("p99"),
                          "meets_target": t["ok"], "screening": t["screening"]}
                         for t in sorted(tried, key=lambda t: t["qps"])],
               "closest": _closest(tried, self.target)}
        if not tried:
            qps = self._start_qps(cap, opts)
            out["reason"] = (f"budget: a probe at {qps:.4g} QPS needs about "
                             f"{self._probe_time(qps, self._requests(True)):.0f} s, {max(self.left(), 0):.0f} s left")
        elif good is not None and confirmed is None and self.target.screens and not full:
            out["unconfirmed"] = "budget or stop: no full probe ran"
        if tried:  # a point the budget left no time for is listed as not probed, with no result row
            self.on_probe("result", out, out["at_target"] or out["closest"])
        return out

    def _start_qps(self, cap: float | None, opts: ServeOptions) -> float:
        """Where a point's bisection starts: --start-qps, else START_FRACTION x its capacity, else --qps."""
        return self.start_qps or (START_FRACTION * cap if cap else opts.qps)

    def _requests(self, screening: bool) -> int:
        return self.target.min_requests(self.target.screen_samples if screening and self.target.screens else None)

    def _probe(self, pool: Any, cfg: RunConfig, opts: ServeOptions, info: dict[str, Any], qps: float,
               tried: list[dict[str, Any]], *, screening: bool) -> tuple[bool, dict[str, Any]] | None:
        """One probe at ``qps`` (None when the budget cannot hold it or the search stopped)."""
        screening = screening and self.target.screens
        n = self._requests(screening)
        if self.left() < self._probe_time(qps, n) or qps < QPS_FLOOR or self._interrupted():
            return None
        plan = build_plan(cfg, opts, qps=qps, min_requests=n)
        announce = None if self.announce is None else (lambda q=qps: self.announce(q))
        res = probe(pool, plan, opts, qps=qps, target_pct=self.target.pct, announce=announce)
        ok = meets(res, self.target)
        res["meets_target"] = ok
        res["screening"] = screening
        res["tail_samples_planned"] = self.target.screen_samples if screening else self.target.tail_samples
        tried.append({"qps": qps, "result": res, "ok": ok, "screening": screening})
        self.on_probe("probe", {**info, "meets_target": ok}, res)
        if res.get("stopped"):  # interrupted: its figures are partial, and the search ends here
            self.stopped = res["stopped"]
        return ok, res

    def _bisect(self, pool: Any, cfg: RunConfig, opts: ServeOptions, info: dict[str, Any], cap: float | None,
                tried: list[dict[str, Any]]) -> tuple[float | None, bool]:
        """(highest QPS that met in the bisection, unreachable): screening probes from START_FRACTION x
        capacity, the upper end assumed at UPPER_FRACTION x capacity."""
        qps = self._start_qps(cap, opts)
        good: float | None = None
        bad = UPPER_FRACTION * cap if cap and qps < UPPER_FRACTION * cap else None
        assumed = bad is not None  # not probed: capacity says it misses
        tol = max(self.rel_tol, SCREEN_REL_TOL) if self.target.screens else self.rel_tol
        for _ in range(MAX_PROBES_PER_POINT):
            if good is not None and self.target.screens and self.left() < (
                    self._probe_time(qps, self._requests(True)) + self._probe_time(good, self._requests(False))):
                break  # keep the time for the full probe that confirms what already met
            got = self._probe(pool, cfg, opts, info, qps, tried, screening=True)
            if got is None or self.stopped:
                break
            ok, res = got
            if ok and (good is None or qps > good):
                good = qps
            if not ok and (bad is None or qps < bad):
                bad, assumed = qps, False
            if not ok and good is None and res.get("utilisation", 1.0) < LOW_UTILISATION:
                return good, True  # missed with the workers mostly idle: less load cannot help
            if good is not None and bad is not None:
                if bad - good <= tol * bad:
                    if not assumed:
                        break
                    bad, assumed = None, False  # met close to the assumed end: the capacity was low
                    qps = good * 2
                    continue
                qps = (good + bad) / 2
            else:
                qps = qps * 2 if ok else qps / 2
        return good, False

    def _confirm(self, pool: Any, cfg: RunConfig, opts: ServeOptions, info: dict[str, Any],
                 tried: list[dict[str, Any]]) -> float | None:
        """The highest screening QPS that met, confirmed by a full probe; on a miss, the next lower one (or
        CONFIRM_STEP x the missed QPS, the highest screening QPS below that if any). The confirmed QPS, or None."""
        cands = sorted({t["qps"] for t in tried if t["ok"]}, reverse=True)
        for _ in range(MAX_CONFIRMS_PER_POINT):
            if not cands or self.stopped:
                return None
            q = cands.pop(0)
            got = self._probe(pool, cfg, opts, info, q, tried, screening=False)
            if got is None or self.stopped:
                return None
            if got[0]:
                return q
            cands = [c for c in cands if c <= CONFIRM_STEP * q] or [CONFIRM_STEP * q]
        return None

    def _verdict(self, results: list[dict[str, Any]], not_probed: list[dict[str, Any]],
                 screens: list[Screen]) -> dict[str, Any]:
        met = [r for r in results if r["meets_target"]]
        best = max(met, key=lambda r: r["qps_at_target"]) if met else None
        closest = None
        if not met and results:
            closest = min((r for r in results if r["closest"]), key=lambda r: _miss(r["closest"], self.target),
                          default=None)
        floors = [s for s in screens if s.service_floor_s is not None]
        low = min(floors, key=lambda s: s.service_floor_s) if floors else None
        verdict = {
            "search_id": self.search_id,
            "target": {"percentile": self.target.pct, "latency_s": self.target.latency_s,
                       "tail_samples": self.target.tail_samples, "min_requests": self.target.min_requests(),
                       "screen_samples": self.target.screen_samples if self.target.screens else None,
                       "screen_requests": self.target.min_requests(self.target.screen_samples)
                       if self.target.screens else None},
            "budget_s": self.budget_s,
            "complete": self.stopped is None,
            "stopped": self.stopped,
            "met": best is not None,
            "best": _brief(best) if best else None,
            "closest": _brief(closest) if closest else None,
            "service_floor": None if low is None else {
                **low.brief(), "above_target": low.service_floor_s > self.target.latency_s,
                "formula": f"lowest over the screened points of the latency of a percentile-sized query served "
                           f"alone on idle workers (the least of {FLOOR_QUERIES}, measured; where that failed, its "
                           "batches' warm-up timings spread over the workers longest first, an estimate)"},
            "screening": [s.brief() for s in screens],
            "configurations": [_brief(r) for r in results],
            "not_probed": not_probed,
        }
        self.on_probe("best", {**(best or closest or {}), "meets_target": best is not None},
                      (best or {}).get("at_target") or (closest or {}).get("closest"))
        return verdict


def _closest(tried: list[dict[str, Any]], target: Target) -> dict[str, Any] | None:
    """The probe nearest the target: among the full probes if any ran (a screening probe's p99 is noisier)."""
    pool = [t for t in tried if not t["screening"]] or tried
    return min(pool, key=lambda t: _miss(t["result"], target))["result"] if pool else None


def _miss(result: dict[str, Any], target: Target) -> float:
    v = (result.get("latency_s") or {}).get(target.key)
    return float("inf") if v is None else v - target.latency_s


def _brief(r: dict[str, Any]) -> dict[str, Any]:
    """A configuration's result without the bulky per-probe objects (latencies at target kept)."""
    at = r.get("at_target") or r.get("closest") or {}
    return {
        **{k: r.get(k) for k in (*GRID_KEYS, "qps_at_target", "meets_target", "screening_qps", "probes",
                                 "full_probes", "unreachable", "unconfirmed", "capacity_qps",
                                 "capacity_estimate_qps", "service_floor_s", "query_size", "curve")},
        "latency_s": at.get("latency_s"), "latency_ci95_s": at.get("latency_ci95_s"),
        "achieved_qps": at.get("achieved_qps"), "utilisation": at.get("utilisation"),
        "screening_probe": bool(at.get("screening")),
        "contended": bool((at.get("contention") or {}).get("detected")),
    }
