"""Memory preflight: estimate a model's bytes before any table is allocated.

The preflight's figures come from :mod:`recstack.memory.predict` (:func:`estimate_config`), the model that
``recstack memory`` reports and benchmarks/bench_memory.py checks against measured steps (docs/memory.md);
:func:`estimate` below is the earlier closed form, kept for callers that pass tables and sizes directly.

The estimate covers the tables (in their storage dtype), and in training the
table gradients and optimizer state as each backend keeps them:

* torch backend: sparse gradients (bounded by the rows a step touches; we
  count one step's lookups x dim x 4 bytes); Adagrad keeps a dense fp32 state
  the size of each table.
* torchrec backend (unsharded EmbeddingBagCollection): dense gradients the
  size of each table; Adagrad adds a dense state of the same size.
* tbe backend (training kernel): the optimizer is fused into backward, so no
  table gradient is materialised; row-wise Adagrad keeps one fp32 per row.

Dense layers are counted at 4 bytes per parameter (x3 in training: weights,
gradients, optimizer state), and a fixed headroom covers the allocator and
small buffers.

The batch is counted too (:class:`BatchShape`, from the model's features and the
workload; all per-sample sizes are the workload's *mean* lengths, clamped to each
feature's ``max_length``, because a batch's total concentrates around the mean):

* input batches: the profiler generates ``NUM_BATCHES`` batches up front; each holds
  int64 IDs, int32 lengths per feature, float32 dense features and labels;
* the working set of one step: the int64 indices and offsets each table receives,
  and the activations (embedding outputs, sequence embeddings of ``mean length x dim``
  per sample, and every dense layer's outputs, 4 bytes each; in-batch retrieval models add their
  ``[B, B]`` score matrix; x3 in training for the saved forward values and their gradients).

The check compares the total against ``MemAvailable`` from /proc/meminfo and, when
it does not fit, names the ``--scale`` and ``--batch-size`` that would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from recstack.config.limits import USABLE_FRACTION, available_bytes, gib
from recstack.errors import MemoryPreflightError
from recstack.zoo.config import Table

HEADROOM_BYTES = 512 * 2**20
BYTES_PER_ELEM = {"fp32": 4, "fp16": 2, "int8": 1}
NUM_BATCHES = 4  # batches generated up front (api.profile's num_batches default)


@dataclass(frozen=True)
class BatchShape:
    """Per-sample sizes of a model's inputs and working set (workload mean lengths; see the module doc)."""

    ids: float  # raw IDs per sample, all features together
    lookups: float  # table lookups per sample (a feature may feed several tables)
    features: int  # sparse features
    tables: int
    dense: int  # dense input features
    tasks: int
    activations: float  # activation values per sample: embedding outputs and every dense layer's outputs
    pairwise: float = 0.0  # values per pair of samples (in-batch retrieval scores: [B, B])

    def input_bytes(self, batch_size: int, num_batches: int = NUM_BATCHES) -> int:
        """Bytes of ``num_batches`` generated batches: int64 IDs, int32 lengths, float32 dense and labels."""
        per_sample = self.ids * 8 + self.features * 4 + self.dense * 4 + self.tasks * 4
        return int(num_batches * batch_size * per_sample)

    def step_bytes(self, batch_size: int, mode: str) -> int:
        """Bytes of one step's working set: per-table int64 indices and offsets, and the activations."""
        per_sample = self.lookups * 8 + self.tables * 8 + self.activations * 4
        per_step = batch_size * per_sample + batch_size * batch_size * self.pairwise * 4
        return int(per_step * (3 if mode == "train" else 1))


@dataclass(frozen=True)
class MemoryEstimate:
    tables: int
    table_grads: int
    optimizer_state: int
    dense: int
    headroom: int
    batches: int = 0  # generated input batches
    activations: int = 0  # one step's indices, offsets and activations
    batch_size: int = 0
    grads_per_batch: bool = False  # table gradients grow with the batch (sparse gradients)
    ids_per_sample: float = 0.0  # the workload's mean IDs per sample (for the message)

    @property
    def total(self) -> int:
        return (
            self.tables + self.table_grads + self.optimizer_state + self.dense + self.headroom
            + self.batches + self.activations
        )

    @property
    def table_related(self) -> int:
        """Bytes that shrink with ``--scale``."""
        return self.tables + self.optimizer_state + (0 if self.grads_per_batch else self.table_grads)

    @property
    def batch_related(self) -> int:
        """Bytes that shrink with ``--batch-size``."""
        return self.batches + self.activations + (self.table_grads if self.grads_per_batch else 0)

    def to_dict(self) -> dict[str, int]:
        return {
            "tables": self.tables,
            "table_grads": self.table_grads,
            "optimizer_state": self.optimizer_state,
            "dense": self.dense,
            "headroom": self.headroom,
            "batches": self.batches,
            "activations": self.activations,
            "total": self.total,
        }


def table_storage_bytes(t: Table, table_dtype: str) -> int:
    per_row = t.dim * BYTES_PER_ELEM[table_dtype] + (4 if table_dtype == "int8" else 0)
    return t.rows * per_row


