"""Embedding-cache sizing: miss-ratio curves of a table's row stream, LRU and LFU, set-associative as FBGEMM.

FBGEMM's TBE software cache (``EmbeddingLocation.MANAGED_CACHING``) is set-associative with
``DEFAULT_ASSOC = 32`` ways (64 on ROCm; fbgemm_gpu/fbgemm_gpu/tbe/cache/cache_config.py), a row going to
set ``hash(row) % sets``; it evicts by LRU or LFU. Here:

* :func:`stack_distances` -- one pass over the stream (a Fenwick tree over access times) gives every access's
  LRU stack distance; a fully associative LRU cache of C rows misses exactly the accesses whose distance is
  >= C (or that are first touches), so one pass gives the whole curve (:func:`lru_curve_fully_associative`);
* :func:`simulate` -- set-associative LRU or LFU, vectorised over the sets with numpy: a run of accesses to
  one row within its set's sub-stream is one step (it misses at most on its first access under LRU; under
  LFU until the row's count beats the set's least frequent), and step k handles the k-th run of every set
  at once, so the Python loop runs (runs per set) times, not once per access;
* :func:`simulate_exact` -- the straightforward per-access simulation (dicts), the reference for tests;
* :func:`miss_ratio_curve` and :func:`size_for_hit_rate` -- curves over cache sizes and the smallest
  size (rows, a multiple of the ways) that reaches a target hit rate.

LFU follows FBGEMM's rule: frequencies are counted per row over the whole stream (not reset on eviction);
on a miss into a full set the row replaces the set's least frequent row only if it is more frequent.
Cold misses (first touches) count as misses everywhere.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from recstack.errors import ConfigError

ASSOC = 32  # FBGEMM's DEFAULT_ASSOC on CUDA
POLICIES = ("lru", "lfu")
_MIX = np.uint64(0x9E3779B97F4A7C15)


def set_of(rows: np.ndarray, sets: int) -> np.ndarray:
    """The set of each row: a multiplicative hash (scatters neighbouring IDs) modulo ``sets``."""
    h = (rows.astype(np.uint64) * _MIX) >> np.uint64(17)
    return (h % np.uint64(sets)).astype(np.int64)


def _check(stream: np.ndarray) -> np.ndarray:
    a = np.asarray(stream)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        raise ConfigError("an index stream is a 1-D array of integer row IDs", field="stream")
    if a.size and a.min() < 0:
        raise ConfigError("row IDs must be >= 0", field="stream")
    return a.astype(np.int64, copy=False)


def stack_distances(stream: np.ndarray) -> np.ndarray:
    """LRU stack distance of every access (distinct rows touched since the row's last access); -1: first touch."""
    s = _check(stream)
    n = s.size
    _, inv = np.unique(s, return_inverse=True)
    last = np.full(int(inv.max()) + 1 if n else 0, -1, dtype=np.int64)
    prev = np.empty(n, dtype=np.int64)
    for i, r in enumerate(inv.tolist()):  # previous access time of each access
        prev[i] = last[r]
        last[r] = i
    tree = [0] * (n + 1)
    out = np.full(n, -1, dtype=np.int64)
    marked = 0
    for i, p in enumerate(prev.tolist()):
        if p >= 0:
            # marks (last accesses of distinct rows) after p: all marks minus those at or before p
            j, before = p + 1, 0
            while j > 0:
                before += tree[j]
                j -= j & -j
            out[i] = marked - before
            j = p + 1
            while j <= n:
                tree[j] -= 1
                j += j & -j
            marked -= 1
        j = i + 1
        while j <= n:
            tree[j] += 1
            j += j & -j
        marked += 1
    return out


def lru_curve_fully_associative(stream: np.ndarray, sizes: list[int]) -> list[float]:
    """Miss ratio of a fully associative LRU cache of each size (rows), from one stack-distance pass."""
    d = stack_distances(stream)
    if not d.size:
        return [0.0 for _ in sizes]
    finite = np.sort(d[d >= 0])
    return [1.0 - float(np.searchsorted(finite, c, side="left")) / d.size for c in sizes]


def simulate(stream: np.ndarray, size: int, *, policy: str = "lru", ways: int = ASSOC) -> float:
    """Miss ratio of a ``size``-row cache with ``ways``-way sets (``size // ways`` sets), vectorised over sets."""
    s = _check(stream)
    if policy not in POLICIES:
        raise ConfigError(f"must be one of {', '.join(POLICIES)} (got {policy!r})", field="policy")
    if not s.size:
        return 0.0
    ways = max(1, min(ways, size))
    sets = max(1, size // ways)
    sid = set_of(s, sets)
    order = np.argsort(sid, kind="stable")
    rows_o, sets_o = s[order], sid[order]
    # runs: consecutive accesses of one row within its set's sub-stream (no other access of the set between)
    n = s.size
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = (rows_o[1:] != rows_o[:-1]) | (sets_o[1:] != sets_o[:-1])
    first = np.flatnonzero(new_run)
    run_len = np.diff(np.append(first, n))
    run_row, run_set = rows_o[first], sets_o[first]
    run_f = None
    if policy == "lfu":  # the row's running count at the run's first access, in stream order
        _, inv = np.unique(s, return_inverse=True)
        occ = np.empty(n, dtype=np.int64)
        by_row = np.argsort(inv, kind="stable")
        group = np.searchsorted(inv[by_row], inv[by_row])  # first position of each access's row group
        occ[by_row] = np.arange(n) - group + 1
        run_f = occ[order][first]
    counts = np.bincount(run_set, minlength=sets)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(first.size) - np.repeat(starts, counts)  # k: position of each run within its set
    by_k = np.argsort(rank, kind="stable")  # runs grouped by k, each group's sets distinct
    bounds = np.searchsorted(rank[by_k], np.arange(int(rank.max()) + 2))
    rows_k, sets_k, len_k = run_row[by_k], run_set[by_k], run_len[by_k]
    f_k = run_f[by_k] if run_f is not None else None
    tags = np.full((sets, ways), -1, dtype=np.int64)
    stamp = np.zeros((sets, ways), dtype=np.int64)  # LRU: last use; LFU: frequency of the cached row
    misses = 0
    for k in range(len(bounds) - 1):
        lo, hi = bounds[k], bounds[k + 1]
        if lo == hi:
            continue
        st, rw, ln = sets_k[lo:hi], rows_k[lo:hi], len_k[lo:hi]
        line = tags[st]
        match = line == rw[:, None]
        hit = match.any(axis=1)
        if policy == "lru":  # a run misses at most once, on its first access
            misses += int((~hit).sum())
            way = np.where(hit, match.argmax(axis=1), stamp[st].argmin(axis=1))
            tags[st, way] = rw
            stamp[st, way] = k + 1
            continue
        assert f_k is not None
        f = f_k[lo:hi]
        last = f + ln - 1
        hw = match.argmax(axis=1)
        stamp[st[hit], hw[hit]] = last[hit]
        victim = stamp[st].argmin(axis=1)
        empty = line[np.arange(line.shape[0]), victim] == -1
        m = stamp[st, victim]
        # a missing row enters at the first access of its run whose count beats the set's least frequent row
        enter = np.where(empty, 1, np.maximum(1, m - f + 2))
        take = ~hit & (enter <= ln)
        misses += int(np.where(take, enter, ln)[~hit].sum())
        tags[st[take], victim[take]] = rw[take]
        stamp[st[take], victim[take]] = last[take]
    return misses / s.size


def simulate_exact(stream: np.ndarray, size: int, *, policy: str = "lru", ways: int = ASSOC) -> float:
    """The same cache simulated access by access (the reference for :func:`simulate`)."""
    s = _check(stream)
    if not s.size:
        return 0.0
    ways = max(1, min(ways, size))
    sets = max(1, size // ways)
    sid = set_of(s, sets).tolist()
    lines: list[OrderedDict[int, int]] = [OrderedDict() for _ in range(sets)]
    freq: dict[int, int] = {}
    misses = 0
    for r, st in zip(s.tolist(), sid, strict=True):
        line = lines[st]
        freq[r] = freq.get(r, 0) + 1
        if r in line:
            if policy == "lru":
                line.move_to_end(r)
            else:
                line[r] = freq[r]
            continue
        misses += 1
        if len(line) < ways:
            line[r] = freq[r]
            continue
        if policy == "lru":
            line.popitem(last=False)
            line[r] = freq[r]
        else:
            victim = min(line, key=lambda x: line[x])  # the first least frequent way, as argmin
            if freq[r] > line[victim]:
                del line[victim]
                line[r] = freq[r]
    return misses / s.size


@dataclass
class Curve:
    policy: str
    ways: int
    sizes: list[int]
    miss_ratio: list[float]

    def size_for_hit_rate(self, target: float) -> int | None:
        """The smallest size on the curve whose hit rate reaches ``target`` (None: none does)."""
        for size, m in zip(self.sizes, self.miss_ratio, strict=True):
            if 1.0 - m >= target - 1e-12:
                return size
        return None


def default_sizes(stream: np.ndarray, ways: int = ASSOC, points: int = 12) -> list[int]:
    """Cache sizes from one set to the stream's distinct rows, geometric, multiples of ``ways``."""
    distinct = int(np.unique(_check(stream)).size)
    top = max(ways, -(-distinct // ways) * ways)
    sizes = np.unique(np.round(np.geomspace(ways, top, points) / ways).astype(np.int64) * ways)
    return [int(x) for x in sizes]


def miss_ratio_curve(stream: np.ndarray, *, policy: str = "lru", ways: int = ASSOC,
                     sizes: list[int] | None = None) -> Curve:
    sizes = sizes or default_sizes(stream, ways)
    return Curve(policy, ways, list(sizes), [simulate(stream, c, policy=policy, ways=ways) for c in sizes])


def size_for_hit_rate(stream: np.ndarray, target: float, *, policy: str = "lru", ways: int = ASSOC) -> int | None:
    """The smallest cache (rows, a multiple of ``ways``) with hit rate >= ``target``, by bisection on sets.

    Hit rates of set-associative caches are not strictly monotone in the number of sets (the hash moves rows
    between sets), so the answer is the bisection's, checked to reach the target.
    """
    if not 0 < target < 1:
        raise ConfigError(f"must be in (0, 1) (got {target})", field="target")
    distinct = int(np.unique(_check(stream)).size)
    hi = max(1, -(-distinct // ways))
    if 1.0 - simulate(stream, hi * ways, policy=policy, ways=ways) < target:
        return None
    lo = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if 1.0 - simulate(stream, mid * ways, policy=policy, ways=ways) >= target:
            hi = mid
        else:
            lo = mid
    return hi * ways


def table_streams(model: Any, workload: str = "production", *, batch_size: int = 4096, batches: int = 4,
                  scale: float = 1.0, seed: int = 0) -> dict[str, np.ndarray]:
    """Each table's row stream (hashed IDs, in order) over ``batches`` batches of a workload spec (``model``: a
    zoo id, a model YAML or a ModelConfig)."""
    from recstack.workload import bind
    from recstack.workload.presets import load_workload
    from recstack.zoo.skeleton import resolve_config, skeleton

    cfg = resolve_config(model, scale)
    skel = skeleton(cfg)
    bound = bind(load_workload(workload), skel.features(), skel.num_dense, skel.num_tasks, seed=seed)
    parts: dict[str, list[np.ndarray]] = {t.name: [] for t in skel.tables}
    for i in range(batches):
        b = bound.batch(batch_size, i)
        for t in skel.tables:
            parts[t.name].append(np.remainder(b.sparse[t.feature].values.numpy(), t.rows))
    return {k: np.concatenate(v) for k, v in parts.items()}


def load_stream(path: str) -> np.ndarray:
    """A recorded index stream: ``.npy`` (an integer array) or text (one row ID per line)."""
    try:
        if path.endswith(".npy"):
            arr = np.load(path, allow_pickle=False)
        else:
            arr = np.loadtxt(path, dtype=np.int64, ndmin=1)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read an index stream from {path} ({exc})", field="stream") from None
    return _check(arr.ravel())


def table_cache_sizes(streams: dict[str, np.ndarray], target: float, *, row_bytes: dict[str, int] | None = None,
                      ways: int = ASSOC) -> list[dict[str, object]]:
    """Per table: lookups, distinct rows, and the LRU and LFU cache sizes (rows, bytes) for hit rate ``target``
    (None where even a cache of every distinct row misses more: first touches always miss)."""
    out: list[dict[str, object]] = []
    for name, s in streams.items():
        distinct = int(np.unique(s).size) if s.size else 0
        row: dict[str, object] = {"table": name, "lookups": int(s.size), "distinct_rows": distinct,
                                  "best_hit_rate": (1 - distinct / s.size) if s.size else None}
        for policy in POLICIES:
            rows = size_for_hit_rate(s, target, policy=policy, ways=ways) if s.size else None
            row[f"{policy}_rows"] = rows
            row[f"{policy}_bytes"] = None if rows is None or row_bytes is None else rows * row_bytes.get(name, 0)
        out.append(row)
    return out
