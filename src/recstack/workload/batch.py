"""What a serving system receives, and what a model asks a workload for.

Contract between ``recstack.workload`` (which generates :class:`RawBatch`) and
``recstack.zoo`` (whose models turn a RawBatch into model inputs in their
``feature_processing`` stage, which is timed as part of the model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch


@dataclass(frozen=True)
class FeatureRequest:
    """One categorical feature a model reads.

    ``id_range``: raw IDs are drawn in ``[0, id_range)`` (the largest table the
    feature feeds); the model hashes them into each table's row range.
    ``pooling``: mean IDs per sample for a ``pooled`` feature (multi-hot bag), or
    the default length of a ``sequence`` feature. ``max_length`` caps sequences
    (and bags, when set). ``fixed_length``: the model needs exactly ``pooling``
    IDs per sample (e.g. a fixed 40-step sequence). ``side``: ``request`` for a
    feature of the request (user, context: the same for every candidate of a
    ranking request), ``candidate`` (the default) for a feature of the item scored.
    """

    name: str
    id_range: int
    pooling: float
    kind: Literal["pooled", "sequence"] = "pooled"
    max_length: int | None = None
    fixed_length: bool = False
    side: Literal["request", "candidate"] = "candidate"


@dataclass
class SparseInput:
    """One feature of a batch: raw int64 IDs, concatenated over samples, and per-sample lengths."""

    values: torch.Tensor  # int64 [sum(lengths)]
    lengths: torch.Tensor  # int32 [B]


@dataclass
class RawBatch:
    """A batch as a serving system receives it (before feature processing)."""

    dense: torch.Tensor | None  # float32 [B, num_dense] or None
    sparse: dict[str, SparseInput] = field(default_factory=dict)
    labels: torch.Tensor | None = None  # float32 [B, num_tasks], for training
    # Candidates per request (int64 [R], summing to B) when the rows are R ranking requests in order,
    # each request's candidates adjacent (recstack.workload.requests); None: independent samples.
    request_sizes: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        if self.dense is not None:
            return int(self.dense.shape[0])
        for feat in self.sparse.values():
            return int(feat.lengths.shape[0])
        if self.labels is not None:
            return int(self.labels.shape[0])
        return 0

    def num_ids(self) -> int:
        return int(sum(int(f.values.numel()) for f in self.sparse.values()))
