"""Binding a spec to a model's features, and generating batches, query sizes and arrival times.

Determinism: every random stream is a ``numpy.random.SeedSequence`` keyed by the
workload seed and a stream path, so batch ``i`` depends only on ``(seed, i)`` (not on
earlier calls), and each feature's IDs depend only on ``(seed, i, feature name)``.
Per-feature settings drawn at bind time (skew from a population, the hot-row
scatter) depend only on ``(seed, feature name)``.
"""

from __future__ import annotations

import math
import threading
import zlib
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from recstack.config.limits import SEED_MAX, SEED_MIN
from recstack.errors import ConfigError
from recstack.workload.batch import FeatureRequest, RawBatch, SparseInput
from recstack.workload.distributions import Fixed, LogNormal, _Dist, stochastic_round
from recstack.workload.ids import IdSampler, RankDistribution, Workspace, affine_params
from recstack.workload.spec import (
    FeatureSpec,
    HeavyHitterIds,
    PopulationZipfIds,
    TablePopulation,
    UniformIds,
    WorkloadSpec,
    ZipfIds,
)

# Stream identifiers (first element of a SeedSequence spawn key).
_BIND, _BATCH, _QUERY, _ARRIVAL, _TABLES = 1, 2, 3, 4, 5
_FEATURE, _DENSE, _LABELS = 0, 1, 2


def stream(seed: int, *key: int) -> np.random.Generator:
    """A numpy Generator for the stream ``key`` of ``seed`` (SFC64: fast, reproducible)."""
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(entropy=int(seed), spawn_key=key)))


def name_key(name: str) -> int:
    """Stable 32-bit key of a feature name (CRC-32)."""
    return zlib.crc32(name.encode("utf-8"))


# ---------------------------------------------------------------------------------------------------------
# Lengths
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LengthModel:
    """Per-sample lengths: exactly ``exact`` each, or draws of ``dist`` stochastically rounded and clamped."""

    exact: int | None
    dist: _Dist | None
    low: int
    high: int | None

    def draw(self, rng: np.random.Generator, batch_size: int) -> np.ndarray:
        """int32 lengths for ``batch_size`` samples."""
        if self.exact is not None:
            return np.full(batch_size, self.exact, dtype=np.int32)
        assert self.dist is not None
        raw = stochastic_round(self.dist.sample(rng, batch_size), rng)
        np.clip(raw, self.low, self.high if self.high is not None else np.iinfo(np.int32).max, out=raw)
        return raw.astype(np.int32)

    def mean(self) -> float:
        """Expected length (numerical for distributions)."""
        if self.exact is not None:
            return float(self.exact)
        assert self.dist is not None
        grid = self.dist.quantile((np.arange(4096) + 0.5) / 4096)
        return float(np.mean(np.clip(grid, self.low, self.high if self.high is not None else np.inf)))

    def describe(self) -> dict[str, Any]:
        if self.exact is not None:
            return {"kind": "exact", "value": self.exact}
        assert self.dist is not None
        out = self.dist.model_dump(mode="json", exclude_none=True, by_alias=True)
        out["clamp"] = [self.low, self.high]
        out["rounding"] = "stochastic"
        return out


def _lengths_for(request: FeatureRequest, dist: _Dist | None) -> LengthModel:
    """Lengths of a model feature: exact for fixed_length, else ``dist`` (default: fixed at its pooling)."""
    high = request.max_length
    if request.fixed_length:
        exact = int(round(request.pooling))
        if high is not None:
            exact = min(exact, high)
        return LengthModel(exact, None, 0, high)
    low = 1 if request.kind == "sequence" else 0
    if dist is None:
        dist = Fixed(kind="fixed", value=float(request.pooling))
    if isinstance(dist, Fixed) and float(dist.value).is_integer():
        value = int(dist.value)
        value = max(low, value if high is None else min(value, high))
        return LengthModel(value, None, low, high)
    return LengthModel(None, dist, low, high)


def population_lengths(population: TablePopulation, mean: float) -> _Dist:
    """The per-sample length distribution a population gives a feature of mean pooling ``mean``."""
    if population.length_sigma == 0 or mean <= 0:
        return Fixed(kind="fixed", value=float(mean))
    return LogNormal(kind="lognormal", mean=float(mean), sigma=population.length_sigma)


