"""Fast, vectorised categorical-ID sampling: skewed rank distributions and hot-row scattering.

A feature's IDs are drawn in two steps:

1. a *rank* in ``[0, support)`` from a :class:`RankDistribution` (rank 0 is the
   hottest row): exact probabilities for the first ranks (explicit heavy
   hitters, then up to :data:`HEAD_RANKS` ranks of the Zipf-like law), and a
   continuous inverse-CDF for the tail (density proportional to
   ``(x + 0.5 + q) ** -s`` over ``x`` in ``[head, support)``; rank
   ``k = floor(x)`` so rank ``k`` (1-based ``k+1``) gets ``~(k + 1 + q) ** -s``);
2. a *row* in ``[0, id_range)``: the rank is scattered over the whole table by
   a seeded affine bijection ``row = (a * rank + b) mod id_range`` with
   ``gcd(a, id_range) = 1`` (O(1) memory), so hot rows are not clustered at low
   row ids.

Sampling inverts a tabulated quantile function: ``TABLE_CELLS`` equal-probability
cells, each holding a linear map from the position inside the cell to a
(continuous) rank. Cells inside one head rank, or holding exactly one boundary
between two head ranks, are exact; elsewhere the cell's ranks are equally likely
(the error is confined to ranks whose probability is below 1 / TABLE_CELLS).
Memory is O(TABLE_CELLS + HEAD_RANKS), independent of the table size; the cost
per ID is a few vectorised numpy passes over cache-sized chunks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

HEAD_RANKS = 1024  # ranks with exact probabilities for the Zipf-like law
TABLE_CELLS = 1 << 13  # cells of the tabulated quantile function (128 KiB per feature: stays in cache)
CHUNK = 1 << 14  # IDs processed per vectorised pass (fits in L2 with the work buffers)
FLOAT_SCATTER_MAX = 1 << 24  # id ranges up to this scatter in float64 (exact); larger ones use int64 mod
UNIFORM_FLOAT_MAX = 1 << 40  # uniform IDs up to this range are floor(u * range); larger use integer draws
_INT64_MAX = (1 << 63) - 1


def _tail_integral(y0: float, y1: np.ndarray | float, s: float) -> np.ndarray:
    """Integral of y**-s from y0 to y1 (y0 > 0), stable for s near 1."""
    t = 1.0 - s
    log_ratio = np.log(np.asarray(y1, dtype=np.float64) / y0)
    if t == 0.0:
        return log_ratio
    return (y0**t) * np.expm1(t * log_ratio) / t


def _tail_inverse(y0: float, y1: float, s: float, v: np.ndarray) -> np.ndarray:
    """y in [y0, y1] such that the integral from y0 to y is the fraction ``v`` of the whole."""
    t = 1.0 - s
    log_ratio = math.log(y1 / y0)
    if t == 0.0:
        return y0 * np.exp(v * log_ratio)
    return y0 * np.exp(np.log1p(v * math.expm1(t * log_ratio)) / t)


@dataclass(frozen=True)
class RankDistribution:
    """Distribution over ranks ``[0, support)``: exact head masses plus a continuous tail.

    ``head``: absolute probabilities of ranks ``0 .. len(head)-1``; ``tail_mass``:
    probability of the ranks after the head, spread uniformly (``tail_s`` is None)
    or as ``(x + 0.5 + tail_q) ** -tail_s`` over ``x`` in ``[len(head), support)``.
    """

    support: int
    head: np.ndarray
    tail_mass: float
    tail_s: float | None
    tail_q: float

    # -- construction ---------------------------------------------------------------------------------
    @staticmethod
    def uniform(support: int) -> RankDistribution:
        return RankDistribution(int(support), np.zeros(0), 1.0, None, 0.0)

    @staticmethod
    def zipf(support: int, s: float, q: float = 0.0, hot: list[float] | None = None) -> RankDistribution:
        """``P(rank k) ~ (k + 1 + q) ** -s`` for 0-based k; optional explicit ``hot`` masses for the first ranks.

        With ``hot``, the first ``len(hot)`` ranks take exactly those probabilities and
        the rest of the mass follows the Zipf-like law over the later ranks (ranks keep
        their position: the first tail rank is ``len(hot)``).
        """
        support = int(support)
        hot_arr = np.asarray(hot or [], dtype=np.float64)[:support]
        if hot_arr.size and hot_arr.sum() > 1.0:
            hot_arr = hot_arr / hot_arr.sum()
        rest = max(0.0, 1.0 - float(hot_arr.sum()))
        h0 = hot_arr.size
        n_exact = min(support - h0, HEAD_RANKS)
        ks = np.arange(h0 + 1, h0 + n_exact + 1, dtype=np.float64)
        exact = (ks + q) ** (-s)
        y0 = h0 + n_exact + 0.5 + q
        y1 = support + 0.5 + q
        tail_raw = float(_tail_integral(y0, y1, s)) if support > h0 + n_exact else 0.0
        total = float(exact.sum()) + tail_raw
        if total <= 0.0 or rest == 0.0:
            return RankDistribution(support, hot_arr / max(float(hot_arr.sum()), 1e-300), 0.0, s, q)
        head = np.concatenate([hot_arr, rest * exact / total])
        return RankDistribution(support, head, rest * tail_raw / total, s, q)

    @staticmethod
    def heavy_hitters_uniform(support: int, hot: list[float]) -> RankDistribution:
        """Explicit hot masses for the first ranks, the rest spread uniformly over the later ranks."""
        support = int(support)
        hot_arr = np.asarray(hot, dtype=np.float64)[:support]
        if hot_arr.sum() > 1.0 or support == hot_arr.size:
            hot_arr = hot_arr / hot_arr.sum()
        rest = max(0.0, 1.0 - float(hot_arr.sum()))
        return RankDistribution(support, hot_arr, rest if support > hot_arr.size else 0.0, None, 0.0)

    # -- queries --------------------------------------------------------------------------------------
    @property
    def is_uniform(self) -> bool:
        return self.head.size == 0 and self.tail_s is None

    def _tail_fraction(self, x: np.ndarray) -> np.ndarray:
        """Share of the tail mass below continuous position x (x in [len(head), support])."""
        h = self.head.size
        x = np.clip(x, h, self.support)
        if self.tail_s is None:
            return (x - h) / max(self.support - h, 1)
        y0 = h + 0.5 + self.tail_q
        y1 = self.support + 0.5 + self.tail_q
        return _tail_integral(y0, x + 0.5 + self.tail_q, self.tail_s) / _tail_integral(y0, y1, self.tail_s)

    def top_share(self, k: int | np.ndarray) -> np.ndarray:
        """Probability mass of the ``k`` hottest ranks."""
        k = np.asarray(k, dtype=np.float64)
        cum = np.concatenate([[0.0], np.cumsum(self.head)])
        h = self.head.size
        head_part = cum[np.clip(k, 0, h).astype(np.int64)]
        if self.tail_mass <= 0.0 or self.support <= h:
            return head_part
        return head_part + np.where(k > h, self.tail_mass * self._tail_fraction(k), 0.0)

    def pmf(self, ranks: np.ndarray) -> np.ndarray:
        """Probability of individual (0-based) ranks (exact in the head, integrated over the cell in the tail)."""
        ranks = np.asarray(ranks, dtype=np.int64)
        return self.top_share(ranks + 1) - self.top_share(ranks)

    # -- sampling table -------------------------------------------------------------------------------
    def quantile_table(self, cells: int = TABLE_CELLS) -> tuple[np.ndarray, np.ndarray]:
        """(base, slope): rank position = base[c] + f * slope[c] for cell c and fraction f in [0, 1)."""
        u = np.arange(cells + 1, dtype=np.float64) / cells
        h = self.head.size
        cum = np.concatenate([[0.0], np.cumsum(self.head)])
        p_head = float(cum[-1])
        x = np.empty_like(u)
        in_head = u < p_head
        if h:
            k = np.clip(np.searchsorted(cum, u[in_head], side="right") - 1, 0, h - 1)
            mass = np.maximum(self.head[k], 1e-300)
            x[in_head] = k + np.clip((u[in_head] - cum[k]) / mass, 0.0, 1.0)
        tail = ~in_head
        if self.tail_mass > 0 and self.support > h:
            v = np.clip((u[tail] - p_head) / self.tail_mass, 0.0, 1.0)
            if self.tail_s is None:
                x[tail] = h + v * (self.support - h)
            else:
                y0 = h + 0.5 + self.tail_q
                y1 = self.support + 0.5 + self.tail_q
                x[tail] = _tail_inverse(y0, y1, self.tail_s, v) - 0.5 - self.tail_q
        else:
            x[tail] = max(h, 1) - 1e-9
        base = x[:-1].copy()
        slope = np.diff(x)
        if h > 1:
            # Exact cells: one boundary between head ranks k-1 and k at fraction phi of the cell.
            bounds = cum[1:h]
            pos = bounds * cells
            cell = np.minimum(pos.astype(np.int64), cells - 1)
            phi = pos - cell
            per_cell = np.bincount(cell, minlength=cells)
            one = (per_cell[cell] == 1) & (phi > 0) & ((cell + 1) / cells <= p_head)
            ks = np.arange(1, h)[one]
            sl = 1.0 - 1e-9
            base[cell[one]] = ks - phi[one] * sl
            slope[cell[one]] = sl
        return base, slope


def affine_params(id_range: int, rng: np.random.Generator) -> tuple[int, int]:
    """A seeded bijection ``row = (a * rank + b) mod id_range`` with gcd(a, id_range) = 1.

    ``a`` is drawn around 0.3-0.7 of the range (consecutive ranks land far apart) and
    capped so that ``a * (id_range - 1) + b`` fits in int64; for ranges above ~3e9
    this makes ``a`` smaller than the range (still co-prime, still spreading hot rows).
    """
    n = int(id_range)
    if n <= 2:
        return 1, int(rng.integers(0, n)) if n > 1 else 0
    limit = min(n - 1, (_INT64_MAX - (n - 1)) // (n - 1))
    lo = max(1, int(limit * 0.3)) if limit == n - 1 else max(1, limit // 2)
    hi = max(lo, int(limit * 0.7)) if limit == n - 1 else limit
    a = int(rng.integers(lo, hi + 1))
    while math.gcd(a, n) != 1:
        a = a + 1 if a < limit else 1
    b = int(rng.integers(0, n))
    return a, b


class IdSampler:
    """Draws raw int64 IDs in ``[0, id_range)`` from a rank distribution and an optional affine scatter."""

    def __init__(self, dist: RankDistribution, id_range: int, scatter: tuple[int, int] | None) -> None:
        self.dist = dist
        self.id_range = int(id_range)
        self.scatter = scatter
        self._table: np.ndarray | None = None
        if not dist.is_uniform:
            base, slope = dist.quantile_table()
            self._table = np.ascontiguousarray(np.stack([base, slope], axis=1))  # (cells, 2)

    def draw(
        self, rng: np.random.Generator, n: int, work: Workspace | None = None, out: np.ndarray | None = None
    ) -> np.ndarray:
        """``n`` IDs (int64), written into ``out`` when given (a contiguous int64 array of length n).

        ``work`` provides reusable chunk buffers; the cost is a handful of vectorised
        passes per CHUNK of IDs, independent of the table size.
        """
        n = int(n)
        if out is None:
            out = np.empty(n, dtype=np.int64)
        elif out.shape != (n,) or out.dtype != np.int64:
            raise ValueError(f"out must be an int64 array of shape ({n},), got {out.dtype} {out.shape}")
        work = work or Workspace()
        support = self.dist.support
        if self._table is None:
            self._draw_uniform(rng, out, work)
            if self.scatter is not None and support < self.id_range:
                self._scatter_int(out)
            return out
        table = self._table
        cells = float(table.shape[0])
        top = float(support - 1)
        float_scatter = self.scatter is not None and self.id_range <= FLOAT_SCATTER_MAX
        alpha = beta = rows = 0.0
        if float_scatter:
            a, b = self.scatter  # type: ignore[misc]
            alpha = a / self.id_range
            beta = (b + 0.5) / self.id_range
            rows = float(self.id_range)
        for start in range(0, n, CHUNK):
            m = min(CHUNK, n - start)
            u, idx, x, g, pair = work.u[:m], work.idx[:m], work.x[:m], work.g[:m], work.pair[:m]
            rng.random(out=u)
            u *= cells
            np.floor(u, out=g)
            u -= g  # position inside the cell, in [0, 1)
            np.copyto(idx, g, casting="unsafe")
            np.take(table, idx, axis=0, out=pair)  # (base, slope) of each cell: one gather
            u *= pair[:, 1]
            np.add(pair[:, 0], u, out=x)
            if float_scatter:
                np.floor(x, out=x)
                np.minimum(x, top, out=x)
                # (a*r + b) mod N in float64: exact while N**2 * 2**-52 << 0.5 (N <= FLOAT_SCATTER_MAX).
                x *= alpha
                x += beta
                np.floor(x, out=g)
                x -= g
                x *= rows
            else:
                np.minimum(x, top, out=x)  # x >= 0: the int conversion truncates = floors
            np.copyto(out[start : start + m], x, casting="unsafe")
        if self.scatter is not None and not float_scatter:
            self._scatter_int(out)
        return out

    def _draw_uniform(self, rng: np.random.Generator, out: np.ndarray, work: Workspace) -> None:
        support = self.dist.support
        n = out.shape[0]
        if support > UNIFORM_FLOAT_MAX:
            for start in range(0, n, CHUNK):
                m = min(CHUNK, n - start)
                np.copyto(out[start : start + m], rng.integers(0, support, m, dtype=np.int64))
            return
        # floor(u * support) with 53-bit u: relative bias below support / 2**53.
        top = float(support - 1)
        for start in range(0, n, CHUNK):
            m = min(CHUNK, n - start)
            u = work.u[:m]
            rng.random(out=u)
            u *= float(support)
            np.minimum(u, top, out=u)
            np.copyto(out[start : start + m], u, casting="unsafe")

    def _scatter_int(self, ranks: np.ndarray) -> None:
        a, b = self.scatter  # type: ignore[misc]
        for start in range(0, ranks.shape[0], CHUNK):
            seg = ranks[start : start + CHUNK]
            seg *= a
            seg += b
            seg %= self.id_range


class Workspace:
    """Reusable float/int chunk buffers for :meth:`IdSampler.draw` (one per thread / batch call)."""

    def __init__(self) -> None:
        self.u = np.empty(CHUNK, dtype=np.float64)
        self.x = np.empty(CHUNK, dtype=np.float64)
        self.g = np.empty(CHUNK, dtype=np.float64)
        self.idx = np.empty(CHUNK, dtype=np.intp)
        self.pair = np.empty((CHUNK, 2), dtype=np.float64)
