"""Scalar distributions used by workload specs (sizes, lengths, dense values, population parameters).

Every distribution is a frozen pydantic model tagged by ``kind`` and has an
optional ``min`` / ``max`` clamp applied after drawing. Contracts:

- ``sample(rng, n)`` draws ``n`` float64 values with a numpy ``Generator``
  (vectorised; never a Python loop over values);
- ``quantile(u)`` maps probabilities ``u`` in [0, 1) to values (used for
  stratified draws of table populations);
- ``lowest()`` is the smallest value the distribution can produce after
  clamping, used to reject out-of-range parameters at load time;
- ``mean()`` is the mean after clamping (numerical, on a quantile grid).

Kinds: ``fixed`` (value), ``uniform`` (low, high), ``loguniform`` (low, high > 0),
``normal`` (mean, std), ``lognormal`` (exactly one of mu / mean / median, and
sigma; optional shift subtracted from the draw), ``empirical`` (values with
probs summing to 1: quantile lists such as MLPerf's query sizes).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from recstack.config.limits import SIZE_MAX

PROB_TOLERANCE = 1e-3  # probabilities must sum to 1 within this (fitted specs are written rounded)
_MEAN_GRID = (np.arange(8192) + 0.5) / 8192


_ACKLAM_A = (
    -3.969683028665376e01,
    2.209460984245205e02,
    -2.759285104469687e02,
    1.383577518672690e02,
    -3.066479806614716e01,
    2.506628277459239e00,
)
_ACKLAM_B = (
    -5.447609879822406e01,
    1.615858368580409e02,
    -1.556989798598866e02,
    6.680131188771972e01,
    -1.328068155288572e01,
)
_ACKLAM_C = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)


def normal_ppf(u: np.ndarray | float) -> np.ndarray:
    """Inverse CDF of the standard normal, vectorised (Acklam's rational approximation, |rel. error| < 1.2e-9)."""
    p = np.clip(np.asarray(u, dtype=np.float64), 1e-300, 1 - 1e-16)
    a, b, c, d = _ACKLAM_A, _ACKLAM_B, _ACKLAM_C, _ACKLAM_D
    out = np.empty_like(p)
    low = p < 0.02425
    high = p > 1 - 0.02425
    mid = ~(low | high)
    q = p[mid] - 0.5
    r = q * q
    out[mid] = (
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
        * q
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    )
    for mask, sign, tail in ((low, 1.0, p[low]), (high, -1.0, 1 - p[high])):
        t = np.sqrt(-2 * np.log(tail))
        out[mask] = (
            sign
            * (((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5])
            / ((((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1)
        )
    return out


class _Dist(BaseModel):
    """Common clamp fields and the sampling contract."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _check_bounds(self) -> _Dist:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    @abstractmethod
    def _raw_quantile(self, u: np.ndarray) -> np.ndarray:
        """Quantile function before clamping."""

    @abstractmethod
    def _raw_lowest(self) -> float:
        """Smallest value before clamping."""

    def _raw_sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self._raw_quantile(rng.random(n))

    def clamp(self, x: np.ndarray) -> np.ndarray:
        if self.min is not None or self.max is not None:
            np.clip(x, self.min, self.max, out=x)
        return x

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` float64 draws, clamped to [min, max]."""
        return self.clamp(np.asarray(self._raw_sample(rng, int(n)), dtype=np.float64))

    def quantile(self, u: np.ndarray | float) -> np.ndarray:
        """Values at probabilities ``u`` (clamped)."""
        arr = np.atleast_1d(np.asarray(u, dtype=np.float64))
        return self.clamp(np.asarray(self._raw_quantile(arr), dtype=np.float64).copy())

    def lowest(self) -> float:
        low = self._raw_lowest()
        if self.min is not None:
            low = max(low, self.min)
        if self.max is not None:
            low = min(low, self.max)
        return low

    def mean(self) -> float:
        return float(np.mean(self.quantile(_MEAN_GRID)))


class Fixed(_Dist):
    """Always ``value``."""

    kind: Literal["fixed"] = "fixed"
    value: float

    def _raw_quantile(self, u: np.ndarray) -> np.ndarray:
        return np.full(u.shape, self.value, dtype=np.float64)

    def _raw_sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.value, dtype=np.float64)

    def _raw_lowest(self) -> float:
        return self.value

    def mean(self) -> float:
        return float(self.quantile(0.5)[0])


class Uniform(_Dist):
    """Continuous uniform on [low, high]."""

    kind: Literal["uniform"]
    low: float
    high: float

    @model_validator(mode="after")
    def _order(self) -> Uniform:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must be <= high ({self.high})")
        return self

    def _raw_quantile(self, u: np.ndarray) -> np.ndarray:
        return self.low + u * (self.high - self.low)

    def _raw_sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, n)

    def _raw_lowest(self) -> float:
        return self.low


class LogUniform(_Dist):
    """Log-uniform on [low, high], both > 0."""

    kind: Literal["loguniform"]
    low: float = Field(gt=0)
    high: float = Field(gt=0)

    @model_validator(mode="after")
    def _order(self) -> LogUniform:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must be <= high ({self.high})")
        return self

    def _raw_quantile(self, u: np.ndarray) -> np.ndarray:
        return np.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))

    def _raw_lowest(self) -> float:
        return self.low


class Normal(_Dist):
    """Normal(mean, std)."""

    kind: Literal["normal"]
    mean_: float = Field(alias="mean")
    std: float = Field(ge=0)

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True, allow_inf_nan=False
    )

    def _raw_quantile(self, u: np.ndarray) -> np.ndarray:
        return self.mean_ + self.std * normal_ppf(u)

    def _raw_sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.normal(self.mean_, self.std, n)

    def _raw_lowest(self) -> float:
        return -math.inf if self.std > 0 else self.mean_


