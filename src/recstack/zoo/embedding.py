"""Embedding backends and the feature-processing step that feeds them.

Three backends give the same outputs from the same weights:

* ``torch``: one ``nn.EmbeddingBag`` (sum) per pooled table, ``nn.Embedding``
  per sequence table; inputs are per-table (indices, offsets).
* ``torchrec``: TorchRec ``EmbeddingBagCollection`` (pooled) and
  ``EmbeddingCollection`` (sequence) fed by ``KeyedJaggedTensor``s. Unsharded,
  TorchRec also runs one embedding_bag per table.
* ``tbe``: FBGEMM table-batched embeddings: the training kernel
  (``SplitTableBatchedEmbeddingBagsCodegen``) in train mode, the inference kernel
  (``IntNBitTableBatchedEmbeddingBagsCodegen``, fp32/fp16/int8 tables) in
  inference mode. One kernel call covers all tables of a group.

Each backend has a ``process`` function (raw IDs -> backend inputs: hashing
into table range, offsets, KJT construction) run inside the model's
``feature_processing`` module, and a ``forward`` that returns a dict
``table name -> tensor``: ``[B, dim]`` for pooled tables, ``[B, L, dim]``
(zero padded to the batch's longest sequence) for sequence tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from recstack.errors import ConfigError, RecstackError
from recstack.workload.batch import RawBatch
from recstack.zoo.config import Table

BACKENDS = ("torch", "torchrec", "tbe")
TABLE_DTYPES = ("fp32", "fp16", "int8")


def init_table_(weight: torch.Tensor, seed: int, index: int, rows: int) -> None:
    """Deterministic DLRM-style init, U(-1/sqrt(rows), 1/sqrt(rows)), per table (seed, index)."""
    g = torch.Generator(device="cpu")
    g.manual_seed(seed * 1_000_003 + index)
    bound = 1.0 / math.sqrt(rows)
    with torch.no_grad():
        # Fill in row chunks through a CPU staging buffer: bounded extra memory for huge tables.
        chunk = max(1, (1 << 24) // max(1, weight.shape[1]))
        for start in range(0, weight.shape[0], chunk):
            stop = min(weight.shape[0], start + chunk)
            buf = torch.empty((stop - start, weight.shape[1]), dtype=torch.float32)
            buf.uniform_(-bound, bound, generator=g)
            weight[start:stop].copy_(buf)


def hash_ids(values: torch.Tensor, rows: int) -> torch.Tensor:
    """Raw (possibly 64-bit) IDs into [0, rows): the remainder, identity for in-range IDs."""
    return torch.remainder(values, rows)


def lengths_to_offsets(lengths: torch.Tensor) -> torch.Tensor:
    """Exclusive prefix sum with a trailing total: ``[0, l0, l0+l1, ...]`` (int64)."""
    out = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
    torch.cumsum(lengths, dim=0, out=out[1:])
    return out


def pad_sequences(flat: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[sum(lengths), D] -> [B, max(lengths), D], zero padded."""
    b = lengths.numel()
    max_len = int(lengths.max()) if b else 0
    out = flat.new_zeros((b, max_len, flat.shape[-1]))
    if flat.numel():
        mask = torch.arange(max_len, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)
        out[mask] = flat
    return out


@dataclass
class Processed:
    """Backend inputs produced by feature processing, plus sequence lengths for the model."""

    inputs: Any
    seq_lengths: dict[str, torch.Tensor]
    batch_size: int


