"""Declarative workload specs (validated pydantic models, YAML on disk).

A :class:`WorkloadSpec` describes the traffic, not a model. It has exactly one of

- ``population``: a distribution over embedding tables (row counts, mean pooling
  factors, per-table skew). Presets use it: bound to a model, every model feature
  keeps its ``id_range`` and mean pooling and draws its skew from the population;
  ``workload_stats`` draws whole tables from it.
- ``features``: explicit per-feature settings (specs fitted from data), mapped onto
  a model's features in order or by an explicit name mapping.

plus dense-feature, label, query-size and arrival settings. All models use
``extra="forbid"``; validation errors name the field (see
:func:`recstack.config.parse_config`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from recstack.config.limits import SEED_MAX, SEED_MIN, TABLE_COUNT_MAX, TABLE_ROWS_MAX
from recstack.errors import ConfigError
from recstack.outputs import atomic_write_text
from recstack.workload.distributions import (
    PROB_TOLERANCE,
    DistLike,
    Empirical,
    Fixed,
    Normal,
    SizeDist,
)
from recstack.workload.ids import HEAD_RANKS

MLPERF_QUERY_SIZES = Empirical(
    kind="empirical",
    values=[100, 200, 300, 400, 500, 600, 700],
    probs=[0.10, 0.60, 0.10, 0.05, 0.05, 0.05, 0.05],
)
"""MLPerf inference (recommendation) query sizes: user-item pairs per query, mean 270."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# ---------------------------------------------------------------------------------------------------------
# ID (row) distributions of one feature
# ---------------------------------------------------------------------------------------------------------
class UniformIds(_Model):
    """IDs uniform over the feature's rows."""

    kind: Literal["uniform"] = "uniform"


class ZipfIds(_Model):
    """Zipf-like: probability of the k-th hottest row (k = 1, 2, ...) proportional to (k + q) ** -s."""

    kind: Literal["zipf"] = "zipf"
    s: float = Field(gt=0, le=20, description="exponent, > 0")
    q: float = Field(default=0.0, ge=0, description="offset, >= 0 (flattens the head)")


class HeavyHitterIds(_Model):
    """A few hot rows with explicit probability masses (hottest first), plus a uniform or Zipf-like tail."""

    kind: Literal["heavy_hitters"] = "heavy_hitters"
    hot: list[float] = Field(min_length=1, max_length=HEAD_RANKS)
    tail: Annotated[UniformIds | ZipfIds, Field(discriminator="kind")] = UniformIds()

    @field_validator("hot")
    @classmethod
    def _check_hot(cls, hot: list[float]) -> list[float]:
        for i, p in enumerate(hot):
            if not (0.0 < p <= 1.0) or not math.isfinite(p):
                raise ValueError(f"hot[{i}] must be a probability in (0, 1] (got {p})")
        total = math.fsum(hot)
        if total > 1.0 + PROB_TOLERANCE:
            raise ValueError(f"hot probabilities must sum to at most 1 (got {total:.6g})")
        return hot


IdDist = Annotated[UniformIds | ZipfIds | HeavyHitterIds, Field(discriminator="kind")]


# ---------------------------------------------------------------------------------------------------------
# Table population (presets)
# ---------------------------------------------------------------------------------------------------------
class PopulationUniformIds(_Model):
    """Every table's IDs uniform over its rows."""

    kind: Literal["uniform"] = "uniform"


class PopulationZipfIds(_Model):
    """Per-table skew: Zipf-like exponent ``s`` and offset ``q``, and optionally heavy hitters, drawn per table.

    ``hot_mass`` (optional): share of a table's lookups on its ``hot_rows`` hottest rows
    (split equally); the rest follows the Zipf-like law over the later ranks.
    """

    kind: Literal["zipf"] = "zipf"
    s: DistLike
    q: DistLike = Fixed(kind="fixed", value=0.0)
    hot_mass: DistLike | None = None
    hot_rows: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="after")
    def _check_ranges(self) -> PopulationZipfIds:
        if not self.s.lowest() > 0:
            raise ValueError(
                f"s: the {self.s.kind} distribution can produce exponents <= 0 (lowest {self.s.lowest()}); "
                "Zipf exponents must be > 0: set min > 0"
            )
        if self.s.quantile(1 - 1e-12)[0] > 20:
            raise ValueError("s: exponents above 20 are not supported; set max <= 20")
        if self.q.lowest() < 0:
            raise ValueError(f"q: the {self.q.kind} distribution can produce offsets < 0; set min: 0")
        if self.hot_mass is not None and (
            self.hot_mass.lowest() < 0 or self.hot_mass.quantile(1 - 1e-12)[0] > 1
        ):
            raise ValueError("hot_mass: shares must lie in [0, 1]; set min: 0 and max: 1 (or lower)")
        return self


class TablePopulation(_Model):
    """A distribution over embedding tables; each drawn table gets rows, mean pooling and skew.

    ``rows`` and ``pooling`` are used when whole tables are drawn (``workload_stats``);
    when bound to a model, each feature keeps the model's ``id_range`` and pooling.
    ``length_sigma``: per-sample bag/sequence lengths are lognormal around the mean
    pooling with this sigma (0: fixed lengths, stochastically rounded).
    """

    tables: int = Field(default=1, ge=1, le=TABLE_COUNT_MAX, description="how many tables the population describes")
    rows: DistLike
    pooling: SizeDist
    length_sigma: float = Field(default=0.0, ge=0, le=5)
    ids: Annotated[PopulationUniformIds | PopulationZipfIds, Field(discriminator="kind")]
    scatter: bool = True

    @model_validator(mode="after")
    def _check_rows(self) -> TablePopulation:
        if not self.rows.lowest() >= 1:
            raise ValueError(
                f"rows: the {self.rows.kind} distribution can produce tables with < 1 row; set min >= 1"
            )
        if not float(self.rows.quantile(1 - 1e-9)[0]) <= TABLE_ROWS_MAX:
            raise ValueError(f"rows: the {self.rows.kind} distribution can produce tables above {TABLE_ROWS_MAX:.0e} rows; set max")
        return self


