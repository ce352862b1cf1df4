"""Request-aware batches: R ranking requests x their candidates, as a serving system receives them.

A ranking request scores one user against C candidates. Its request-side
features (``side: request``: user profile, behaviour sequence) are the same for
all C candidates; its candidate-side features differ per candidate. A
request-aware batch has ``sum(C_r)`` rows, request ``r``'s candidates adjacent
and in request order, request-side values repeated on every row of their
request (``RawBatch.request_sizes`` holds the ``C_r``).

Rows come from the bound workload's own batch of ``sum(C_r)`` samples: each
request's request-side values are those of its first row, repeated; candidate
rows keep their own values. So the distributions of every feature are the
workload's, and batch ``index`` depends only on ``(seed, index)``.
"""

from __future__ import annotations

import numpy as np
import torch

from recstack.errors import ConfigError
from recstack.workload.batch import RawBatch, SparseInput
from recstack.workload.generate import BoundWorkload


def select_rows(feature: SparseInput, rows: torch.Tensor) -> SparseInput:
    """The jagged rows ``rows`` (int64 indices, repeats allowed) of a feature, as a new SparseInput."""
    lengths = feature.lengths.to(torch.int64)
    n = lengths.numel()
    if n and feature.values.numel() % n == 0 and bool((lengths == feature.values.numel() // n).all()):
        # Fixed length L: the values are an [n, L] matrix; select its rows.
        vals = feature.values.view(n, -1).index_select(0, rows).reshape(-1)
        return SparseInput(values=vals, lengths=feature.lengths.index_select(0, rows))
    starts = torch.cumsum(lengths, 0) - lengths
    sel_len = lengths[rows]
    total = int(sel_len.sum())
    # Position of every output value: its row's start in the source plus its offset within the row.
    out_starts = torch.cumsum(sel_len, 0) - sel_len
    within = torch.arange(total, dtype=torch.int64) - torch.repeat_interleave(out_starts, sel_len)
    src = torch.repeat_interleave(starts[rows], sel_len) + within
    return SparseInput(values=feature.values[src].clone(), lengths=feature.lengths[rows].clone())


def first_rows(sizes: torch.Tensor) -> torch.Tensor:
    """Index of each request's first row (int64 [R]) in a request-ordered batch."""
    return torch.cumsum(sizes, 0) - sizes


def expand_index(sizes: torch.Tensor) -> torch.Tensor:
    """Request of every row (int64 [sum(sizes)]): ``[0]*C_0 + [1]*C_1 + ...``."""
    return torch.repeat_interleave(torch.arange(sizes.numel(), dtype=torch.int64), sizes)


def candidate_sizes(bound: BoundWorkload, requests: int, candidates: int | None, index: int) -> torch.Tensor:
    """Candidates per request: ``candidates`` for each, or (None) drawn from the spec's query sizes."""
    if requests < 1:
        raise ConfigError(f"must be >= 1 (got {requests})", field="requests")
    if candidates is None:
        return torch.from_numpy(np.asarray(bound.query_sizes(requests, rng_seed=index), dtype=np.int64))
    if candidates < 1:
        raise ConfigError(f"must be >= 1 (got {candidates})", field="candidates")
    return torch.full((requests,), int(candidates), dtype=torch.int64)


def request_batch(bound: BoundWorkload, requests: int, candidates: int | None = None, index: int = 0) -> RawBatch:
    """Batch ``index`` of ``requests`` ranking requests with ``candidates`` each (None: the query sizes)."""
    sizes = candidate_sizes(bound, requests, candidates, index)
    base = bound.batch(int(sizes.sum()), index)
    rows = first_rows(sizes)[expand_index(sizes)]  # each row's request's first row
    sides = {f.name: f.side for f in bound.features}
    sparse: dict[str, SparseInput] = {}
    for name, feat in base.sparse.items():
        # Every tensor gets its own storage (the workload's features share one ID buffer).
        sparse[name] = select_rows(feat, rows) if sides[name] == "request" else SparseInput(
            values=feat.values.clone(), lengths=feat.lengths.clone()
        )
    dense = base.dense
    if dense is not None:
        dense = dense[rows].clone() if bound.spec.dense.side == "request" else dense.clone()
    return RawBatch(dense=dense, sparse=sparse, labels=base.labels, request_sizes=sizes)


__all__ = ["candidate_sizes", "expand_index", "first_rows", "request_batch", "select_rows"]
