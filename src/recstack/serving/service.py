"""One serving configuration: its options, its request plan, its worker pool and its probes.

:class:`ServeOptions` holds the serving flags (load and pool shape); the model
side is a :class:`~recstack.config.run.RunConfig` (``model`` ``spin`` is the
built-in busy-wait model). :func:`probe` runs one open-loop load on a started
pool and returns the summary (:mod:`recstack.serving.summary`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from recstack.config.run import RunConfig, usable_cores
from recstack.errors import ConfigError
from recstack.serving import MAX_WORKERS
from recstack.serving.arrivals import ArrivalSpec, arrival_times
from recstack.serving.loadgen import LOOKAHEAD_S, LoadRun, WorkerPool
from recstack.serving.plan import ACCEL, CPU, LOGNORMAL_QUERY_SIZES, Plan, make_plan, query_sizes
from recstack.serving.summary import summarise
from recstack.serving.worker import WorkerSetup
from recstack.workload.distributions import Fixed, _Dist

SPIN = "spin"


@dataclass(frozen=True)
class ServeOptions:
    """Serving flags of one run (``recstack serve``); the model side is the RunConfig."""

    qps: float = 100.0
    duration_s: float = 10.0
    max_batch: int = 256
    workers: int | None = None  # default: usable cores // threads
    query_size: int | None = None  # fixed N (else the distribution below)
    query_sizes: str = "workload"  # workload (the workload's query_sizes) | lognormal
    arrivals: ArrivalSpec = ArrivalSpec("poisson")
    grace_s: float | None = None  # after the schedule's end; default max(1 s, 10% of the duration)
    depth: int = 2  # with several workers: due batches a worker may hold (1: one central queue; 2: one waits)
    lookahead_s: float = LOOKAHEAD_S  # batches are handed over up to this long before they are due
    service_ms: float | None = None  # spin: per batch
    per_sample_us: float = 0.0  # spin: per candidate
    gpu_threshold: int | None = None  # queries above go to the accelerator workers
    accel_workers: int = 1
    sim_accel: tuple[float, float] | None = None  # simulated accelerator: (ms per batch, us per candidate)
    oversubscribe: bool = False

    def grace(self) -> float:
        return self.grace_s if self.grace_s is not None else max(1.0, 0.1 * self.duration_s)




def threads_and_workers(cfg: RunConfig, opts: ServeOptions) -> tuple[int, int]:
    """(torch threads per worker, CPU workers): workers x threads <= usable cores unless oversubscribed;
    never more than MAX_WORKERS processes (the spin model too: each worker is a process)."""
    cores = usable_cores()
    threads = cfg.threads or (max(1, cores // opts.workers) if opts.workers else 1)
    workers = opts.workers or max(1, cores // threads)
    accel = opts.accel_workers if opts.gpu_threshold is not None else 0
    if workers + accel > MAX_WORKERS:
        raise ConfigError(f"{workers + accel} worker processes asked; at most {MAX_WORKERS}", field="--workers")
    if cfg.model == SPIN and workers + accel > 4 * cores and not opts.oversubscribe:
        raise ConfigError(f"{workers + accel} busy-waiting spin workers on {cores} usable cores would measure "
                          "the scheduler; lower --workers (or pass --oversubscribe)", field="--workers")
    accel = opts.accel_workers if (opts.gpu_threshold is not None and opts.sim_accel is None) else 0
    if (workers + accel) * threads > cores and not opts.oversubscribe and cfg.model != SPIN:
        raise ConfigError(
            f"{workers} workers x {threads} threads need {workers * threads} cores but {cores} are usable; "
            "lower --workers or --threads (or pass --oversubscribe)", field="--workers")
    return threads, workers


def size_distribution(cfg: RunConfig, opts: ServeOptions) -> _Dist:
    if opts.query_size is not None:
        return Fixed(kind="fixed", value=float(opts.query_size))
    if opts.query_sizes == "lognormal":
        return LOGNORMAL_QUERY_SIZES
    from recstack.workload import load_workload

    return load_workload(cfg.workload).query_sizes


def build_plan(cfg: RunConfig, opts: ServeOptions, qps: float | None = None, min_requests: int = 0) -> Plan:
    """Arrivals and query sizes (seeded by ``cfg.seed``), split into batches; generated before the run.

    ``min_requests``: lengthen the schedule so that it holds at least this many requests on average.
    """
    rate = opts.qps if qps is None else qps
    duration = opts.duration_s
    if opts.arrivals.kind != "csv" and min_requests:
        duration = max(duration, min_requests / rate)
    arr = arrival_times(opts.arrivals, rate, duration, cfg.seed)
    if opts.arrivals.kind == "csv":
        duration = float(arr[-1]) if arr.size and arr[-1] > 0 else 1e-3
    sizes = query_sizes(size_distribution(cfg, opts), arr.size, cfg.seed)
    return make_plan(arr, sizes, opts.max_batch, duration, opts.gpu_threshold)


def pool_for(cfg: RunConfig, opts: ServeOptions, plan_sizes: dict[int, list[int]]) -> WorkerPool:
    """The worker pool of a configuration (not started): CPU workers and, with a split, accelerator workers."""
    threads, workers = threads_and_workers(cfg, opts)
    cpu_sizes = tuple(plan_sizes.get(CPU) or [1])
    if cfg.model == SPIN:
        if opts.service_ms is None:
            raise ConfigError("the spin model needs --service-ms (the busy-wait per batch)", field="--service-ms")
        cpu = WorkerSetup("spin", cpu_sizes, service_s=opts.service_ms / 1e3, per_sample_s=opts.per_sample_us / 1e6)
    else:
        # --device: where the (main) workers run; a split's accelerator workers are cuda whatever it says
        cpu = WorkerSetup("model", cpu_sizes, run_config=cfg.model_dump(exclude_unset=True),
                          device=cfg.resolved_device(), threads=threads)
    setups, counts = {CPU: cpu}, {CPU: workers}
    if opts.gpu_threshold is not None:
        accel_sizes = tuple(plan_sizes.get(ACCEL) or [max(cpu_sizes)])
        if opts.sim_accel is not None:
            ms, us = opts.sim_accel
            setups[ACCEL] = WorkerSetup("spin", accel_sizes, service_s=ms / 1e3, per_sample_s=us / 1e6)
        elif cfg.model == SPIN:
            raise ConfigError("a split with the spin model needs --sim-accel MS[:US]", field="--sim-accel")
        else:
            RunConfig.build(cfg, {"device": "cuda"}, name=lambda _n: "--gpu-threshold")  # cuda must be there
            setups[ACCEL] = replace(cpu, sizes=accel_sizes, device="cuda", threads=1)
            if cpu.device == "cuda":
                raise ConfigError("a CPU/GPU split needs the main workers on cpu (--device cpu)",
                                  field="--gpu-threshold")
        counts[ACCEL] = opts.accel_workers
    return WorkerPool(setups, counts)


def plan_sizes(plan: Plan) -> dict[int, list[int]]:
    return {c: plan.distinct_sizes(c) for c in (CPU, ACCEL) if np.any(plan.batch_class == c)}


def probe(pool: WorkerPool, plan: Plan, opts: ServeOptions, *, qps: float | None = None, target_pct: float = 99.0,
          on_run: Any = None, announce: Any = None) -> dict[str, Any]:
    """One open-loop run of ``plan`` (the pool started), its summary, with the contention record."""
    from recstack.hardware.contention import ContentionWatch, planned_processes

    run = LoadRun(plan, pool, grace_s=opts.grace(), depth=opts.depth, lookahead_s=opts.lookahead_s, announce=announce)
    if on_run is not None:
        on_run(run)
    with planned_processes(pool.pids()):
        watch = ContentionWatch(None, pool.pids(), probe=False).start()
        rec = run.run()
        with contextlib.suppress(Exception):  # the record is evidence, never a reason to lose a result
            watch.planned.update(pool.pids())
        contention = watch.stop()
    out = {"qps": qps if qps is not None else (opts.qps if opts.arrivals.kind != "csv" else None),
           **summarise(rec, target_pct=target_pct)}
    out["contention"] = contention
    return out
