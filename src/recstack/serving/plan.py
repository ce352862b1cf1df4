"""The request plan of one load run, made before the timed run: arrivals, query sizes, batches.

A request is one query of N candidates (N from the query-size distribution),
split into ceil(N / B) batches of at most B candidates (B = ``--max-batch``).
With a CPU/GPU split (``gpu_threshold``), a query of more than the threshold
goes whole, as one batch, to the accelerator workers (DeepRecSys's scheduler);
the others are split over the CPU workers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recstack.errors import ConfigError
from recstack.serving import QUERY_SIZE_MAX  # re-exported: plan.QUERY_SIZE_MAX
from recstack.workload.distributions import LogNormal, _Dist, stochastic_round

LOGNORMAL_QUERY_SIZES = LogNormal(kind="lognormal", mu=5.1, sigma=0.2, min=1, max=1024)
"""DeepRecSys's serving studies: lognormal(mu 5.1, sigma 0.2) candidates per query, clamped to [1, 1024]."""

CPU, ACCEL = 0, 1  # worker classes (queues)


@dataclass
class Plan:
    """Per request: arrival (s from the start) and size; per batch: its request, size, class and pool slot."""

    arrivals: np.ndarray  # float64 [R]
    sizes: np.ndarray  # int64 [R]
    batch_request: np.ndarray  # int64 [Bt]
    batch_size: np.ndarray  # int64 [Bt]
    batch_class: np.ndarray  # int8 [Bt]
    request_first_batch: np.ndarray  # int64 [R + 1]: batches of request r are first[r] .. first[r+1]-1
    duration_s: float

    @property
    def requests(self) -> int:
        return int(self.arrivals.size)

    def distinct_sizes(self, cls: int) -> list[int]:
        return sorted({int(s) for s in np.unique(self.batch_size[self.batch_class == cls])})


def query_sizes(dist: _Dist, n: int, seed: int) -> np.ndarray:
    """``n`` query sizes (>= 1) drawn from ``dist``, stochastically rounded; seeded."""
    rng = np.random.Generator(np.random.SFC64(np.random.SeedSequence(entropy=int(seed), spawn_key=(14, 2))))
    raw = stochastic_round(dist.sample(rng, int(n)), rng)
    out = np.clip(raw, 1, QUERY_SIZE_MAX)
    return out.astype(np.int64)


def batch_sizes_of(sizes: np.ndarray, max_batch: int) -> np.ndarray:
    """The batch sizes that queries of ``sizes`` candidates split into (at most ``max_batch`` each), in order."""
    plan = make_plan(np.zeros(len(sizes)), np.asarray(sizes), max_batch, 1.0)
    return plan.batch_size


def make_plan(
    arrivals: np.ndarray,
    sizes: np.ndarray,
    max_batch: int,
    duration_s: float,
    gpu_threshold: int | None = None,
) -> Plan:
    """Split every query into batches of at most ``max_batch`` (or send it whole to the accelerator)."""
    if max_batch < 1:
        raise ConfigError(f"must be >= 1 (got {max_batch})", field="--max-batch")
    sizes = np.asarray(sizes, dtype=np.int64)
    accel = sizes > gpu_threshold if gpu_threshold is not None else np.zeros(sizes.size, dtype=bool)
    counts = np.where(accel, 1, -(-sizes // max_batch))
    first = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    total = int(first[-1])
    req = np.repeat(np.arange(sizes.size, dtype=np.int64), counts)
    pos = np.arange(total, dtype=np.int64) - first[req]  # index of the batch within its request
    left = sizes[req] - pos * max_batch
    bsize = np.where(accel[req], sizes[req], np.minimum(left, max_batch))
    cls = np.where(accel[req], ACCEL, CPU).astype(np.int8)
    return Plan(np.asarray(arrivals, dtype=np.float64), sizes, req, bsize.astype(np.int64), cls, first,
                float(duration_s))
