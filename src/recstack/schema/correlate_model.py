"""The ``recstack correlate --json-out`` document: architecture features against bottleneck metrics."""

from __future__ import annotations

from pydantic import Field

from recstack.schema.documents import Doc, Finite

Rho = Finite | None


class CorrelateMetric(Doc):
    """One bottleneck metric against every feature (``metrics[]``); null: the feature did not vary."""

    metric: str = Field(description="e.g. share:embedding, memory_bound:head, roof_fraction:dense, throughput")
    models: int = Field(ge=0, description="models with a value")
    points: int = Field(ge=0, description="points with a value")
    rho: dict[str, Rho] = Field(description="feature -> Spearman's rho over the points")
    low: dict[str, Rho] = Field(description="feature -> the interval's low end (model-level bootstrap)")
    high: dict[str, Rho] = Field(description="feature -> the interval's high end")
    top_share: dict[str, Rho] = Field(description="feature -> fraction of resamples where it has the largest |rho|")
    top: str = Field(description="the feature with the largest |rho|")
    dominant: bool = Field(description="top_share of the top feature >= 0.8")
    ridge_alpha: Rho = Field(None, description="the ridge fit's penalty (cross-validated)")
    cv_r2: Rho = Field(None, description="leave-one-model-out R^2 of the ridge fit")
    coefficients: dict[str, Rho] = Field(default_factory=dict, description="standardised ridge coefficients")


class CorrelateDocument(Doc):
    """The correlation of every metric with every feature over the points of profiles or a store."""

    features: list[str] = Field(description="numeric features, then interaction=KIND indicators")
    models: list[str]
    points: int = Field(ge=0, description="points (model, batch size, run) analysed")
    bootstrap: int = Field(ge=0, description="model-level bootstrap resamples")
    seed: int
    confidence: float = Field(gt=0, lt=1, description="the intervals' confidence")
    metrics: list[CorrelateMetric]
    skipped: dict[str, str] = Field(description="metric -> why it was not analysed")
    findings: list[str] = Field(description="one sentence per metric")