class LogNormal(_Dist):
    """exp(Normal(mu, sigma)) - shift (default 0); give exactly one of ``mu``, ``mean`` (of exp(.)) or ``median``."""

    kind: Literal["lognormal"]
    mu: float | None = None
    mean_: float | None = Field(default=None, alias="mean", gt=0)
    median: float | None = Field(default=None, gt=0)
    sigma: float = Field(ge=0)
    shift: float | None = None

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True, allow_inf_nan=False
    )

    @model_validator(mode="after")
    def _one_location(self) -> LogNormal:
        given = [
            k for k, v in (("mu", self.mu), ("mean", self.mean_), ("median", self.median)) if v is not None
        ]
        if len(given) != 1:
            raise ValueError(f"give exactly one of mu, mean, median (got {given or 'none'})")
        return self

    @property
    def log_location(self) -> float:
        """mu of the underlying normal."""
        if self.mu is not None:
            return self.mu
        if self.median is not None:
            return math.log(self.median)
        assert self.mean_ is not None
        return math.log(self.mean_) - 0.5 * self.sigma**2

    def _raw_quantile(self, u: np.ndarray) -> np.ndarray:
        return np.exp(self.log_location + self.sigma * normal_ppf(u)) - (self.shift or 0.0)

    def _raw_sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        out = rng.lognormal(self.log_location, self.sigma, n)
        if self.shift:
            out -= self.shift
        return out

    def _raw_lowest(self) -> float:
        shift = self.shift or 0.0
        return -shift if self.sigma > 0 else math.exp(self.log_location) - shift


