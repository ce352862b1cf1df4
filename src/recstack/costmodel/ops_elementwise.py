"""Elementwise ops, activations, their backward kernels and the ``_foreach_`` optimizer ops.

One formula for all of them: ``ops = k * N`` where N is the output's element
count and k the op's arithmetic per element (table below; a transcendental
function such as exp, log, tanh, erf or sqrt counts 1); bytes: every tensor
input read once at its own size (a broadcast input is not re-read), the
output written once (in-place ops: ``self`` is read and written). An
``alpha``/``value`` scalar other than 1 adds one multiply per element.
Sparse COO operands of ``add``/``add_`` (sparse gradients) touch only their
nnz rows.
"""

from __future__ import annotations

import math

from recstack.costmodel import dtypes
from recstack.costmodel.meta import Call, TensorMeta, broadcast_shape, iter_tensors, result_dtype
from recstack.costmodel.registry import Formula, OpCost, make_cost, register

# ops per output element
UNARY: dict[str, float] = {
    "abs": 1, "neg": 1, "reciprocal": 1, "sqrt": 1, "rsqrt": 1, "exp": 1, "exp2": 1, "expm1": 1,
    "log": 1, "log2": 1, "log10": 1, "log1p": 1, "sin": 1, "cos": 1, "tan": 1, "tanh": 1, "atan": 1,
    "asin": 1, "acos": 1, "sinh": 1, "cosh": 1, "erf": 1, "erfc": 1, "erfinv": 1, "sign": 1, "sgn": 1,
    "floor": 1, "ceil": 1, "round": 1, "trunc": 1, "frac": 1, "square": 1, "bitwise_not": 1,
    "logical_not": 1, "isnan": 1, "isinf": 1, "isfinite": 1, "signbit": 1, "positive": 0,
    "relu": 1, "relu6": 2, "sigmoid": 4, "log_sigmoid": 5, "silu": 5, "mish": 7, "gelu": 5,
    "hardtanh": 2, "hardsigmoid": 3, "hardswish": 4, "leaky_relu": 2, "elu": 4, "selu": 5,
    "celu": 4, "softplus": 4, "softshrink": 2, "hardshrink": 2, "logit": 3, "threshold": 1,
    "clamp_min": 1, "clamp_max": 1, "nan_to_num": 3, "prelu": 2, "rrelu": 2,
}
BINARY: dict[str, float] = {
    "add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "true_divide": 1, "floor_divide": 2,
    "remainder": 4, "fmod": 4, "pow": 1, "float_power": 1, "atan2": 1, "maximum": 1, "minimum": 1,
    "fmax": 1, "fmin": 1, "copysign": 1, "hypot": 3, "xlogy": 2, "ldexp": 2,
    "eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1, "logical_and": 1, "logical_or": 1,
    "logical_xor": 1, "bitwise_and": 1, "bitwise_or": 1, "bitwise_xor": 1, "bitwise_left_shift": 1,
    "bitwise_right_shift": 1, "__and__": 1, "__or__": 1, "__xor__": 1, "__lshift__": 1, "__rshift__": 1,
}
TERNARY: dict[str, float] = {
    "where": 1, "addcmul": 3, "addcdiv": 3, "lerp": 3, "masked_fill": 1,
}
BACKWARD: dict[str, float] = {
    "threshold_backward": 1, "sigmoid_backward": 3, "tanh_backward": 3, "gelu_backward": 9,
    "silu_backward": 7, "hardtanh_backward": 2, "leaky_relu_backward": 2, "elu_backward": 4,
    "softplus_backward": 5, "hardsigmoid_backward": 2, "hardswish_backward": 4, "mish_backward": 10,
    "log_sigmoid_backward": 5, "logit_backward": 4, "rrelu_with_noise_backward": 2,
}
COMPARE = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
           "isnan", "isinf", "isfinite", "signbit"}
ALPHA_OPS = {"add", "sub", "rsub"}
VALUE_OPS = {"addcmul", "addcdiv"}


def _base(packet: str) -> tuple[str, bool]:
    op = packet.split("::", 1)[1]
    if op.endswith("_") and not op.endswith("__"):
        return op[:-1], True
    return op, False


def elementwise(call: Call, k: float) -> OpCost | None:
    """Generic elementwise cost (see the module docstring)."""
    op, inplace = _base(call.name)
    ins = call.inputs()
    if not ins:
        return None
    if any(t.sparse_nnz is not None for t in ins):
        return _sparse_add(call, ins, inplace)
    out = call.out(0) or call.out_kwarg()
    if inplace:
        out = ins[0]
    scalars = [a for a in (*call.args, *call.kwargs.values()) if isinstance(a, (int, float)) and not isinstance(a, bool)]
    compute = result_dtype(ins, scalars)
    if out is None:
        dt = dtypes.BOOL if op in COMPARE else compute
        out = TensorMeta(broadcast_shape([t.shape for t in ins]), dt)
    n = out.numel
    ops = k * n
    if op in ALPHA_OPS and call.kwargs.get("alpha", call.arg(2) if op == "rsub" else 1) not in (1, 1.0, None):
        ops += n
    if op in VALUE_OPS and call.kwargs.get("value", 1) not in (1, 1.0):
        ops += n
    if op == "div" and call.kwargs.get("rounding_mode") is not None:
        ops += n
    if op == "gelu" and call.kwargs.get("approximate") == "tanh":
        ops = 9 * n
    read = sum(t.nbytes for t in ins)
    return make_cost(ops, compute, read, out.nbytes, kind="elementwise")