class EmbeddingBackend(nn.Module):
    """Base: holds the resolved tables; subclasses implement process/forward/table weights."""

    name = "base"

    def __init__(self, tables: list[Table]) -> None:
        super().__init__()
        self.tables = list(tables)
        self.pooled = [t for t in tables if t.kind == "pooled"]
        self.sequence = [t for t in tables if t.kind == "sequence"]
        self.supports_inference_mode = True
        self.sparse_grads = False
        self.fused_optimizer = False

    # feature processing -------------------------------------------------
    def _hashed(self, batch: RawBatch, t: Table) -> tuple[torch.Tensor, torch.Tensor]:
        try:
            feat = batch.sparse[t.feature]
        except KeyError:
            raise RecstackError(
                f"batch has no feature {t.feature!r} (table {t.name}); the workload must provide it"
            ) from None
        return hash_ids(feat.values, t.rows), feat.lengths

    def process(self, batch: RawBatch) -> Processed:  # pragma: no cover - abstract
        raise NotImplementedError

    def table_weights(self) -> dict[str, torch.Tensor]:  # pragma: no cover - abstract
        """fp32 views of each table's weights (for init and comparison)."""
        raise NotImplementedError

    def init_weights(self, seed: int) -> None:
        weights = self.table_weights()
        for i, t in enumerate(self.tables):
            init_table_(weights[t.name], seed, i, t.rows)


class TorchEmbeddings(EmbeddingBackend):
    name = "torch"

    def __init__(self, tables: list[Table], *, sparse: bool = True, device: str | torch.device = "cpu") -> None:
        super().__init__(tables)
        self.sparse_grads = sparse
        # _weight: allocate without the default N(0, 1) init (init_weights fills every row once).
        self.bags = nn.ModuleDict(
            {
                t.name: nn.EmbeddingBag(
                    t.rows, t.dim, mode="sum", sparse=sparse, _weight=torch.empty((t.rows, t.dim), device=device)
                )
                for t in self.pooled
            }
        )
        self.seqs = nn.ModuleDict(
            {
                t.name: nn.Embedding(t.rows, t.dim, sparse=sparse, _weight=torch.empty((t.rows, t.dim), device=device))
                for t in self.sequence
            }
        )

    def process(self, batch: RawBatch) -> Processed:
        inputs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        seq_lengths: dict[str, torch.Tensor] = {}
        for t in self.pooled:
            ids, lengths = self._hashed(batch, t)
            inputs[t.name] = (ids, lengths_to_offsets(lengths)[:-1])
        for t in self.sequence:
            ids, lengths = self._hashed(batch, t)
            inputs[t.name] = (ids, lengths)
            seq_lengths[t.name] = lengths
        return Processed(inputs, seq_lengths, batch.batch_size)

    def forward(self, processed: Processed) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for name, bag in self.bags.items():
            ids, offsets = processed.inputs[name]
            out[name] = bag(ids, offsets)
        for name, emb in self.seqs.items():
            ids, lengths = processed.inputs[name]
            out[name] = pad_sequences(emb(ids), lengths)
        return out

    def table_weights(self) -> dict[str, torch.Tensor]:
        w = {n: m.weight.data for n, m in self.bags.items()}
        w.update({n: m.weight.data for n, m in self.seqs.items()})
        return w


def _require_torchrec() -> Any:
    try:
        import torchrec  # noqa: F401
        from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    except Exception as exc:  # ImportError, or an fbgemm load failure
        raise RecstackError(
            f"backend 'torchrec' needs TorchRec and fbgemm-gpu-cpu ({exc.__class__.__name__}: {exc}); "
            "run `make setup` or `pip install recstack[torchrec]`, or use --backend torch"
        ) from None
    return KeyedJaggedTensor