class Empirical(_Dist):
    """Discrete values with probabilities (e.g. quantile lists); probs must sum to 1."""

    kind: Literal["empirical"]
    values: list[float] = Field(min_length=1)
    probs: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_probs(self) -> Empirical:
        if len(self.values) != len(self.probs):
            raise ValueError(
                f"values ({len(self.values)}) and probs ({len(self.probs)}) must have the same length"
            )
        if any(p < 0 or not math.isfinite(p) for p in self.probs):
            raise ValueError("probs must be finite and >= 0")
        total = math.fsum(self.probs)
        if abs(total - 1.0) > PROB_TOLERANCE:
            raise ValueError(f"probs must sum to 1 (got {total:.6g})")
        return self

    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        vals = np.asarray(self.values, dtype=np.float64)
        probs = np.asarray(self.probs, dtype=np.float64)
        order = np.argsort(vals, kind="stable")
        return vals[order], probs[order] / probs.sum()

    def _raw_quantile(self, u: np.ndarray) -> np.ndarray:
        vals, probs = self._sorted()
        cum = np.cumsum(probs)
        idx = np.searchsorted(cum, u, side="right")
        return vals[np.minimum(idx, len(vals) - 1)]

    def _raw_sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        vals, probs = self._sorted()
        return vals[rng.choice(len(vals), size=n, p=probs)]

    def _raw_lowest(self) -> float:
        vals, probs = self._sorted()
        return float(vals[probs > 0].min())

    def mean(self) -> float:
        vals, probs = self._sorted()
        return float(np.dot(self.clamp(vals.copy()), probs))


def _number_to_fixed(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"kind": "fixed", "value": value}
    return value


_CHECK_U = np.array([1e-9, 0.5, 1 - 1e-9])


def _finite(dist: _Dist) -> _Dist:
    """Refuse parameters whose draws overflow float64 (e.g. ``normal(1e308, 1e308)``: inf, then NaN as an int)."""
    with np.errstate(all="ignore"):
        ends = dist.quantile(_CHECK_U)
        mean = dist.mean()
    if not (np.all(np.isfinite(ends)) and math.isfinite(mean)):
        raise ValueError(
            f"the {dist.kind} distribution's draws overflow (not finite numbers); use smaller parameters"
        )
    return dist


def _non_negative(dist: _Dist) -> _Dist:
    """Sizes (pooling factors, sequence lengths, query sizes): parameters must not be negative, nor above SIZE_MAX."""
    checks: list[tuple[str, float | None]] = [("min", dist.min), ("max", dist.max)]
    if isinstance(dist, Fixed):
        checks.append(("value", dist.value))
    elif isinstance(dist, (Uniform, LogUniform)):
        checks.append(("low", dist.low))
    elif isinstance(dist, Normal):
        checks.append(("mean", dist.mean_))
    elif isinstance(dist, Empirical):
        checks.append(("values", min(dist.values)))
    for name, val in checks:
        if val is not None and val < 0:
            raise ValueError(f"{dist.kind} {name} must be >= 0 for a size (got {val})")
    top = float(dist.quantile(_CHECK_U[-1:])[0])
    if top > SIZE_MAX:
        raise ValueError(
            f"the {dist.kind} distribution can produce sizes up to {top:.3g}, above the limit {SIZE_MAX} "
            "(lengths are int32); set max (or smaller parameters)"
        )
    return dist


Dist = Annotated[Fixed | Uniform | LogUniform | Normal | LogNormal | Empirical, Field(discriminator="kind")]
"""Any scalar distribution (tagged by ``kind``)."""

DistLike = Annotated[Dist, BeforeValidator(_number_to_fixed), AfterValidator(_finite)]
"""A distribution, or a bare number meaning ``{kind: fixed, value: number}``; its draws must be finite."""

SizeDist = Annotated[DistLike, AfterValidator(_non_negative)]
"""A distribution of non-negative sizes; draws are also clamped at 0 where they are used."""


def fixed(value: float) -> Fixed:
    return Fixed(kind="fixed", value=value)


def stochastic_round(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Round to integers keeping the mean: floor(x + U[0,1)). Integral inputs stay unchanged."""
    return np.floor(x + rng.random(x.shape)).astype(np.int64)
