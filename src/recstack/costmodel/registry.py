"""OpCost, the formula registry and name normalisation.

Formulas are registered by packet name (``aten::addmm``, ``fbgemm::bounds_check_indices``);
families whose members differ only by a name component (FBGEMM's
``split_embedding_backward_codegen_<optimizer>_<weighted>_pt2_wrapper``) are
registered by regular expression. A formula returns an :class:`OpCost`, or
None when the call is outside what it models (the op then counts as
uncovered for that call).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recstack.costmodel.meta import Call

Formula = Callable[[Call], "OpCost | None"]


@dataclass
class OpCost:
    """Work of one op call: FLOPs and compulsory bytes read and written.

    ``flops`` counts floating-point arithmetic (a fused multiply-add is 2);
    integer arithmetic (hashing, offsets) goes to ``extra['int_ops']``.
    ``extra`` holds op-specific figures (``matmul_flops``, ``lookups``,
    ``unique_rows``, ``unique_bytes``, ``kind`` ...); numeric ones add up
    when costs are summed.
    """

    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.bytes > 0 else None


FORMULAS: dict[str, Formula] = {}
PATTERNS: list[tuple[re.Pattern[str], Formula]] = []


def register(*names: str) -> Callable[[Formula], Formula]:
    """Register a formula under one or more packet names (``aten::add``)."""

    def deco(fn: Formula) -> Formula:
        for n in names:
            if n in FORMULAS:
                raise ValueError(f"formula for {n} registered twice")
            FORMULAS[n] = fn
        return fn

    return deco


def register_pattern(pattern: str) -> Callable[[Formula], Formula]:
    """Register a formula for every packet name that fully matches ``pattern``."""

    def deco(fn: Formula) -> Formula:
        PATTERNS.append((re.compile(pattern), fn))
        return fn

    return deco


def split_name(name: str) -> tuple[str, str]:
    """``aten::addmm.default`` / ``aten.addmm.default`` / ``aten::addmm`` -> (``aten::addmm``, overload)."""
    if "::" not in name and name.count(".") >= 1:
        ns, _, rest = name.partition(".")
        name = f"{ns}::{rest}"
    ns, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    return (f"{ns}::{op}" if ns and rest else name), overload


def lookup(packet: str) -> Formula | None:
    fn = FORMULAS.get(packet)
    if fn is not None:
        return fn
    for pat, f in PATTERNS:
        if pat.fullmatch(packet):
            return f
    return None


def make_cost(ops: float, dtype: Any, read: float, written: float, **extra: Any) -> OpCost:
    """An OpCost whose ``ops`` arithmetic operations run in ``dtype``.

    Floating/complex (or unknown) dtype: they are FLOPs; integer or bool: they
    go to ``extra['int_ops']`` and ``flops`` stays 0.
    """
    flops = float(ops)
    if ops and dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        extra["int_ops"] = float(extra.get("int_ops", 0.0)) + float(ops)
        flops = 0.0
    return OpCost(flops, float(read), float(written), extra)
