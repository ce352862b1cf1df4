"""The cost model on an imported tree: each op priced from the call signatures the trace recorded.

With ``record_shapes`` every op event carries ``Input Dims`` and ``Input
type``; each distinct signature of an op (at most 16 per op node, as the tree
keeps) is priced once by the op's formula (:mod:`recstack.costmodel`) on
:class:`TensorMeta` inputs and weighted by its calls. What a trace does not
hold stays unknown: scalar arguments that ``Concrete Inputs`` does not give,
index values (no unique rows: requested bytes only), the dtype of a tensor
list's members (taken as fp32). Calls beyond the signatures kept are
unpriced (``uncovered_calls_share``). Sites, sums and coverage are those of a
live profile (:func:`recstack.costmodel.attach.attach_priced_costs`). Nothing here imports torch: the
recorded C++ type names map to :mod:`recstack.costmodel.dtypes` (:data:`DTYPES`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from recstack.costmodel import dtypes
from recstack.costmodel.attach import attach_priced_costs
from recstack.costmodel.formulas import TensorMeta, op_cost
from recstack.costmodel.sums import CostSum
from recstack.traceimport.fold import Folded
from recstack.tree import Node

# The C++ type names torch.profiler records in ``Input type`` (no torch needed to price them).
DTYPES = {"float": dtypes.FLOAT32, "double": dtypes.FLOAT64, "c10::Half": dtypes.FLOAT16,
          "c10::BFloat16": dtypes.BFLOAT16, "long int": dtypes.INT64, "int": dtypes.INT32, "short int": dtypes.INT16,
          "signed char": dtypes.INT8, "unsigned char": dtypes.UINT8, "bool": dtypes.BOOL}
LIST_DTYPE = dtypes.FLOAT32  # a TensorList's members: the trace gives their shapes only


def _is_shape(d: Any) -> bool:
    return isinstance(d, list) and all(isinstance(x, int) and x >= 0 for x in d)


def scalar(text: Any, kind: str) -> Any:
    """A ``Concrete Inputs`` entry as a value: ``True``/``False``, an int, a float, a JSON list
    (``ScalarList``); None when it is none of these (parsed as data, never evaluated)."""
    if not isinstance(text, str) or not text:
        return None
    if text in ("True", "False"):
        return text == "True"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if kind == "ScalarList":
        try:
            v = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return None
        return v if isinstance(v, list) and all(isinstance(x, (int, float)) for x in v) else None
    return None


def call_args(dims: list, types: list, values: list) -> tuple[Any, ...]:
    """Positional arguments as a formula sees them: tensors as TensorMeta, scalars from ``Concrete
    Inputs``, anything else None."""
    args: list[Any] = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        if t in DTYPES and _is_shape(d):
            args.append(TensorMeta(tuple(d), DTYPES[t]))
        elif t == "TensorList" and isinstance(d, list) and all(_is_shape(x) for x in d):
            args.append([TensorMeta(tuple(x), LIST_DTYPE) for x in d])
        else:
            args.append(scalar(values[i] if i < len(values) else None, t))
    return tuple(args)


def price_tree(root: Node, folded: Folded) -> dict[str, Any]:
    """Attach per-step costs to ``root`` (built from ``folded``); returns the ``cost_model`` summary."""
    steps = max(len(folded.steps.starts), 1)
    cache: dict[tuple[str, int], Any] = {}
    errors = 0

    def cost(name: str, sig: int) -> Any:
        nonlocal errors
        key = (name, sig)
        if key not in cache:
            dims, types, values = folded.signatures[sig]
            try:
                cache[key] = op_cost(name, call_args(dims, types, values))
            except Exception:  # a formula that needs what the trace lacks (a scalar argument)
                cache[key] = None
                errors += 1
        return cache[key]

    def priced(node: Node) -> CostSum | None:
        counts = folded.signature_counts.get(node.path)
        if not counts:
            return None
        acc = CostSum(calls=node.calls)
        covered = 0
        for sig, n in counts.items():
            c = cost(node.name, sig)
            if c is None:
                continue
            covered += n
            acc.flops += c.flops * n / steps
            acc.bytes_read += c.bytes_read * n / steps
            acc.bytes_written += c.bytes_written * n / steps
            for k, v in c.extra.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    acc.extra[k] = acc.extra.get(k, 0.0) + float(v) * n / steps
        acc.covered_calls = min(node.calls, round(covered / steps))
        return acc

    summary = attach_priced_costs(root, priced)
    summary["formula_errors"] = errors
    for n in root.walk():
        if n.level == "op" and n.uncovered and n.path not in folded.signature_counts:
            n.uncovered_reason = "no recorded shapes (record with record_shapes=True)"
    return summary
