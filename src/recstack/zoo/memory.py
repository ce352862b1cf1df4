"""Memory preflight: refuse, before any table is allocated, a run that would not fit.

The estimate comes from :mod:`recstack.zoo.footprint.predict` (:func:`estimate_config`), the model that
``recstack memory`` reports and benchmarks/bench_memory.py checks against measured steps
(docs/memory.md): tables in their storage layout, optimizer state and gradients as each backend keeps
them, dense layers, the generated input batches and the step's peak; plus a fixed headroom for what
it does not count (allocator caching, the interpreter, libraries). :func:`check_fits` compares the total
with ``MemAvailable`` and, when it does not fit, names the ``--scale`` and ``--batch-size`` that would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from recstack.config.limits import USABLE_FRACTION, available_bytes, gib
from recstack.errors import MemoryPreflightError

HEADROOM_BYTES = 512 * 2**20
NUM_BATCHES = 4  # batches generated up front (api.profile's num_batches default)


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
    """The preflight's estimate from :mod:`recstack.zoo.footprint.predict` (the model ``recstack memory`` reports).

    The prediction's resident bytes, input batches and step peak map onto the estimate's parts: tables (with
    FBGEMM's metadata), optimizer state, dense parameters with their buffers and (training) gradients, table
    gradients, the generated batches, and the rest of the step's peak as activations; plus the headroom.
    """
    from recstack.zoo.footprint.predict import predict, shape_of

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
