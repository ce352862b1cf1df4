"""The ``recstack share`` result: batched against shared execution of one ranking batch (docs/sharing.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from recstack.schema.documents import Doc, Finite, NonNeg


class SharingStatus(Doc):
    status: Literal["shared", "none", "stopped"] = Field(description="shared; none: no request-side inputs; "
                                                         "stopped: sharing could not be planned (reason)")
    reason: str


class Tolerance(Doc):
    rtol: NonNeg
    atol: NonNeg


class RequestOnlyShare(Doc):
    """The batched run's request-only part (provenance), as shares of the whole."""

    flops: NonNeg
    bytes: NonNeg
    time: NonNeg
    time_basis: str


class StageSaving(Doc):
    """One stage, batched against shared (``stages.<stage>``)."""

    batched_s: NonNeg
    shared_s: NonNeg
    saved_s: Finite
    flops_saved_per_request: Finite
    bytes_saved_per_request: Finite


class Total(Doc):
    batched_s: NonNeg
    shared_s: NonNeg
    saved_s: Finite
    saved_share: Finite


class ShareResult(Doc):
    """What ``recstack.sharing.analysis.analyse_sharing`` returns (``share --json``)."""

    model: str = Field(description="the model's class name")
    requests: int = Field(ge=1)
    candidates: NonNeg = Field(description="rows per request (a fraction where requests differ)")
    rows: int = Field(ge=1)
    request_inputs: list[str] = Field(description="request-side features (<dense>: the dense features)")
    sharing: SharingStatus
    tolerance: Tolerance
    outputs_equal: bool = Field(description="shared outputs equal the batched ones within the tolerance")
    max_abs_diff: NonNeg | None
    request_only_share: RequestOnlyShare
    share_by_stage: dict[str, dict[str, dict[str, NonNeg]]] = Field(
        description="stage -> provenance class -> flops, bytes, time_s, ops")
    request_only_modules: list[str]
    unshared_request_modules: list[str] = Field(description="request-only, but inside an expanded module")
    mixers: list[str]
    expansions: list[str]
    stages: dict[str, StageSaving]
    total: Total
    speedup: NonNeg
    speedup_without_dedupe: NonNeg
    curve: list[dict[str, Finite]] = Field(description="predicted saving against candidates per request")
    timing: dict[str, Any] = Field(description="iterations, warmup, statistic, threads, every iteration's totals")
