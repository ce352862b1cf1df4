"""Embedding-access locality statistics in the form Meta published for its 2022 DLRM dataset.

For each table, every touched row has a *re-use count* (how many lookups hit it in the
batch). Aggregated over tables:

- ``lookups``: all lookups; ``unique_rows``: touched rows (a row of table A and a row
  of table B are different rows); ``avg_reuse`` = lookups / unique_rows ("avg col size");
- ``avg_pooling`` = lookups / (batch_size * tables);
- ``buckets``: re-use count buckets (0,1], (1,2], (2,4], ... (16384,32768], (32768, inf),
  given by their upper bounds ``[1, 2, 4, ..., 32768, None]``;
- ``rows_share``: share of touched rows in each bucket ("histogram of col sizes");
- ``lookups_share``: share of lookups that hit rows of each bucket ("ratio of index
  distribution at different column sizes"). Each share list sums to 1.

Counting is exact (np.unique / np.bincount per table), one table at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from recstack.config.limits import (
    BATCH_SIZE_MAX,
    SEED_MAX,
    SEED_MIN,
    TABLE_COUNT_MAX,
    USABLE_FRACTION,
    available_bytes,
    gib,
)
from recstack.errors import ConfigError, MemoryPreflightError
from recstack.workload.batch import FeatureRequest
from recstack.workload.generate import (
    _TABLES,
    ResolvedFeature,
    name_key,
    resolve_population_feature,
    resolve_spec_feature,
    stream,
)
from recstack.workload.ids import Workspace
from recstack.workload.spec import TablePopulation, WorkloadSpec

BUCKET_BOUNDS: list[int | None] = [1 << i for i in range(16)] + [None]
NUM_BUCKETS = len(BUCKET_BOUNDS)
DEFAULT_POPULATION_TABLES = 32

PUBLISHED_2022: dict[str, Any] = {
    "source": "facebookresearch/dlrm_datasets, fbgemm_t788_bs131072_0.pt (first block of the published stats)",
    "tables": 788,
    "batch_size": 131072,
    "lookups": 1405163864,
    "unique_rows": 110259238,
    "avg_pooling": 1405163864 / 131072 / 788,
    "avg_reuse": 12.7,
    "buckets": BUCKET_BOUNDS,
    "rows_share": [0.342, 0.144, 0.149, 0.138, 0.112, 0.068, 0.029, 0.010, 0.004, 0.002, 0.001, 0.001]
    + [0.0] * 5,
    "lookups_share": [0.027, 0.023, 0.040, 0.068, 0.105, 0.120, 0.099, 0.070, 0.059, 0.054, 0.040, 0.072]
    + [0.064, 0.047, 0.021, 0.017, 0.076],
}
"""Meta's published locality statistics (788 tables, batch 131,072), shares rounded to 3 digits."""


def bucket_index(counts: np.ndarray) -> np.ndarray:
    """Bucket of each re-use count (>= 1): 0 for 1, j for (2**(j-1), 2**j], 16 for > 32768."""
    c = np.asarray(counts, dtype=np.int64)
    if c.size and c.min() < 1:
        raise ValueError("re-use counts must be >= 1")
    idx = np.zeros(c.shape, dtype=np.int64)
    big = c > 1
    # ceil(log2(c)) for c >= 2 is the bit length of (c - 1): frexp's exponent, exact for integers.
    idx[big] = np.frexp((c[big] - 1).astype(np.float64))[1]
    return np.minimum(idx, NUM_BUCKETS - 1)


def row_counts(indices: np.ndarray | torch.Tensor) -> np.ndarray:
    """Re-use count of every touched row of one table (order unspecified)."""
    arr = indices.numpy() if isinstance(indices, torch.Tensor) else np.asarray(indices)
    arr = arr.reshape(-1).astype(np.int64, copy=False)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(arr.min()), int(arr.max())
    if lo >= 0 and hi < max(4 * arr.size, 1 << 16):
        counts = np.bincount(arr, minlength=hi + 1)
        return counts[counts > 0]
    return np.unique(arr, return_counts=True)[1]


