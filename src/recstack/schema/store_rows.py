"""Rows of the results store's ``serving`` and ``compile`` tables (migrations 2 and 3): their fields are the
tables' columns (:func:`recstack.schema.documents.columns`), every one nullable."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import Field

from recstack.schema.documents import Column, Doc

BigInt = Annotated[int | None, Column("BIGINT")]
Created = Annotated[dt.datetime | None, Column("TIMESTAMP")]
Json = dict[str, Any] | None


class ServingRow(Doc):
    """One probe of ``recstack serve --search --store`` (a ``serving`` row; also its configurations' results)."""

    search_id: str | None = None
    probe: int | None = None
    kind: str | None = Field(None, description="probe | result | best")
    created_at: Created = Field(None, description="the commit's clock (set by the store)")
    model: str | None = None
    config_key: str | None = None
    run_config: Json = None
    max_batch: int | None = None
    workers: int | None = None
    threads: int | None = None
    backend: str | None = None
    dtype: str | None = None
    gpu_threshold: int | None = None
    target_pct: float | None = None
    target_s: float | None = None
    qps: float | None = Field(None, description="the scheduled rate of the probe")
    offered_qps: float | None = Field(None, description="the arrivals drawn / duration")
    achieved_qps: float | None = None
    requests: BigInt = None
    failed: BigInt = None
    late: BigInt = None
    p50_s: float | None = None
    p95_s: float | None = None
    p99_s: float | None = None
    p999_s: float | None = None
    mean_s: float | None = None
    target_ci_low_s: float | None = None
    target_ci_high_s: float | None = None
    queue_s_mean: float | None = None
    service_s_mean: float | None = None
    utilisation: float | None = None
    meets_target: bool | None = None
    qps_at_target: float | None = None
    contended: bool | None = None
    result_json: Json = Field(None, description="the probe's whole serving result (histogram included)")


class CompileRow(Doc):
    """One candidate of ``recstack compile --recommend --store`` (a ``compile`` row)."""

    search_id: str | None = Field(None, description="one compile --recommend run")
    candidate: int | None = Field(None, description="its order in the search")
    kind: str | None = Field(None, description="candidate | composite | chosen")
    created_at: Created = Field(None, description="the commit's clock (set by the store)")
    host: str | None = None
    recstack_version: str | None = None
    model: str | None = None
    mode: str | None = None
    config_key: str | None = Field(None, description="RunConfig.key()")
    run_config: Json = None
    name: str | None = Field(None, description="e.g. per-stage/dynamic-auto, whole-model/static")
    policy: str | None = Field(None, description="the dynamic-shape policy")
    compile_config: Json = Field(None, description="the candidate's compile config (what --compile takes)")
    eligible: bool | None = None
    why: str | None = Field(None, description="why not eligible")
    run_speedup: float | None = Field(None, description="eager_run_s / compiled_run_s")
    eager_run_s: float | None = None
    compiled_run_s: float | None = None
    stages: Json = Field(None, description="{stage: {eager_s, compiled_s, speedup}}")
    recompiles: int | None = None
    graph_breaks: int | None = None
    fallbacks: int | None = None
    numerics_ok: bool | None = None
    max_abs_err: float | None = None
    batch_sizes: Annotated[list[int] | None, Column("JSON")] = None
    eval_s: float | None = Field(None, description="the candidate's evaluation wall time")
    result_json: Json = Field(None, description="the candidate's whole result")
