"""The input pool: batches generated before the timed run (generation is too slow to do per request).

For each batch size a worker serves, :data:`~recstack.serving.worker.POOL_SLOTS`
batches are the first ``size`` samples of full-size base batches (prefix views:
no copies), so a worker holds ``slots`` base batches whatever the number of sizes.
"""

from __future__ import annotations

from typing import Any

from recstack.workload.batch import RawBatch, SparseInput


def head(batch: RawBatch, n: int) -> RawBatch:
    """The first ``n`` samples of ``batch`` (views of its tensors)."""
    sparse = {}
    for name, f in batch.sparse.items():
        lengths = f.lengths[:n]
        sparse[name] = SparseInput(values=f.values[: int(lengths.sum())], lengths=lengths)
    return RawBatch(
        dense=None if batch.dense is None else batch.dense[:n],
        sparse=sparse,
        labels=None if batch.labels is None else batch.labels[:n],
    )


def build_pool(bound: Any, sizes: tuple[int, ...] | list[int], slots: int) -> dict[int, list[RawBatch]]:
    """``slots`` batches per size, prefixes of ``slots`` batches of the largest size (seeded by the workload)."""
    top = max(sizes)
    base = [bound.batch(top, i) for i in range(slots)]
    return {int(s): [head(b, int(s)) for b in base] for s in sizes}


def to_device(batch: RawBatch, device: str) -> RawBatch:
    """The batch on ``device`` (cpu: unchanged)."""
    return batch if device == "cpu" else batch.to(device)
