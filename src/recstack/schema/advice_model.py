"""The ``recstack advise`` result document (``recstack.advice``, version 1): typed, like the profile's.

Times are seconds per sample (step time / batch size) so that batch-size levers compare like with like.
``speedup`` is baseline / what-if from the medians of the same alternating rounds; ``interval`` its
conservative 95 % interval; ``verdict`` the noise rule of ``recstack diff`` (docs/advise.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "recstack.advice"
SCHEMA_VERSION = 1


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Deviation(_Doc):
    max_abs: float = Field(ge=0, description="max |what-if - baseline| over the outputs of the same first batch")
    max_rel: float = Field(ge=0, description="max_abs / max |baseline| (normwise)")
    compared: int = Field(ge=0, description="output tensors compared")


class LossCost(_Doc):
    steps: int = Field(ge=1, description="training steps after the build, same seed and batches for both arms")
    base: float = Field(description="the baseline's loss at the last of those steps")
    what_if: float | None = Field(description="the what-if's loss at the last of those steps (null: not finite)")
    rel_dev: float | None = Field(ge=0, description="|what_if - base| / |base|; above the tolerance or null "
                                  "(diverged): never recommended")


class Comparison(_Doc):
    speedup: float | None = Field(description="baseline median / what-if median (per sample)")
    interval: list[float] | None = Field(description="[low, high] 95 % interval of the speedup")
    verdict: Literal["improvement", "regression", "noise", "unmeasured"]
    base_s: float | None = None
    what_if_s: float | None = None
    basis: str = ""


class Resident(_Doc):
    baseline_bytes: int | None = Field(ge=0)
    what_if_bytes: int | None = Field(ge=0)


class StageTimes(_Doc):
    base_s: float | None = Field(description="the baseline's median s per sample of the stage in the same rounds")
    what_if_s: float | None = Field(description="the what-if's median s per sample of the stage")


class LeverResult(_Doc):
    name: str
    kind: str
    stage: str
    change: dict[str, Any] = Field(description="RunConfig fields the lever sets")
    options: dict[str, Any] = Field(description="keyword options of a user factory the lever sets")
    exact_change: str = Field(description="the change as flags / factory options")
    why: str
    step: Comparison
    stage_result: Comparison
    deviation: Deviation | None = None
    within_tolerance: bool | None = None
    loss: LossCost | None = Field(None, description="training, levers that change the arithmetic: the loss after "
                                  "N steps, baseline and what-if")
    build_s: float = Field(ge=0, description="build, warm-up and stage discovery of the what-if (s)")
    recommended: bool
    reason: str = Field(description="why recommended or not")
    members: list[str] = Field(default_factory=list, description="for the combination: its levers")
    resident: Resident = Field(description="resident bytes of the model (parameters, buffers, tables)")
    stage_times: dict[str, StageTimes] = Field(
        default_factory=dict, description="every timed stage, before and after (the advice page's bars); for "
        "the compile lever the compile analysis's eager and compiled medians")


class NotTriedDoc(_Doc):
    name: str
    stage: str
    reason: str


class StageDoc(_Doc):
    name: str
    time_s: float
    share: float
    bound: str | None


class AdviceDocument(_Doc):
    schema_: Literal["recstack.advice"] = Field(SCHEMA, alias="schema")
    version: Literal[1] = SCHEMA_VERSION
    model: str
    goal: Literal["throughput", "latency"]
    baseline: dict[str, Any] = Field(description="the baseline RunConfig")
    stages: list[StageDoc]
    contended: bool
    contention_evidence: list[str]
    rounds: int = Field(ge=0)
    iters: int = Field(ge=0, description="timed steps per arm in all")
    noise_floor: Comparison = Field(description="the baseline against a second copy of itself in the same rounds")
    budget_min: float | None
    tolerance: float
    noise_rule: str
    ranking: list[LeverResult] = Field(description="singles and the combination, best first")
    winner: str | None = Field(description="the top recommended lever (or combination); null: none beat noise")
    winner_config: dict[str, Any] | None
    winner_options: dict[str, Any] = Field(default_factory=dict)
    not_tried: list[NotTriedDoc]
    notes: list[str]
    elapsed_s: float = Field(ge=0)
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


__all__ = ["SCHEMA", "SCHEMA_VERSION", "AdviceDocument", "LeverResult"]