class TorchRecEmbeddings(EmbeddingBackend):
    name = "torchrec"

    def __init__(self, tables: list[Table], *, device: str | torch.device = "cpu") -> None:
        super().__init__(tables)
        kjt_cls = _require_torchrec()
        from torchrec.modules.embedding_configs import EmbeddingBagConfig, EmbeddingConfig, PoolingType
        from torchrec.modules.embedding_modules import EmbeddingBagCollection, EmbeddingCollection

        self._kjt = kjt_cls
        self.sparse_grads = False
        dev = torch.device(device)
        self.ebc = (
            EmbeddingBagCollection(
                tables=[
                    EmbeddingBagConfig(
                        name=t.name,
                        embedding_dim=t.dim,
                        num_embeddings=t.rows,
                        feature_names=[t.name],
                        pooling=PoolingType.SUM,
                    )
                    for t in self.pooled
                ],
                device=dev,
            )
            if self.pooled
            else None
        )
        self.ec = (
            EmbeddingCollection(
                tables=[
                    EmbeddingConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.rows, feature_names=[t.name])
                    for t in self.sequence
                ],
                device=dev,
            )
            if self.sequence
            else None
        )

    def _kjt_of(self, batch: RawBatch, tables: list[Table]) -> Any:
        ids, lens = zip(*(self._hashed(batch, t) for t in tables), strict=True)
        return self._kjt.from_lengths_sync(
            keys=[t.name for t in tables], values=torch.cat(ids), lengths=torch.cat(lens)
        )

    def process(self, batch: RawBatch) -> Processed:
        pooled = self._kjt_of(batch, self.pooled) if self.pooled else None
        seq = self._kjt_of(batch, self.sequence) if self.sequence else None
        seq_lengths = {t.name: batch.sparse[t.feature].lengths for t in self.sequence}
        return Processed((pooled, seq), seq_lengths, batch.batch_size)

    def forward(self, processed: Processed) -> dict[str, torch.Tensor]:
        pooled, seq = processed.inputs
        out: dict[str, torch.Tensor] = {}
        if self.ebc is not None:
            out.update(self.ebc(pooled).to_dict())
        if self.ec is not None:
            for name, jt in self.ec(seq).items():
                out[name] = pad_sequences(jt.values(), processed.seq_lengths[name])
        return out

    def table_weights(self) -> dict[str, torch.Tensor]:
        w: dict[str, torch.Tensor] = {}
        if self.ebc is not None:
            w.update({n: m.weight.data for n, m in self.ebc.embedding_bags.items()})
        if self.ec is not None:
            w.update({n: m.weight.data for n, m in self.ec.embeddings.items()})
        return w


def _require_fbgemm() -> None:
    try:
        import fbgemm_gpu  # noqa: F401
    except Exception as exc:
        raise RecstackError(
            f"backend 'tbe' needs fbgemm-gpu-cpu ({exc.__class__.__name__}: {exc}); "
            "run `make setup` or `pip install recstack[torchrec]`, or use --backend torch"
        ) from None


