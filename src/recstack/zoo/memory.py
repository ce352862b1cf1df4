"""Memory preflight: estimate a model's bytes before any table is allocated.

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
gradients, optimizer state), and a fixed headroom covers activations and the
allocator. The check compares against ``MemAvailable`` from /proc/meminfo.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from recstack.errors import MemoryPreflightError
from recstack.zoo.config import Table

HEADROOM_BYTES = 512 * 2**20
USABLE_FRACTION = 0.9
BYTES_PER_ELEM = {"fp32": 4, "fp16": 2, "int8": 1}


@dataclass(frozen=True)
class MemoryEstimate:
    tables: int
    table_grads: int
    optimizer_state: int
    dense: int
    headroom: int

    @property
    def total(self) -> int:
        return self.tables + self.table_grads + self.optimizer_state + self.dense + self.headroom

    @property
    def table_related(self) -> int:
        return self.tables + self.table_grads + self.optimizer_state

    def to_dict(self) -> dict[str, int]:
        return {
            "tables": self.tables,
            "table_grads": self.table_grads,
            "optimizer_state": self.optimizer_state,
            "dense": self.dense,
            "headroom": self.headroom,
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
) -> MemoryEstimate:
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
    return MemoryEstimate(tbytes, grads, state, dense, HEADROOM_BYTES)


def available_bytes() -> int:
    """Memory a new allocation can use now: RECSTACK_MEMORY_LIMIT (bytes) if set, else MemAvailable."""
    limit = os.environ.get("RECSTACK_MEMORY_LIMIT")
    if limit:
        try:
            return int(float(limit))
        except ValueError:
            raise MemoryPreflightError(
                f"RECSTACK_MEMORY_LIMIT must be a number of bytes (got {limit!r})"
            ) from None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def check_fits(est: MemoryEstimate, *, model: str, scale: float, available: int | None = None) -> None:
    """Raise MemoryPreflightError (naming the bytes needed and a --scale that fits) if it does not fit."""
    avail = available_bytes() if available is None else available
    usable = avail * USABLE_FRACTION
    if est.total <= usable:
        return
    fixed = est.dense + est.headroom
    room = usable - fixed
    if room <= 0 or est.table_related == 0:
        raise MemoryPreflightError(
            f"{model} needs {gib(est.total)} but only {gib(avail)} is available, and even the dense layers "
            "do not fit; free memory or use a smaller model"
        )
    fit = scale * room / est.table_related
    step = 10.0 ** (math.floor(math.log10(fit)) - 1)  # two significant digits, rounded down
    fit = round(math.floor(fit / step) * step, 12)
    raise MemoryPreflightError(
        f"{model} at --scale {scale:g} needs {gib(est.total)} (tables {gib(est.tables)}, table gradients "
        f"{gib(est.table_grads)}, optimizer state {gib(est.optimizer_state)}, dense {gib(est.dense)}, "
        f"headroom {gib(est.headroom)}) but {gib(avail)} is available; use --scale {fit:g} or less"
    )
