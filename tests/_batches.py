"""Hand-rolled raw batches for tests that must not depend on the workload generator."""

from __future__ import annotations

import torch

from recstack.workload.batch import RawBatch, SparseInput


def raw_batch(model, batch_size: int, seed: int = 0, id_factor: int = 3) -> RawBatch:
    """Random raw IDs beyond table range (exercises hashing), variable bags and sequences."""
    g = torch.Generator().manual_seed(seed)
    sparse = {}
    for f in model.features():
        if f.kind == "sequence":
            lens = torch.randint(1, (f.max_length or 8) + 1, (batch_size,), generator=g, dtype=torch.int32)
        elif f.fixed_length:
            lens = torch.full((batch_size,), int(f.pooling), dtype=torch.int32)
        else:
            lens = torch.randint(0, int(2 * f.pooling) + 1, (batch_size,), generator=g, dtype=torch.int32)
        ids = torch.randint(0, f.id_range * id_factor, (int(lens.sum()),), generator=g)
        sparse[f.name] = SparseInput(ids, lens)
    dense = torch.rand(batch_size, model.num_dense, generator=g) if model.num_dense else None
    labels = torch.randint(0, 2, (batch_size, model.num_tasks), generator=g).float()
    return RawBatch(dense, sparse, labels)