class LocalityAccumulator:
    """Adds tables one at a time; ``result()`` gives the aggregated statistics."""

    def __init__(self) -> None:
        self.rows = np.zeros(NUM_BUCKETS, dtype=np.float64)
        self.lookups_hist = np.zeros(NUM_BUCKETS, dtype=np.float64)
        self.tables = 0
        self.lookups = 0
        self.unique_rows = 0
        self.max_reuse = 0

    def add(self, indices: np.ndarray | torch.Tensor) -> dict[str, int]:
        """Account one table's lookups (row ids of one batch); returns its lookups and unique rows."""
        counts = row_counts(indices)
        b = bucket_index(counts)
        self.rows += np.bincount(b, minlength=NUM_BUCKETS)
        self.lookups_hist += np.bincount(b, weights=counts, minlength=NUM_BUCKETS)
        n, u = int(counts.sum()), int(counts.size)
        self.tables += 1
        self.lookups += n
        self.unique_rows += u
        self.max_reuse = max(self.max_reuse, int(counts.max()) if counts.size else 0)
        return {"lookups": n, "unique_rows": u}

    def result(self, batch_size: int | None = None) -> dict[str, Any]:
        rows_total = self.rows.sum()
        look_total = self.lookups_hist.sum()
        return {
            "tables": self.tables,
            "batch_size": batch_size,
            "lookups": self.lookups,
            "unique_rows": self.unique_rows,
            "avg_pooling": (self.lookups / (batch_size * self.tables))
            if batch_size and self.tables
            else None,
            "avg_reuse": (self.lookups / self.unique_rows) if self.unique_rows else None,
            "max_reuse": self.max_reuse,
            "buckets": list(BUCKET_BOUNDS),
            "rows_share": [float(x) for x in (self.rows / rows_total if rows_total else self.rows)],
            "lookups_share": [
                float(x) for x in (self.lookups_hist / look_total if look_total else self.lookups_hist)
            ],
        }


def locality_stats(
    tables: Iterable[np.ndarray | torch.Tensor], batch_size: int | None = None
) -> dict[str, Any]:
    """Locality statistics of per-table row-id arrays (one batch each), aggregated over tables.

    ``tables``: an iterable of 1-D integer arrays, one per table (consumed one at a time,
    so a generator bounds memory to one table). ``batch_size``: samples in the batch
    (for ``avg_pooling``; None leaves it None).
    """
    acc = LocalityAccumulator()
    for t in tables:
        acc.add(t)
    return acc.result(batch_size)


# ---------------------------------------------------------------------------------------------------------
# Drawing tables from a spec
# ---------------------------------------------------------------------------------------------------------
def _strata(k: int, rng: np.random.Generator) -> np.ndarray:
    """A seeded random order of the k equal-probability strata of [0, 1)."""
    return rng.permutation(k)


def stratum_medians(k: int, order: np.ndarray) -> np.ndarray:
    """Mid-point probabilities of strata ``order`` (of k)."""
    return (order + 0.5) / k


def stratum_means(dist: Any, k: int, order: np.ndarray, points: int = 512) -> np.ndarray:
    """Mean of ``dist`` within each stratum ``order`` (of k): stratum means keep the population mean."""
    grid = (np.arange(k * points) + 0.5) / (k * points)
    values = dist.quantile(grid).reshape(k, points).mean(axis=1)
    return values[order]


def population_draws(population: TablePopulation, k: int, seed: int) -> dict[str, np.ndarray]:
    """Parameters of ``k`` tables drawn from a population by stratified (Latin-hypercube) sampling.

    Each parameter's range is cut into ``k`` equal-probability strata, used once each in
    an independent seeded random order. A table takes the stratum's median for its row
    count and for the skew probabilities ``u_s``, ``u_q``, ``u_hot`` (quantiles of s, q and
    hot mass), and the stratum's mean for its mean pooling factor (so the tables'
    average pooling equals the population's).
    """
    rng = stream(seed, _TABLES, 0)
    o_rows, o_pool, o_s, o_q, o_hot = (_strata(k, rng) for _ in range(5))
    return {
        "rows": np.maximum(np.rint(population.rows.quantile(stratum_medians(k, o_rows))), 1).astype(np.int64),
        "pooling": np.maximum(stratum_means(population.pooling, k, o_pool), 0.0),
        "u_s": stratum_medians(k, o_s),
        "u_q": stratum_medians(k, o_q),
        "u_hot": stratum_medians(k, o_hot),
    }


def population_tables(population: TablePopulation, k: int, seed: int) -> list[ResolvedFeature]:
    """``k`` tables drawn from a population (see :func:`population_draws`), ready to generate."""
    d = population_draws(population, k, seed)
    tables = []
    for i in range(k):
        request = FeatureRequest(
            name=f"table_{i}", id_range=int(d["rows"][i]), pooling=float(d["pooling"][i])
        )
        feat = resolve_population_feature(
            population,
            request,
            stream(seed, _TABLES, 1, i),
            u_skew=(float(d["u_s"][i]), float(d["u_q"][i]), float(d["u_hot"][i])),
            source="population draw",
        )
        tables.append(feat)
    return tables


