"""A sweep point: the summary its worker returns, and its row in the store's ``points`` table.

The ``points`` columns are :class:`PointRow`'s fields (:func:`recstack.schema.documents.columns`), followed by
one column per RunConfig field (:func:`recstack.store.migrations.run_config_columns`).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from pydantic import Field

from recstack.schema.documents import Column, Doc, Finite, NonNeg, OpenDoc

Opt = Finite | None
When = Annotated[dt.datetime | None, Column("TIMESTAMP")]


class PointStage(Doc):
    """One stage of a point (``stages[]``; a row of the store's ``stages`` table)."""

    stage: str
    time_s: NonNeg | None = Field(description="stage time per step (s)")
    share: Opt = Field(description="stage time over the run's time")
    flops: NonNeg | None = Field(description="FLOPs per step")
    bytes: NonNeg | None = Field(description="bytes moved per step")
    bound: str | None = Field(description="compute, memory, gather, overhead, ... (roofline; null without a machine)")
    roof_fraction: Opt = Field(description="fraction of the stage's roofline ceiling")


class PointSummary(Doc):
    """The store's figures of one profiled point (``recstack.sweeps.point.summarise``)."""

    step_p50_s: NonNeg | None = Field(description="median uninstrumented step (s)")
    step_p90_s: NonNeg | None
    step_p99_s: NonNeg | None
    throughput: NonNeg | None = Field(description="samples/s at the median step")
    overhead: NonNeg | None = Field(description="stage pass step over the uninstrumented step (median ratio)")
    iters_run: int | None = Field(description="timing-pass pairs run")
    timed_s: NonNeg = Field(description="time inside the timed steps of the timing and op passes (s)")
    contended: bool
    contention_evidence: str | None
    cpu_model: str | None
    stages: list[PointStage]


class PointRow(OpenDoc):
    """A row of the store's ``points`` table (its RunConfig fields follow, one column each)."""

    point_id: Annotated[str, Column("VARCHAR PRIMARY KEY")] = Field(
        description="sha256 of config_hash, recstack_version, host (16 hex)")
    config_hash: str = Field(description="RunConfig.key()")
    sweep_id: str | None = None
    config_json: str | None = Field(None, description="the RunConfig as JSON")
    recstack_version: str
    git_commit: str | None = None
    host: str
    cpu_model: str | None = None
    executor: str | None = Field(None, description="local or ray")
    parallel: int | None = Field(None, description="points run side by side (1: alone)")
    status: str = Field(description="ok | failed | timeout")
    reason: str | None = None
    attempts: int | None = None
    started: When = None
    finished: When = None
    contended: bool | None = None
    contention_evidence: str | None = None
    step_p50_s: float | None = Field(None, description="measured: uninstrumented steps of the timing pass")
    step_p90_s: float | None = None
    step_p99_s: float | None = None
    throughput: float | None = Field(None, description="samples/s at the p50 step: batch_size / step_p50_s")
    overhead: float | None = Field(None, description="stage pass / uninstrumented step (median of paired ratios)")
    iters_run: int | None = Field(None, description="timing-pass pairs run (raised from iters by min_timed_s)")
    timed_s: float | None = Field(None, description="time inside the timed steps of the timing and op passes")
    wall_s: float | None = Field(None, description="the point's wall time in its worker")
    build_s: float | None = Field(None, description="model build time (0 when a build was reused)")
    store_write_s: float | None = Field(None, description="the previous point's store transaction")
    profile_path: str | None = Field(None, description="relative to the store's folder")