def estimate(
    tables: list[Table],
    *,
    dense_params: int,
    backend: str,
    mode: str,
    optimizer: str = "sgd",
    table_dtype: str = "fp32",
    batch_size: int = 1024,
    shape: BatchShape | None = None,
    num_batches: int = NUM_BATCHES,
) -> MemoryEstimate:
    """Bytes a model of ``tables`` needs for ``batch_size`` (the batch counted when ``shape`` is given)."""
    tbytes = sum(table_storage_bytes(t, table_dtype) for t in tables)
    grads = state = 0
    dense = dense_params * 4
    if mode == "train":
        dense *= 3
        full = sum(t.rows * t.dim * 4 for t in tables)
        if backend == "torch":
            grads = int(sum(t.pooling * batch_size * t.dim * 4 for t in tables))
            state = full if optimizer == "adagrad" else 0
        elif backend == "torchrec":
            grads = full
            state = full if optimizer == "adagrad" else 0
        else:  # tbe: fused optimizer, row-wise state
            state = sum(t.rows * 4 for t in tables) if optimizer == "adagrad" else 0
    batches = shape.input_bytes(batch_size, num_batches) if shape is not None else 0
    work = shape.step_bytes(batch_size, mode) if shape is not None else 0
    return MemoryEstimate(
        tbytes,
        grads,
        state,
        dense,
        HEADROOM_BYTES,
        batches=batches,
        activations=work,
        batch_size=batch_size,
        grads_per_batch=mode == "train" and backend == "torch",
        ids_per_sample=shape.ids if shape is not None else 0.0,
    )


def _two_digits_down(x: float) -> float:
    step = 10.0 ** (math.floor(math.log10(x)) - 1)  # two significant digits, rounded down
    return round(math.floor(x / step) * step, 12)


def check_fits(est: MemoryEstimate, *, model: str, scale: float, available: int | None = None) -> None:
    """Raise MemoryPreflightError if it does not fit, naming the bytes needed and a --scale / --batch-size that would."""
    avail = available_bytes() if available is None else available
    usable = avail * USABLE_FRACTION
    if est.total <= usable:
        return
    fixed = est.dense + est.headroom
    tables, batch = est.table_related, est.batch_related
    hints: list[str] = []
    if batch and est.batch_size and usable - fixed - tables > 0:
        fit_batch = int(est.batch_size * (usable - fixed - tables) / batch)
        if fit_batch >= 1:
            hints.append(f"--batch-size {fit_batch} or less")
    if tables and usable - fixed - batch > 0:
        hints.append(f"--scale {_two_digits_down(scale * (usable - fixed - batch) / tables):g} or less")
    if batch <= tables:
        hints.reverse()  # the larger part first
    parts = (
        f"tables {gib(est.tables)}, table gradients {gib(est.table_grads)}, optimizer state "
        f"{gib(est.optimizer_state)}, dense {gib(est.dense)}, batches {gib(est.batches)}, "
        f"activations {gib(est.activations)}, headroom {gib(est.headroom)}"
    )
    at = f"{model} at --scale {scale:g}" + (f", --batch-size {est.batch_size}" if est.batch_size else "")
    if not hints and est.batch_size and batch / est.batch_size > usable - fixed - tables:
        raise MemoryPreflightError(
            f"{at} needs {gib(est.total)} ({parts}) but only {gib(avail)} is available: even one sample of the "
            f"workload ({est.ids_per_sample:.3g} IDs per sample, mean) does not fit; lower the workload's pooling"
        )
    if not hints:
        raise MemoryPreflightError(
            f"{at} needs {gib(est.total)} ({parts}) but only {gib(avail)} is available, and neither a smaller "
            "--scale nor a smaller --batch-size alone would fit; free memory or use a smaller model"
        )
    raise MemoryPreflightError(
        f"{at} needs {gib(est.total)} ({parts}) but {gib(avail)} is available; use {' (or '.join(hints)}"
        + ")" * (len(hints) - 1)
    )


def estimate_config(cfg: Any, opts: Any, workload: Any = None, num_batches: int = NUM_BATCHES) -> MemoryEstimate:
    """The preflight's estimate from :mod:`recstack.memory.predict` (the model ``recstack memory`` reports).

    The prediction's resident bytes, input batches and step peak map onto the estimate's parts: tables (with
    FBGEMM's metadata), optimizer state, dense parameters with their buffers and (training) gradients, table
    gradients, the generated batches, and the rest of the step's peak as activations; plus the headroom.
    """
    from recstack.memory.predict import predict, shape_of

    shape = shape_of(cfg, workload)
    pred = predict(shape, backend=opts.backend, mode=opts.mode, optimizer=opts.optimizer,
                   table_dtype=opts.table_dtype, batch_size=opts.batch_size, num_batches=num_batches)
    by = {c.what: 0 for c in pred.consumers}
    for c in pred.consumers:
        by[c.what] += c.bytes
    r = pred.resident
    grads = by.get("table_gradients", 0)
    dense_grads = by.get("dense_gradients", 0)
    # tables' state by element; torch.optim's 4-byte step counters and the dense layers' state go with dense
    steps = 4 * len(shape.tables) if opts.mode == "train" and opts.optimizer != "sgd" and opts.backend != "tbe" else 0
    table_state = sum(c.bytes for c in pred.consumers if c.what == "optimizer_state" and c.stage == "embedding")
    return MemoryEstimate(
        r["tables"] + r["table_metadata"],
        grads,
        table_state - steps,
        r["dense_parameters"] + r["dense_buffers"] + dense_grads + r["optimizer_state"] - table_state + steps,
        HEADROOM_BYTES,
        batches=pred.inputs,
        activations=max(0, pred.step_peak - grads - dense_grads),
        batch_size=opts.batch_size,
        grads_per_batch=opts.mode == "train" and opts.backend == "torch",
        ids_per_sample=shape.ids_per_sample,
    )