def feature_tables(spec: WorkloadSpec, k: int | None, seed: int) -> list[ResolvedFeature]:
    """Tables of a spec with explicit features: all of them, or ``k`` (a seeded sample, cycling past all)."""
    assert spec.features is not None
    feats = spec.features
    if k is None or k == len(feats):
        chosen = list(range(len(feats)))
    elif k < len(feats):
        chosen = sorted(stream(seed, _TABLES, 2).choice(len(feats), size=k, replace=False).tolist())
    else:
        chosen = [i % len(feats) for i in range(k)]
    tables = []
    for j, i in enumerate(chosen):
        f = feats[i]
        if f.cardinality is None:
            raise ConfigError(
                "stats need each feature's row count; set cardinality (fitted specs have it)",
                field=f"features.{i}.cardinality",
            )
        mean = f.pooling.mean() if f.pooling is not None else 1.0
        request = FeatureRequest(
            name=f.name if j < len(feats) else f"{f.name}#{j}", id_range=f.cardinality, pooling=mean
        )
        tables.append(resolve_spec_feature(f, request, stream(seed, _TABLES, 3, name_key(request.name))))
    return tables


STATS_BYTES_PER_ID = 24  # int64 IDs, plus the sorted copy and counts of the locality count


def check_table_memory(drawn: list[ResolvedFeature], batch_size: int, available: int | None = None) -> None:
    """Refuse (naming a --batch-size that fits) when one table's IDs at ``batch_size`` exceed the free memory.

    Tables are generated one at a time, so the largest table (by mean length) decides.
    """
    widest = max((f.lengths.mean() for f in drawn), default=0.0)
    need = batch_size * (4 + widest * STATS_BYTES_PER_ID)
    avail = available_bytes() if available is None else available
    usable = avail * USABLE_FRACTION
    if need > usable:
        fit = int(batch_size * usable / need)
        raise MemoryPreflightError(
            f"one table's IDs at batch {batch_size} (mean length {widest:.3g}) need {gib(need)} but {gib(avail)} "
            f"is available; use --batch-size {max(fit, 1)} or less"
        )


def workload_stats(
    spec: WorkloadSpec, batch_size: int, tables: int | None = None, seed: int = 0
) -> dict[str, Any]:
    """Generate one batch of ``batch_size`` samples for ``tables`` tables of ``spec`` and measure locality.

    Tables come from the spec's population (``tables`` default 32, stratified draws) or
    its explicit features (default: all). Each table is generated, counted and
    discarded before the next (memory: one table's IDs). The result has the keys of
    :func:`locality_stats` plus ``spec``, ``seed`` and ``per_table`` (rows, mean pooling,
    skew, lookups and unique rows of each drawn table).
    """
    for field, value, low, high in (
        ("batch_size", batch_size, 1, BATCH_SIZE_MAX),
        ("tables", tables, 1, TABLE_COUNT_MAX),
        ("seed", seed, SEED_MIN, SEED_MAX),
    ):
        if value is not None and not low <= int(value) <= high:
            raise ConfigError(f"must be in {low} .. {high} (got {value})", field=field)
    batch_size = int(batch_size)
    if spec.population is not None:
        drawn = population_tables(spec.population, int(tables or DEFAULT_POPULATION_TABLES), int(seed))
    else:
        drawn = feature_tables(spec, None if tables is None else int(tables), int(seed))
    check_table_memory(drawn, batch_size)
    acc = LocalityAccumulator()
    work = Workspace()
    per_table = []
    for i, feat in enumerate(drawn):
        rng = stream(seed, _TABLES, 4, i)
        total = int(feat.lengths.draw(rng, batch_size).sum(dtype=np.int64))
        ids = feat.sampler.draw(rng, total, work)
        counts = acc.add(ids)
        del ids
        per_table.append(
            {
                "name": feat.name,
                "rows": feat.id_range,
                "mean_pooling": round(feat.lengths.mean(), 4),
                "ids": feat.ids,
                **counts,
            }
        )
    out = acc.result(batch_size)
    out.update({"spec": spec.name, "seed": int(seed), "per_table": per_table})
    return out


def bucket_label(j: int) -> str:
    """'(lo, hi]' label of re-use bucket ``j``."""
    if j == 0:
        return "(0, 1]"
    lo, hi = BUCKET_BOUNDS[j - 1], BUCKET_BOUNDS[j]
    return f"({lo}, {hi}]" if hi is not None else f"({lo}, inf)"
