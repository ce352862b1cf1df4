"""The ``recstack serve`` result (``--json``; each probe's ``result_json`` in a store): docs/serving.md.

:class:`ServingResult` is what :func:`recstack.serving.summary.summarise` returns from one open-loop run;
the command adds the scheduled ``qps`` and the run's ``contention`` beside it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from recstack.schema.documents import Doc, NonNeg

Opt = NonNeg | None


class LatencyFigures(Doc):
    """Request latencies (s), arrival to answer; a late request counts at its deadline (null: no requests)."""

    p50: Opt
    p95: Opt
    p99: Opt
    p999: Opt
    mean: Opt
    max: Opt


class LatencyCI(Doc):
    """95% confidence interval [low, high] of each percentile (null: too few requests)."""

    p50: list[NonNeg] | None
    p95: list[NonNeg] | None
    p99: list[NonNeg] | None
    p999: list[NonNeg] | None


class Batches(Doc):
    planned: int = Field(ge=0)
    served: int = Field(ge=0)
    mean_size: Opt = Field(description="mean requests per planned batch")


class Lateness(Doc):
    """How late the load generator dispatched (s)."""

    p50: Opt
    p99: Opt
    max: Opt


class Loadgen(Doc):
    cpu_cores: NonNeg = Field(description="the load generator's CPU over the run's wall time")
    worker_spin_cores: NonNeg = Field(description="the workers' spinning CPU over the run's wall time")
    lookahead_s: NonNeg
    dispatch_lateness_s: Lateness


class Histogram(Doc):
    format: str
    unit: str
    latency_us: str = Field(description="the latencies as a compressed HdrHistogram")
    dispatch_lateness_us: str


class ServingResult(Doc):
    """One open-loop run's result (``summarise``)."""

    complete: bool = Field(description="the run ended as planned (false: stopped)")
    stopped: str | None = Field(description="why it stopped early")
    offered_qps: Opt = Field(description="arrivals drawn / duration")
    achieved_qps: NonNeg = Field(description="completed requests / the run's window")
    requests: int = Field(ge=0, description="requests released")
    planned_requests: int = Field(ge=0)
    completed: int = Field(ge=0)
    failed: int = Field(ge=0)
    late: int = Field(ge=0, description="past their deadline")
    latency_s: LatencyFigures
    latency_ci95_s: LatencyCI
    samples_beyond_target_percentile: NonNeg
    queue_s_mean: Opt
    service_s_mean: Opt
    handoff_s_mean: Opt
    utilisation: NonNeg = Field(description="mean busy fraction of the workers")
    worker_utilisation: list[NonNeg]
    duration_s: NonNeg
    deadline_s: NonNeg
    elapsed_s: NonNeg
    batches: Batches
    query_size_mean: Opt
    worker_deaths: int = Field(ge=0, description="workers that died during the run")
    workers: list[dict[str, Any]] = Field(description="per worker: served batches, busy time, alive, ...")
    loadgen: Loadgen
    histogram: Histogram