def _sparse_add(call: Call, ins: list[TensorMeta], inplace: bool) -> OpCost | None:
    """``dense.add_(sparse)`` touches the sparse operand's nnz rows; ``sparse + sparse`` concatenates."""
    op, _ = _base(call.name)
    if op not in ("add", "sub"):
        return None
    dense = [t for t in ins if t.sparse_nnz is None]
    sparse = [t for t in ins if t.sparse_nnz is not None]
    alpha = call.kwargs.get("alpha", 1)
    if not dense:  # sparse + sparse: indices and values are concatenated, no arithmetic
        written = call.out(0).nbytes if call.out(0) is not None else sum(t.nbytes for t in sparse)
        return OpCost(0.0, float(sum(t.nbytes for t in sparse)), float(written), {"kind": "copy"})
    d = dense[0]
    n = sum((t.sparse_nnz or 0) * math.prod(t.shape[t.sparse_dim :]) for t in sparse)
    ops = n * (2 if alpha not in (1, 1.0) else 1)
    touched = n * d.itemsize
    if inplace and ins[0].sparse_nnz is None:
        return make_cost(ops, d.dtype, sum(t.nbytes for t in sparse) + touched, touched, kind="elementwise")
    return make_cost(ops, d.dtype, sum(t.nbytes for t in ins), d.nbytes, kind="elementwise")


def _table_formula(k: float) -> Formula:
    def formula(call: Call) -> OpCost | None:
        return elementwise(call, k)

    return formula


def _register_table(table: dict[str, float], inplace: bool) -> None:
    for op, k in table.items():
        names = [f"aten::{op}"]
        if inplace and not op.endswith("_backward"):
            names.append(f"aten::{op}_")
        register(*names)(_table_formula(k))


@register("aten::clamp", "aten::clamp_", "aten::clip", "aten::clip_")
def clamp(call: Call) -> OpCost | None:
    """One compare per element per bound given (min, max or both)."""
    bounds = [call.arg(1, "min"), call.arg(2, "max")]
    return elementwise(call, max(1, sum(b is not None for b in bounds)))


_register_table(UNARY, True)
_register_table(BINARY, True)
_register_table(TERNARY, True)
_register_table(BACKWARD, False)


# --- _foreach_ (multi-tensor optimizer kernels) --------------------------------------

FOREACH: dict[str, float] = {
    "add": 1, "sub": 1, "mul": 1, "div": 1, "addcmul": 3, "addcdiv": 3, "lerp": 3, "sqrt": 1, "rsqrt": 1,
    "neg": 1, "abs": 1, "exp": 1, "log": 1, "reciprocal": 1, "sign": 1, "maximum": 1, "minimum": 1,
    "clamp_min": 1, "clamp_max": 1, "pow": 1, "zero": 0, "copy": 0, "norm": 2, "sigmoid": 4, "tanh": 1,
}


def _foreach(call: Call, k: float, inplace: bool) -> OpCost | None:
    lists = [a for a in (*call.args, *call.kwargs.values()) if isinstance(a, (list, tuple))
             and any(isinstance(x, TensorMeta) for x in a)]
    if not lists:
        return None
    selfs = [t for t in lists[0] if isinstance(t, TensorMeta)]
    n = sum(t.numel for t in selfs)
    read = sum(t.nbytes for lst in lists for t in iter_tensors(lst))
    read += sum(t.nbytes for t in iter_tensors([a for a in call.args if isinstance(a, TensorMeta)]))
    if k == 0 and inplace:  # _foreach_zero_ writes only; _foreach_copy_ reads src
        read = 0 if len(lists) == 1 else sum(t.nbytes for t in iter_tensors(lists[1]))
    if call.outputs:
        written = sum(o.nbytes for o in call.outputs if o is not None)
    else:
        written = sum(t.nbytes for t in selfs) if call.name != "aten::_foreach_norm" else 4 * len(selfs)
    alpha = call.kwargs.get("alpha", 1)
    ops = k * n + (n if alpha not in (1, 1.0) else 0)
    return make_cost(ops, selfs[0].dtype if selfs else None, read, written, kind="elementwise")


def _foreach_formula(k: float, inplace: bool) -> Formula:
    def formula(call: Call) -> OpCost | None:
        return _foreach(call, k, inplace)

    return formula


for _op, _k in FOREACH.items():
    register(f"aten::_foreach_{_op}_")(_foreach_formula(_k, True))
    if _op not in ("zero", "copy"):
        register(f"aten::_foreach_{_op}")(_foreach_formula(_k, False))
