"""The analytic cost model: op name + input metadata -> FLOPs and bytes (see docs/cost-model.md).

    op_cost("aten::addmm", (bias, a, b))        # tensors (real or meta) or TensorMeta
    op_cost("aten::addmm.default", ...)        # overload names are accepted
    has_formula("fbgemm::bounds_check_indices")

Formulas live in the ``ops_*`` modules, grouped by family, and register
themselves on import; this module imports them all. Conventions: FLOPs count
floating-point arithmetic (integer arithmetic goes to ``extra['int_ops']``);
bytes are *compulsory* traffic: every input read once (gathers: only the
gathered part), every output written once, no cache or reuse modelling.
Views and metadata ops are covered with 0 FLOPs and 0 bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recstack.costmodel import ops_dense, ops_elementwise, ops_embedding, ops_memory, ops_rnn  # noqa: F401
from recstack.costmodel.meta import Call, TensorMeta, meta_of
from recstack.costmodel.registry import FORMULAS, PATTERNS, OpCost, lookup, split_name


def has_formula(name: str) -> bool:
    """Whether an op (``aten::addmm``, with or without overload) has a formula."""
    return lookup(split_name(name)[0]) is not None


def op_cost(
    name: str,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    outputs: Sequence[Any] | None = None,
) -> OpCost | None:
    """Cost of one call of op ``name`` with ``args``/``kwargs`` in schema order.

    Tensors may be real tensors (integer ones then also give their values:
    unique embedding rows, per-table offsets), meta tensors, or
    :class:`TensorMeta`. ``outputs`` (optional) are the returned tensors, used
    where the output size depends on data. Returns None when no formula
    covers the op or this particular call.
    """
    packet, overload = split_name(name)
    fn = lookup(packet)
    if fn is None:
        return None
    out_meta: tuple[TensorMeta, ...] | None = None
    if outputs is not None:
        out_meta = tuple(o for o in meta_of(tuple(outputs), keep_values=False) if isinstance(o, TensorMeta))
    kw = {k: meta_of(v) for k, v in (kwargs or {}).items()}
    call = Call(packet, tuple(meta_of(tuple(args))), kw, out_meta, overload)
    return fn(call)


def covered_ops() -> list[str]:
    """Every op name with an exact-name formula, plus the patterns of formula families."""
    return sorted(FORMULAS) + [p.pattern for p, _ in PATTERNS]


__all__ = ["Call", "OpCost", "TensorMeta", "covered_ops", "has_formula", "op_cost"]
