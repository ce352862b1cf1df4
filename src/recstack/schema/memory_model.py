"""The ``recstack memory`` result document (``recstack.memory``, version 1): typed, like the profile's.

Sizes are bytes. ``stages`` holds each stage's predicted peak: the resident bytes (tables, metadata, dense
parameters and buffers, optimizer state), the generated input batches, and what the step holds at that
stage's own peak (``dynamic_bytes``). ``largest_batch_size`` and ``largest_scale`` are bisections on the
same prediction against ``limit_bytes`` (``largest_scale`` multiplies the run's ``--scale``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "recstack.memory"
SCHEMA_VERSION = 1

Bytes = Annotated[int, Field(ge=0)]


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class StagePeak(_Doc):
    stage: str = Field(description="stage name (feature_processing, embedding, ..., backward, optimizer)")
    peak_bytes: Bytes = Field(description="predicted live bytes at this stage's peak: resident + inputs + dynamic")
    dynamic_bytes: Bytes = Field(description="the step's share of the peak: activations, indices, gradients, buffers")
    measured_dynamic_bytes: Bytes | None = Field(None, description="--measure: the memory pass's peak of live "
                                                 "allocator bytes inside the stage above the step's start (the "
                                                 "measured dynamic_bytes; recstack profile --memory's figure)")


class ConsumerDoc(_Doc):
    what: str = Field(description="table, optimizer_state, activations, table_gradients, all_to_all, ...")
    stage: str
    bytes: Bytes
    detail: str = ""


class RankDoc(_Doc):
    rank: int = Field(ge=0)
    peak_bytes: Bytes
    peak_stage: str
    tables_bytes: Bytes
    all_to_all_bytes: Bytes


class MemoryDocument(_Doc):
    schema_: Literal["recstack.memory"] = Field(SCHEMA, alias="schema")
    version: Literal[1] = SCHEMA_VERSION
    provenance: Literal["predicted", "predicted and measured"] = Field(
        "predicted", description="from the config alone, nothing allocated; with --measure the model is also built "
        "and one step measured (measured_dynamic_bytes)")
    model: str
    backend: str
    mode: str
    optimizer: str
    table_dtype: str
    batch_size: int = Field(ge=1)
    scale: float = Field(gt=0)
    device: str
    limit_bytes: Bytes = Field(description="the memory limit the fit and the searches use")
    resident: dict[str, Bytes] = Field(description="tables, table_metadata, dense_parameters, dense_buffers, optimizer_state")
    inputs_bytes: Bytes = Field(description="the generated input batches")
    stages: list[StagePeak]
    peak_bytes: Bytes
    peak_stage: str
    fits: bool = Field(description="peak_bytes <= limit_bytes")
    top_consumers: list[ConsumerDoc]
    largest_batch_size: int = Field(ge=0, description="largest batch that fits the limit (0: none)")
    largest_scale: float | None = Field(description="largest --scale that fits at this batch size (None: none)")
    ranks: list[RankDoc] = Field(default_factory=list, description="per rank under the sharding plan (--nproc > 1)")
    cache: dict[str, Any] | None = Field(None, description="--cache-hit: per-table LRU/LFU cache sizes (rows, bytes) "
                                         "for the target hit rate, simulated over the workload's batches")
    elapsed_s: float = Field(ge=0, description="time the analysis took")
    notes: list[str] = Field(default_factory=list)