class TBEEmbeddings(EmbeddingBackend):
    """FBGEMM table-batched embeddings: one group for pooled tables, one for sequence tables.

    ``mode='train'`` uses the training kernel with a fused optimizer (the update
    happens inside backward; there is no separate optimizer step for tables).
    ``mode='inference'`` uses the inference kernel, which stores tables as
    fp32, fp16 or int8 (row-wise scale and bias) and runs under inference_mode.
    The training kernel on CPU cannot run under inference_mode, only no_grad.
    """

    name = "tbe"

    def __init__(
        self,
        tables: list[Table],
        *,
        mode: str = "inference",
        table_dtype: str = "fp32",
        optimizer: str = "sgd",
        learning_rate: float = 0.01,
    ) -> None:
        super().__init__(tables)
        _require_fbgemm()
        from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
        from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
            IntNBitTableBatchedEmbeddingBagsCodegen,
        )
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice,
            SplitTableBatchedEmbeddingBagsCodegen,
        )

        if table_dtype not in TABLE_DTYPES:
            raise ConfigError(f"must be one of {', '.join(TABLE_DTYPES)} (got {table_dtype!r})", field="table_dtype")
        if mode == "train" and table_dtype != "fp32":
            raise ConfigError("fp16/int8 tables are inference-only; use fp32 with --mode train", field="table_dtype")
        if self.sequence and len({t.dim for t in self.sequence}) > 1:
            raise ConfigError("tbe sequence tables must share one dim", field="tables")
        self.mode = mode
        self.table_dtype = table_dtype
        self.supports_inference_mode = mode == "inference"
        self.fused_optimizer = mode == "train"
        self.optimizer = optimizer
        groups = {"pooled": (self.pooled, PoolingMode.SUM), "sequence": (self.sequence, PoolingMode.NONE)}
        self.groups = nn.ModuleDict()
        for gname, (tabs, pooling) in groups.items():
            if not tabs:
                continue
            if mode == "train":
                opt = {"sgd": EmbOptimType.EXACT_SGD, "adagrad": EmbOptimType.EXACT_ROWWISE_ADAGRAD}[optimizer]
                self.groups[gname] = SplitTableBatchedEmbeddingBagsCodegen(
                    [(t.rows, t.dim, EmbeddingLocation.HOST, ComputeDevice.CPU) for t in tabs],
                    optimizer=opt,
                    learning_rate=learning_rate,
                    pooling_mode=pooling,
                )
            else:
                st = {"fp32": SparseType.FP32, "fp16": SparseType.FP16, "int8": SparseType.INT8}[table_dtype]
                tbe = IntNBitTableBatchedEmbeddingBagsCodegen(
                    [(t.name, t.rows, t.dim, st, EmbeddingLocation.HOST) for t in tabs],
                    device="cpu",
                    pooling_mode=pooling,
                    output_dtype=SparseType.FP32,
                )
                tbe.initialize_weights()  # allocates; init_weights fills every row
                self.groups[gname] = tbe

    def process(self, batch: RawBatch) -> Processed:
        inputs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        idx_dtype = torch.int64 if self.mode == "train" else torch.int32
        for gname, tabs in (("pooled", self.pooled), ("sequence", self.sequence)):
            if not tabs:
                continue
            ids, lens = zip(*(self._hashed(batch, t) for t in tabs), strict=True)
            lengths = torch.cat(lens)
            inputs[gname] = (torch.cat(ids).to(idx_dtype), lengths_to_offsets(lengths).to(idx_dtype))
        seq_lengths = {t.name: batch.sparse[t.feature].lengths for t in self.sequence}
        return Processed(inputs, seq_lengths, batch.batch_size)

    def forward(self, processed: Processed) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        b = processed.batch_size
        if "pooled" in self.groups:
            ids, offsets = processed.inputs["pooled"]
            flat = self.groups["pooled"](ids, offsets)  # [B, sum(dims)]
            start = 0
            for t in self.pooled:
                out[t.name] = flat[:, start : start + t.dim]
                start += t.dim
            assert flat.shape[0] == b
        if "sequence" in self.groups:
            ids, offsets = processed.inputs["sequence"]
            flat = self.groups["sequence"](ids, offsets)  # [total ids, dim]
            start = 0
            for t in self.sequence:
                lengths = processed.seq_lengths[t.name]
                n = int(lengths.sum())
                out[t.name] = pad_sequences(flat[start : start + n], lengths)
                start += n
        return out

    def table_weights(self) -> dict[str, torch.Tensor]:
        if self.mode != "inference" or self.table_dtype == "fp32":
            w: dict[str, torch.Tensor] = {}
            for gname, tabs in (("pooled", self.pooled), ("sequence", self.sequence)):
                if gname in self.groups:
                    splits = self.groups[gname].split_embedding_weights()
                    for t, s in zip(tabs, splits, strict=True):
                        ws = s[0] if isinstance(s, tuple) else s
                        w[t.name] = ws.view(torch.float32) if ws.dtype == torch.uint8 else ws
            return w
        raise RecstackError("fp32 weight views exist only for fp32 tables")

    def init_weights(self, seed: int) -> None:
        if self.mode != "inference" or self.table_dtype == "fp32":
            super().init_weights(seed)
            return
        # fp16 / int8: initialise in fp32 (as the other backends), then quantise row by row.
        index = {t.name: i for i, t in enumerate(self.tables)}
        for gname, tabs in (("pooled", self.pooled), ("sequence", self.sequence)):
            if gname not in self.groups:
                continue
            for t, (w, sb) in zip(tabs, self.groups[gname].split_embedding_weights(), strict=True):
                ref = torch.empty((t.rows, t.dim), dtype=torch.float32)
                init_table_(ref, seed, index[t.name], t.rows)
                if self.table_dtype == "fp16":
                    w.view(torch.float16)[:, : t.dim].copy_(ref.half())
                else:
                    lo = ref.min(dim=1).values
                    hi = ref.max(dim=1).values
                    scale = ((hi - lo) / 255.0).clamp_min(1e-12)
                    q = torch.round((ref - lo[:, None]) / scale[:, None]).clamp(0, 255).to(torch.uint8)
                    w[:, : t.dim].copy_(q)
                    sbh = sb.view(torch.float16)
                    sbh[:, 0].copy_(scale.half())
                    sbh[:, 1].copy_(lo.half())