# ---------------------------------------------------------------------------------------------------------
# Explicit features (fitted specs)
# ---------------------------------------------------------------------------------------------------------
class Observed(_Model):
    """What fitting saw in the data (provenance; not used for generation)."""

    rows: int = Field(ge=0)
    distinct: int = Field(ge=0)
    top1_share: float = Field(ge=0, le=1)
    top10_share: float = Field(ge=0, le=1)
    zipf_s: float | None = None
    zipf_q: float | None = None
    mean_length: float = Field(ge=0)


class FeatureSpec(_Model):
    """One feature's traffic: ID distribution, lengths, and the rows it spans.

    ``cardinality``: rows the IDs span (None: the model feature's whole id_range; when
    bound, capped at the id_range). ``pooling``: per-sample lengths (None: the model
    feature's own pooling, fixed). ``scatter``: spread hot rows over the id_range.
    ``side``: ``request`` (the same for every candidate of a ranking request) or
    ``candidate``; None (the default): the model feature's own side.
    """

    name: str = Field(min_length=1, max_length=200)
    cardinality: int | None = Field(default=None, ge=1, le=TABLE_ROWS_MAX)
    ids: IdDist = UniformIds()
    pooling: SizeDist | None = None
    scatter: bool = True
    side: Literal["request", "candidate"] | None = None
    observed: Observed | None = None


class DenseFeature(_Model):
    """One dense column: value distribution and the share of missing values (generated as 0)."""

    name: str = Field(min_length=1)
    dist: DistLike
    missing_rate: float = Field(default=0.0, ge=0, le=1)


class DenseSpec(_Model):
    """Dense features: ``features`` (fitted columns, cycled over the model's dense width) or ``default``.

    ``side``: whether the dense vector belongs to the ranking request or to the candidate (default).
    """

    default: DistLike = Normal(kind="normal", mean=0.0, std=1.0)
    side: Literal["request", "candidate"] = "candidate"
    features: list[DenseFeature] = Field(default_factory=list)


class LabelSpec(_Model):
    """Bernoulli labels; ``click_rate`` per task (a list is cycled over tasks)."""

    click_rate: float | list[float] = 0.25

    @field_validator("click_rate")
    @classmethod
    def _check_rate(cls, rate: float | list[float]) -> float | list[float]:
        rates = rate if isinstance(rate, list) else [rate]
        if not rates:
            raise ValueError("must not be empty")
        for r in rates:
            if not (0.0 <= r <= 1.0):
                raise ValueError(f"click rates must be in [0, 1] (got {r})")
        return rate


class PoissonArrivals(_Model):
    """Poisson arrivals: exponential inter-arrival times with ``rate`` queries per second."""

    kind: Literal["poisson"] = "poisson"
    rate: float = Field(gt=0)


class FitSource(_Model):
    """Where a fitted spec came from."""

    file: str
    rows: int = Field(ge=0)
    label_column: str | None = None
    skipped: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------
# The spec
# ---------------------------------------------------------------------------------------------------------
class WorkloadSpec(_Model):
    """A complete workload: tables (population or features), dense, labels, queries, arrivals."""

    version: Literal[1] = 1
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(default=0, ge=SEED_MIN, le=SEED_MAX)
    population: TablePopulation | None = None
    features: list[FeatureSpec] | None = None
    dense: DenseSpec = DenseSpec()
    labels: LabelSpec = LabelSpec()
    query_sizes: SizeDist = MLPERF_QUERY_SIZES
    arrivals: PoissonArrivals = PoissonArrivals(rate=1000.0)
    fitted_from: FitSource | None = None

    @model_validator(mode="after")
    def _one_table_source(self) -> WorkloadSpec:
        if (self.population is None) == (self.features is None):
            raise ValueError(
                "give exactly one of 'population' (a table population) or 'features' (explicit features)"
            )
        if self.features is not None:
            if not self.features:
                raise ValueError("features: must list at least one feature")
            names = [f.name for f in self.features]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"features: duplicate feature names {dup}")
        return self

    # -- serialisation --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (what ``to_yaml`` writes): ``kind`` first, unset optional fields left out."""
        return _order_keys(self.model_dump(mode="json", exclude_none=True, by_alias=True))

    def to_yaml(self, path: str | Path) -> Path:
        """Write the spec as YAML; ``load_workload(path)`` reads back an equal spec."""
        p = Path(path)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(p, yaml.safe_dump(self.to_dict(), sort_keys=False, width=100))
        except OSError as exc:
            raise ConfigError(f"cannot write spec ({exc.__class__.__name__}: {exc})", source=str(p)) from None
        return p


def _order_keys(obj: Any) -> Any:
    """Put ``kind`` first and ``min``/``max`` last in every mapping (readable YAML)."""
    if isinstance(obj, dict):
        keys = list(obj)
        ordered = [k for k in keys if k == "kind"] + [k for k in keys if k not in ("kind", "min", "max")]
        ordered += [k for k in keys if k in ("min", "max")]
        return {k: _order_keys(obj[k]) for k in ordered}
    if isinstance(obj, list):
        return [_order_keys(v) for v in obj]
    return obj