# ---------------------------------------------------------------------------------------------------------
# Resolved features
# ---------------------------------------------------------------------------------------------------------
@dataclass
class ResolvedFeature:
    """One model feature with everything needed to generate it."""

    name: str
    kind: Literal["pooled", "sequence"]
    id_range: int
    ids: dict[str, Any]
    sampler: IdSampler
    lengths: LengthModel
    source: str
    side: Literal["request", "candidate"] = "candidate"

    def describe(self) -> dict[str, Any]:
        dist = self.sampler.dist
        support = dist.support
        top1pct = max(1, support // 100)
        return {
            "name": self.name,
            "kind": self.kind,
            "side": self.side,
            "source": self.source,
            "id_range": self.id_range,
            "rows_used": support,
            "ids": self.ids,
            "scatter": None
            if self.sampler.scatter is None
            else {"a": self.sampler.scatter[0], "b": self.sampler.scatter[1]},
            "lengths": self.lengths.describe(),
            "mean_length": round(self.lengths.mean(), 6),
            "top1_row_share": round(float(dist.top_share(1)[()]), 6),
            "top1pct_rows_share": round(float(dist.top_share(top1pct)[()]), 6),
        }


def rank_distribution(ids: UniformIds | ZipfIds | HeavyHitterIds, support: int) -> RankDistribution:
    """The rank distribution of an ID spec over ``support`` rows."""
    if isinstance(ids, UniformIds):
        return RankDistribution.uniform(support)
    if isinstance(ids, ZipfIds):
        return RankDistribution.zipf(support, ids.s, ids.q)
    if isinstance(ids.tail, ZipfIds):
        return RankDistribution.zipf(support, ids.tail.s, ids.tail.q, hot=ids.hot)
    return RankDistribution.heavy_hitters_uniform(support, ids.hot)


def resolve_population_feature(
    population: TablePopulation,
    request: FeatureRequest,
    rng: np.random.Generator,
    *,
    u_skew: tuple[float, float, float] | None = None,
    source: str = "population",
) -> ResolvedFeature:
    """A model feature under a table population: keeps id_range and mean pooling, draws its skew.

    ``u_skew``: probabilities for (s, q, hot_mass) (stratified table draws); default:
    drawn from ``rng``. The scatter parameters are then drawn from ``rng``.
    """
    us, uq, uh = (
        u_skew if u_skew is not None else (float(rng.random()), float(rng.random()), float(rng.random()))
    )
    n = int(request.id_range)
    pids = population.ids
    ids: UniformIds | ZipfIds | HeavyHitterIds
    if isinstance(pids, PopulationZipfIds):
        s = float(pids.s.quantile(us)[0])
        q = float(pids.q.quantile(uq)[0])
        ids = ZipfIds(kind="zipf", s=s, q=q)
        ids_desc: dict[str, Any] = {"kind": "zipf", "s": round(s, 6), "q": round(q, 6)}
        if pids.hot_mass is not None:
            mass = float(np.clip(pids.hot_mass.quantile(uh)[0], 0.0, 1.0))
            if mass > 0:
                ids = HeavyHitterIds(
                    kind="heavy_hitters", hot=[mass / pids.hot_rows] * pids.hot_rows, tail=ids
                )
            ids_desc.update({"hot_mass": round(mass, 6), "hot_rows": pids.hot_rows})
    else:
        ids = UniformIds()
        ids_desc = {"kind": "uniform"}
    scatter = affine_params(n, rng) if population.scatter and not isinstance(ids, UniformIds) else None
    sampler = IdSampler(rank_distribution(ids, n), n, scatter)
    lengths = _lengths_for(request, population_lengths(population, request.pooling))
    return ResolvedFeature(request.name, request.kind, n, ids_desc, sampler, lengths, source, request.side)


def resolve_spec_feature(
    spec_feature: FeatureSpec, request: FeatureRequest, rng: np.random.Generator
) -> ResolvedFeature:
    """A model feature fed by an explicit spec feature (fitted specs)."""
    n = int(request.id_range)
    support = n if spec_feature.cardinality is None else min(spec_feature.cardinality, n)
    ids = spec_feature.ids
    uniform_full = isinstance(ids, UniformIds) and support == n
    scatter = affine_params(n, rng) if spec_feature.scatter and not uniform_full else None
    sampler = IdSampler(rank_distribution(ids, support), n, scatter)
    lengths = _lengths_for(request, spec_feature.pooling)
    ids_desc = ids.model_dump(mode="json")
    return ResolvedFeature(
        request.name, request.kind, n, ids_desc, sampler, lengths, f"spec feature {spec_feature.name!r}",
        spec_feature.side or request.side,
    )


# ---------------------------------------------------------------------------------------------------------
# Bound workload
# ---------------------------------------------------------------------------------------------------------
def _check_requests(features: list[FeatureRequest]) -> None:
    seen: set[str] = set()
    for i, f in enumerate(features):
        where = f"features[{i}]"
        if not isinstance(f, FeatureRequest):
            raise ConfigError(f"expected a FeatureRequest, got {type(f).__name__}", field=where)
        if f.name in seen:
            raise ConfigError(f"duplicate feature name {f.name!r}", field=where)
        seen.add(f.name)
        if int(f.id_range) < 1:
            raise ConfigError(f"id_range must be >= 1 (got {f.id_range})", field=f"{where}.id_range")
        if not math.isfinite(f.pooling) or f.pooling < 0:
            raise ConfigError(
                f"pooling must be a finite number >= 0 (got {f.pooling})", field=f"{where}.pooling"
            )
        if f.max_length is not None and f.max_length < 1:
            raise ConfigError(f"max_length must be >= 1 (got {f.max_length})", field=f"{where}.max_length")
        if f.kind not in ("pooled", "sequence"):
            raise ConfigError(f"kind must be 'pooled' or 'sequence' (got {f.kind!r})", field=f"{where}.kind")


class BoundWorkload:
    """A spec resolved for one model: generates :class:`RawBatch` es, query sizes and arrivals.

    Resolved settings are read-only after construction; each call allocates its outputs
    and uses per-thread work buffers, so concurrent calls (e.g. from serving threads) are safe.
    """

    def __init__(
        self,
        spec: WorkloadSpec,
        features: list[FeatureRequest],
        num_dense: int,
        num_tasks: int = 1,
        mapping: dict[str, str] | None = None,
        seed: int | None = None,
    ) -> None:
        features = list(features)
        _check_requests(features)
        if int(num_dense) < 0:
            raise ConfigError(f"must be >= 0 (got {num_dense})", field="num_dense")
        if int(num_tasks) < 1:
            raise ConfigError(f"must be >= 1 (got {num_tasks})", field="num_tasks")
        if seed is not None and not SEED_MIN <= int(seed) <= SEED_MAX:
            raise ConfigError(f"must be in {SEED_MIN} .. {SEED_MAX} (got {seed})", field="seed")
        self.spec = spec
        self.seed = int(spec.seed if seed is None else seed)
        self.num_dense = int(num_dense)
        self.num_tasks = int(num_tasks)
        self.requests = features
        self.mapping = dict(mapping or {})
        self._local = threading.local()
        self.features: list[ResolvedFeature] = []
        if spec.population is not None:
            if self.mapping:
                raise ConfigError(
                    "a mapping applies to specs with explicit 'features'; this spec has a table population",
                    field="mapping",
                )
            for req in features:
                rng = stream(self.seed, _BIND, name_key(req.name))
                self.features.append(resolve_population_feature(spec.population, req, rng))
        else:
            assert spec.features is not None
            by_name = {f.name: f for f in spec.features}
            model_names = {f.name for f in features}
            for key, val in self.mapping.items():
                if key not in model_names:
                    raise ConfigError(
                        f"{key!r} is not a model feature; model features: {sorted(model_names)}",
                        field=f"mapping.{key}",
                    )
                if val not in by_name:
                    raise ConfigError(
                        f"{val!r} is not a spec feature; spec features: {sorted(by_name)}",
                        field=f"mapping.{key}",
                    )
            for i, req in enumerate(features):
                spec_feature = (
                    by_name[self.mapping[req.name]]
                    if req.name in self.mapping
                    else spec.features[i % len(spec.features)]
                )
                rng = stream(self.seed, _BIND, name_key(req.name))
                self.features.append(resolve_spec_feature(spec_feature, req, rng))

    # -- batches --------------------------------------------------------------------------------------
    def batch(self, batch_size: int, index: int = 0) -> RawBatch:
        """Batch ``index`` of ``batch_size`` samples; identical for the same (seed, index)."""
        batch_size, index = int(batch_size), int(index)
        if batch_size < 1:
            raise ConfigError(f"must be >= 1 (got {batch_size})", field="batch_size")
        if index < 0:
            raise ConfigError(f"must be >= 0 (got {index})", field="index")
        rngs = [stream(self.seed, _BATCH, index, _FEATURE, name_key(f.name)) for f in self.features]
        lengths = [f.lengths.draw(rng, batch_size) for f, rng in zip(self.features, rngs, strict=True)]
        totals = [int(ln.sum(dtype=np.int64)) for ln in lengths]
        # One buffer for all IDs of the batch (one large allocation instead of one per feature)
        # and per-thread work buffers reused across batches.
        values = np.empty(sum(totals), dtype=np.int64)
        work = self._workspace()
        sparse: dict[str, SparseInput] = {}
        start = 0
        for feat, rng, ln, total in zip(self.features, rngs, lengths, totals, strict=True):
            seg = values[start : start + total]
            feat.sampler.draw(rng, total, work, out=seg)
            start += total
            sparse[feat.name] = SparseInput(values=torch.from_numpy(seg), lengths=torch.from_numpy(ln))
        dense = self._dense(stream(self.seed, _BATCH, index, _DENSE), batch_size) if self.num_dense else None
        labels = self._labels(stream(self.seed, _BATCH, index, _LABELS), batch_size)
        return RawBatch(dense=dense, sparse=sparse, labels=labels)

    def _workspace(self) -> Workspace:
        work = getattr(self._local, "work", None)
        if work is None:
            work = self._local.work = Workspace()
        return work

    def _dense(self, rng: np.random.Generator, batch_size: int) -> torch.Tensor:
        spec = self.spec.dense
        if not spec.features:
            values = spec.default.sample(rng, batch_size * self.num_dense).reshape(batch_size, self.num_dense)
            return torch.from_numpy(values.astype(np.float32))
        out = np.empty((batch_size, self.num_dense), dtype=np.float32)
        cols = spec.features
        for i, col in enumerate(cols):
            idx = np.arange(i, self.num_dense, len(cols))
            if idx.size == 0:
                continue
            vals = col.dist.sample(rng, batch_size * idx.size).reshape(batch_size, idx.size)
            if col.missing_rate > 0:
                vals[rng.random(vals.shape) < col.missing_rate] = 0.0
            out[:, idx] = vals
        return torch.from_numpy(out)

    def _labels(self, rng: np.random.Generator, batch_size: int) -> torch.Tensor:
        rate = self.spec.labels.click_rate
        rates = np.resize(
            np.asarray(rate if isinstance(rate, list) else [rate], dtype=np.float64), self.num_tasks
        )
        return torch.from_numpy((rng.random((batch_size, self.num_tasks)) < rates).astype(np.float32))

    # -- serving --------------------------------------------------------------------------------------
    def query_sizes(self, n: int, rng_seed: int = 0) -> np.ndarray:
        """``n`` query sizes (int64, >= 1) from the spec's query-size distribution; deterministic per rng_seed."""
        if int(n) < 0:
            raise ConfigError(f"must be >= 0 (got {n})", field="n")
        rng = stream(self.seed, _QUERY, int(rng_seed))
        raw = stochastic_round(self.spec.query_sizes.sample(rng, int(n)), rng)
        return np.maximum(raw, 1)

    def arrival_times(self, n: int, rate: float | None = None, rng_seed: int = 0) -> np.ndarray:
        """Arrival times (seconds, float64, increasing) of ``n`` Poisson arrivals at ``rate`` per second.

        ``rate`` defaults to the spec's ``arrivals.rate``.
        """
        if int(n) < 0:
            raise ConfigError(f"must be >= 0 (got {n})", field="n")
        rate = self.spec.arrivals.rate if rate is None else float(rate)
        if not rate > 0 or not math.isfinite(rate):
            raise ConfigError(f"must be a finite number > 0 (got {rate})", field="rate")
        rng = stream(self.seed, _ARRIVAL, int(rng_seed))
        return np.cumsum(rng.exponential(1.0 / rate, int(n)))

    # -- description ----------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """Resolved per-feature settings (JSON-serialisable), as recorded in profiles."""
        spec = self.spec
        return {
            "spec": spec.name,
            "source": "population" if spec.population is not None else "features",
            "seed": self.seed,
            "num_dense": self.num_dense,
            "num_tasks": self.num_tasks,
            "mapping": self.mapping or None,
            "features": [f.describe() for f in self.features],
            "dense": spec.dense.model_dump(mode="json", exclude_none=True, by_alias=True)
            if self.num_dense
            else None,
            "labels": spec.labels.model_dump(mode="json"),
            "query_sizes": spec.query_sizes.model_dump(mode="json", exclude_none=True, by_alias=True),
            "query_size_mean": round(spec.query_sizes.mean(), 6),
            "arrivals": spec.arrivals.model_dump(mode="json"),
        }

    def ids_per_batch(self, batch_size: int) -> float:
        """Expected number of IDs in a batch of ``batch_size``."""
        return float(sum(f.lengths.mean() for f in self.features) * batch_size)



# Resolving a spec for a model is constructing its BoundWorkload: ``bind(spec, features, num_dense, ...)``.
# (Not a method of the spec, so that the spec module does not import the generator that imports it.)
bind = BoundWorkload