def make_backend(
    name: str,
    tables: list[Table],
    *,
    mode: str = "inference",
    table_dtype: str = "fp32",
    optimizer: str = "sgd",
    learning_rate: float = 0.01,
    device: str | torch.device = "cpu",
) -> EmbeddingBackend:
    if name == "torch":
        if table_dtype != "fp32":
            raise ConfigError("fp16/int8 tables need --backend tbe", field="table_dtype")
        return TorchEmbeddings(tables, sparse=True, device=device)
    if name == "torchrec":
        if table_dtype != "fp32":
            raise ConfigError("fp16/int8 tables need --backend tbe", field="table_dtype")
        return TorchRecEmbeddings(tables, device=device)
    if name == "tbe":
        return TBEEmbeddings(
            tables, mode=mode, table_dtype=table_dtype, optimizer=optimizer, learning_rate=learning_rate
        )
    raise ConfigError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}", field="--backend")


class FeatureProcessing(nn.Module):
    """The model's feature-processing stage: raw IDs -> backend inputs (hash, offsets, KJT)."""

    def __init__(self, backend: EmbeddingBackend) -> None:
        super().__init__()
        # A plain attribute, not a submodule: the tables belong to the embedding stage.
        object.__setattr__(self, "_backend", backend)

    def forward(self, batch: RawBatch) -> Processed:
        return self._backend.process(batch)


def table_stats(backend: EmbeddingBackend, batch: RawBatch, *, table_dtype: str = "fp32") -> list[dict[str, Any]]:
    """Per-table figures of one batch (computed from the hashed indices, outside timed passes).

    lookups: IDs looked up; unique_rows: distinct rows touched (a direct count);
    bytes_requested = lookups x row bytes; bytes_unique = unique_rows x row bytes;
    row bytes = dim x element size (+4 bytes of scale/bias per int8 row).
    """
    elem = {"fp32": 4, "fp16": 2, "int8": 1}[table_dtype]
    rows_out = []
    b = max(1, batch.batch_size)
    for t in backend.tables:
        ids, lengths = backend._hashed(batch, t)
        row_bytes = t.dim * elem + (4 if table_dtype == "int8" else 0)
        lookups = int(ids.numel())
        unique = int(torch.unique(ids).numel()) if lookups else 0
        rows_out.append(
            {
                "table": t.name,
                "feature": t.feature,
                "kind": t.kind,
                "rows": t.rows,
                "dim": t.dim,
                "dtype": table_dtype,
                "row_bytes": row_bytes,
                "table_bytes": t.rows * row_bytes,
                "lookups": lookups,
                "unique_rows": unique,
                "bytes_requested": lookups * row_bytes,
                "bytes_unique": unique * row_bytes,
                "pooling_factor": lookups / b,
                "reuse": (lookups / unique) if unique else None,
            }
        )
    return rows_out
