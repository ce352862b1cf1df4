"""Matrix multiplies, reductions, softmax, normalisation, dropout and losses.

Matrix multiply: ``2*M*N*K`` FLOPs (a multiply and an add per term),
recorded also as ``extra['matmul_flops']``; ``addmm``-style bias adds one FLOP
per output element (plus one more for each of ``alpha``/``beta`` not equal to
1). Bytes: each operand read once, the output written once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from recstack.costmodel import dtypes
from recstack.costmodel.dtypes import DType, is_dtype
from recstack.costmodel.meta import Call, TensorMeta, broadcast_shape, result_dtype
from recstack.costmodel.ops_elementwise import elementwise
from recstack.costmodel.registry import OpCost, make_cost, register


def _mm_cost(a: TensorMeta, b: TensorMeta, out_shape: tuple[int, ...], mnk: tuple[int, int, int], batch: int,
             extra_ops: float = 0.0, extra_read: int = 0) -> OpCost:
    m, n, k = mnk
    mm = 2.0 * batch * m * n * k
    dtype = result_dtype([a, b])
    out_bytes = math.prod(out_shape) * dtype.itemsize
    cost = make_cost(mm + extra_ops, dtype, a.nbytes + b.nbytes + extra_read, out_bytes, kind="matmul")
    if cost.flops:
        cost.extra["matmul_flops"] = mm
    return cost


def _scale_ops(call: Call, n_out: int, beta_pos: int, alpha_pos: int, bias: TensorMeta | None) -> float:
    beta = call.arg(beta_pos, "beta", 1)
    alpha = call.arg(alpha_pos, "alpha", 1)
    ops = 0.0
    if bias is not None and beta != 0:
        ops += n_out  # the add
        if beta not in (1, 1.0):
            ops += n_out
    if alpha not in (1, 1.0):
        ops += n_out
    return ops


@register("aten::mm")
def mm(call: Call) -> OpCost | None:
    a, b = call.tensor(0, "self"), call.tensor(1, "mat2")
    if a is None or b is None:
        return None
    m, k = a.shape
    n = b.shape[1]
    return _mm_cost(a, b, (m, n), (m, n, k), 1)


@register("aten::addmm", "aten::addmm_", "aten::_addmm_activation")
def addmm(call: Call) -> OpCost | None:
    """``beta*self + alpha*(mat1 @ mat2)``: 2MNK + MN for the bias add (+MN per non-unit scale)."""
    bias, a, b = call.tensor(0, "self"), call.tensor(1, "mat1"), call.tensor(2, "mat2")
    if a is None or b is None:
        return None
    m, k = a.shape
    n = b.shape[1]
    extra = _scale_ops(call, m * n, 3, 4, bias)
    if call.name == "aten::_addmm_activation":
        extra += m * n  # relu / gelu epilogue, counted as 1 per element
    return _mm_cost(a, b, (m, n), (m, n, k), 1, extra, bias.nbytes if bias is not None else 0)


@register("aten::bmm")
def bmm(call: Call) -> OpCost | None:
    a, b = call.tensor(0, "self"), call.tensor(1, "mat2")
    if a is None or b is None:
        return None
    bt, m, k = a.shape
    n = b.shape[2]
    return _mm_cost(a, b, (bt, m, n), (m, n, k), bt)


@register("aten::baddbmm", "aten::baddbmm_")
def baddbmm(call: Call) -> OpCost | None:
    bias, a, b = call.tensor(0, "self"), call.tensor(1, "batch1"), call.tensor(2, "batch2")
    if a is None or b is None:
        return None
    bt, m, k = a.shape
    n = b.shape[2]
    extra = _scale_ops(call, bt * m * n, 3, 4, bias)
    return _mm_cost(a, b, (bt, m, n), (m, n, k), bt, extra, bias.nbytes if bias is not None else 0)


@register("aten::addbmm", "aten::addbmm_")
def addbmm(call: Call) -> OpCost | None:
    """Sum over the batch of products: 2*B*M*N*K, plus B*M*N adds to reduce the batch, plus the bias add."""
    bias, a, b = call.tensor(0, "self"), call.tensor(1, "batch1"), call.tensor(2, "batch2")
    if a is None or b is None:
        return None
    bt, m, k = a.shape
    n = b.shape[2]
    extra = _scale_ops(call, m * n, 3, 4, bias) + (bt - 1) * m * n
    return _mm_cost(a, b, (m, n), (m, n, k), bt, extra, bias.nbytes if bias is not None else 0)


@register("aten::dot", "aten::vdot", "aten::inner")
def dot(call: Call) -> OpCost | None:
    a, b = call.tensor(0, "self"), call.tensor(1, "tensor") or call.tensor(1, "other")
    if a is None or b is None:
        return None
    return _mm_cost(a, b, (), (1, 1, a.numel), 1)


@register("aten::mv", "aten::addmv", "aten::addmv_")
def mv(call: Call) -> OpCost | None:
    if call.name == "aten::mv":
        bias, a, v = None, call.tensor(0, "self"), call.tensor(1, "vec")
    else:
        bias, a, v = call.tensor(0, "self"), call.tensor(1, "mat"), call.tensor(2, "vec")
    if a is None or v is None:
        return None
    m, k = a.shape
    extra = _scale_ops(call, m, 3, 4, bias) if call.name != "aten::mv" else 0.0
    return _mm_cost(a, v, (m,), (m, 1, k), 1, extra, bias.nbytes if bias is not None else 0)


@register("aten::outer", "aten::ger", "aten::addr", "aten::addr_")
def outer(call: Call) -> OpCost | None:
    """Outer product: one multiply per output element (addr: plus the bias add)."""
    if call.name in ("aten::addr", "aten::addr_"):
        bias, a, b = call.tensor(0, "self"), call.tensor(1, "vec1"), call.tensor(2, "vec2")
    else:
        bias, a, b = None, call.tensor(0, "self"), call.tensor(1, "vec2")
    if a is None or b is None:
        return None
    n_out = a.numel * b.numel
    extra = _scale_ops(call, n_out, 3, 4, bias) if bias is not None else 0.0
    dtype = result_dtype([a, b])
    read = a.nbytes + b.nbytes + (bias.nbytes if bias is not None else 0)
    return make_cost(n_out + extra, dtype, read, n_out * dtype.itemsize, kind="matmul")


def matmul_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, int, int], int]:
    """``torch.matmul`` semantics: (output shape, (M, N, K), batch count)."""
    if len(a) == 1 and len(b) == 1:
        return (), (1, 1, a[0]), 1
    a2 = (1, a[0]) if len(a) == 1 else a
    b2 = (b[0], 1) if len(b) == 1 else b
    m, k = a2[-2], a2[-1]
    n = b2[-1]
    batch_shape = broadcast_shape([a2[:-2], b2[:-2]])
    out = list(batch_shape) + ([m] if len(a) > 1 else []) + ([n] if len(b) > 1 else [])
    return tuple(out), (m, n, k), math.prod(batch_shape)


@register("aten::matmul")
def matmul(call: Call) -> OpCost | None:
    """``torch.matmul`` (CompositeImplicit: the counter sees its mm/bmm; this serves direct callers)."""
    a, b = call.tensor(0, "self"), call.tensor(1, "other")
    if a is None or b is None:
        return None
    out, mnk, batch = matmul_shapes(a.shape, b.shape)
    return _mm_cost(a, b, out, mnk, batch)


@register("aten::linear")
def linear(call: Call) -> OpCost | None:
    """``x @ W.T + b`` over every row of ``x``: 2*rows*N*K, plus rows*N for the bias."""
    x, w, bias = call.tensor(0, "input"), call.tensor(1, "weight"), call.tensor(2, "bias")
    if x is None or w is None:
        return None
    n, k = (w.shape[0], w.shape[1]) if w.ndim == 2 else (1, w.shape[0])
    rows = x.numel // max(1, k)
    out_shape = x.shape[:-1] + ((n,) if w.ndim == 2 else ())
    extra = float(rows * n) if bias is not None else 0.0
    return _mm_cost(x, w, out_shape, (rows, n, k), 1, extra, bias.nbytes if bias is not None else 0)


# --- reductions ---------------------------------------------------------------------


def _dims(v: Any, ndim: int) -> list[int]:
    if v is None or v == []:
        return list(range(ndim))
    if isinstance(v, int):
        v = [v]
    return [d % max(1, ndim) for d in v]


def _reduced(t: TensorMeta, dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(t.shape))
    return tuple(s for i, s in enumerate(t.shape) if i not in dims)


def reduction(call: Call, k: float, dim_pos: int | None, keep_pos: int | None, per_out: float = 0.0,
              n_outputs: int = 1, out_dtype: DType | None = None) -> OpCost | None:
    """``k`` ops per input element (+ ``per_out`` per output element); read input, write output(s)."""
    t = call.tensor(0, "self")
    if t is None:
        return None
    dims = _dims(call.arg(dim_pos, "dim") if dim_pos is not None else None, t.ndim)
    keep = bool(call.arg(keep_pos, "keepdim", False)) if keep_pos is not None else False
    dt = call.kwargs.get("dtype") if is_dtype(call.kwargs.get("dtype")) else None
    out = call.out(0) or call.out_kwarg() or TensorMeta(_reduced(t, dims, keep), out_dtype or dt or t.dtype)
    written = out.nbytes
    if n_outputs == 2:  # values + int64 indices
        second = call.out(1)
        written += second.nbytes if second is not None else out.numel * 8
    return make_cost(k * t.numel + per_out * out.numel, t.dtype, t.nbytes, written, kind="reduction")


@register("aten::sum", "aten::nansum", "aten::prod")
def sum_(call: Call) -> OpCost | None:
    return reduction(call, 1, 1, 2)


@register("aten::mean", "aten::nanmean")
def mean(call: Call) -> OpCost | None:
    """Sum (1 per input element) and one divide per output element."""
    return reduction(call, 1, 1, 2, per_out=1)


@register("aten::amax", "aten::amin", "aten::any", "aten::all", "aten::count_nonzero")
def extreme(call: Call) -> OpCost | None:
    out_dtype = dtypes.BOOL if call.name in ("aten::any", "aten::all") else (
        dtypes.INT64 if call.name == "aten::count_nonzero" else None)
    return reduction(call, 1, 1, 2, out_dtype=out_dtype)


@register("aten::argmax", "aten::argmin")
def argextreme(call: Call) -> OpCost | None:
    return reduction(call, 1, 1, 2, out_dtype=dtypes.INT64)


@register("aten::max", "aten::min")
def max_min(call: Call) -> OpCost | None:
    """``max(t)`` full reduction, ``max(t, dim)`` values + indices, ``max(a, b)`` elementwise."""
    other = call.arg(1)
    if isinstance(other, TensorMeta):
        return elementwise(call, 1)
    if isinstance(other, int):
        return reduction(call, 1, 1, 2, n_outputs=2)
    return reduction(call, 1, None, None)


@register("aten::linalg_vector_norm", "aten::norm")
def norm(call: Call) -> OpCost | None:
    """Square and add per element, one root per output."""
    return reduction(call, 2, 2, 3, per_out=1)


@register("aten::var", "aten::std", "aten::var_mean", "aten::std_mean")
def var(call: Call) -> OpCost | None:
    """Two passes: mean (1 per element), then subtract, square, add (3 per element)."""
    dim_pos = 1 if isinstance(call.arg(1), (list, tuple, int)) and not isinstance(call.arg(1), bool) else None
    n_out = 2 if call.name.endswith("_mean") else 1
    cost = reduction(call, 4, dim_pos, 3 if dim_pos is not None else None, per_out=2)
    if cost is not None and n_out == 2:
        cost.bytes_written *= 2
    return cost


@register("aten::logsumexp")
def logsumexp(call: Call) -> OpCost | None:
    """max, subtract, exp, add per element; log and add per output."""
    return reduction(call, 4, 1, 2, per_out=2)


@register("aten::cumsum", "aten::cumsum_", "aten::cumprod", "aten::cumprod_", "aten::logcumsumexp")
def cumsum(call: Call) -> OpCost | None:
    """One op per element (logcumsumexp: 3); output has the input's shape."""
    t = call.tensor(0, "self")
    if t is None:
        return None
    dt = call.kwargs.get("dtype") if is_dtype(call.kwargs.get("dtype")) else None
    out = call.out_kwarg() or call.out(0) or TensorMeta(t.shape, dt or t.dtype)
    k = 3 if call.name == "aten::logcumsumexp" else 1
    return make_cost(k * t.numel, out.dtype, t.nbytes, out.nbytes, kind="scan")


# --- softmax ------------------------------------------------------------------------


@register("aten::_softmax", "aten::softmax", "aten::_log_softmax", "aten::log_softmax", "aten::_safe_softmax")
def softmax(call: Call) -> OpCost | None:
    """max, subtract, exp, sum, divide (log_softmax: log + subtract instead of divide): 5 per element."""
    t = call.tensor(0, "self")
    if t is None:
        return None
    half_to_float = call.arg(2, "half_to_float")
    dt = call.arg(2, "dtype") if is_dtype(call.arg(2, "dtype")) else t.dtype
    if half_to_float is True:
        dt = dtypes.FLOAT32
    out = call.out(0) or TensorMeta(t.shape, dt)
    return make_cost(5 * t.numel, t.dtype, t.nbytes, out.nbytes, kind="softmax")


@register("aten::_softmax_backward_data", "aten::_log_softmax_backward_data")
def softmax_backward(call: Call) -> OpCost | None:
    """softmax: y*(g - sum(g*y)); log_softmax: g - exp(y)*sum(g): 4 per element; read g and y."""
    g, y = call.tensor(0, "grad_output"), call.tensor(1, "output")
    if g is None or y is None:
        return None
    return make_cost(4 * g.numel, g.dtype, g.nbytes + y.nbytes, g.nbytes, kind="softmax")


# --- normalisation --------------------------------------------------------------------


def _stat_itemsize(t: TensorMeta) -> int:
    return 4 if t.itemsize < 4 and t.is_floating else t.itemsize


@register("aten::native_layer_norm", "aten::layer_norm")
def layer_norm(call: Call) -> OpCost | None:
    """Statistics 4/element (add for the mean; subtract, square, add for the variance), normalise
    2/element (subtract, multiply by rstd), affine 1/element per weight or bias; rsqrt per row.
    Writes the output (and, for native_layer_norm, mean and rstd per row)."""
    x = call.tensor(0, "input")
    shape = call.arg(1, "normalized_shape")
    if x is None or not isinstance(shape, (list, tuple)):
        return None
    w, b = call.tensor(2, "weight"), call.tensor(3, "bias")
    n = x.numel
    rows = n // max(1, math.prod(shape))
    ops = 6 * n + n * ((w is not None) + (b is not None)) + 2 * rows
    read = x.nbytes + (w.nbytes if w else 0) + (b.nbytes if b else 0)
    written = x.nbytes + (2 * rows * _stat_itemsize(x) if call.name == "aten::native_layer_norm" else 0)
    return make_cost(ops, x.dtype, read, written, kind="norm")


@register("aten::native_batch_norm", "aten::batch_norm", "aten::_native_batch_norm_legit",
          "aten::_native_batch_norm_legit_no_training", "aten::_batch_norm_impl_index")
def batch_norm(call: Call) -> OpCost | None:
    """Training: statistics 4/element, normalise 2, affine 1 per weight/bias, running-stat update 4 per
    channel (read + write both running tensors). Inference (running stats): normalise 2 + affine.
    Writes the output (and saved mean/invstd per channel in training)."""
    x = call.tensor(0, "input")
    if x is None:
        return None
    w, b = call.tensor(1, "weight"), call.tensor(2, "bias")
    if call.name == "aten::_native_batch_norm_legit_no_training":
        training, rm, rv = False, call.tensor(3, "running_mean"), call.tensor(4, "running_var")
    elif call.name == "aten::_native_batch_norm_legit" and isinstance(call.arg(3), bool):  # .no_stats
        training, rm, rv = bool(call.arg(3)), None, None
    else:
        rm, rv = call.tensor(3, "running_mean"), call.tensor(4, "running_var")
        training = bool(call.arg(5, "training", False))
    n = x.numel
    c = x.shape[1] if x.ndim > 1 else x.numel
    affine = n * ((w is not None) + (b is not None))
    params = sum(t.nbytes for t in (w, b) if t is not None)
    stats = sum(t.nbytes for t in (rm, rv) if t is not None)
    if training:
        ops = 6 * n + affine + 2 * c + (4 * c if rm is not None else 0)
        written = x.nbytes + 2 * c * _stat_itemsize(x) + stats
    else:
        ops = 2 * n + affine + 2 * c
        written = x.nbytes
    return make_cost(ops, x.dtype, x.nbytes + params + stats, written, kind="norm")


@register("aten::native_layer_norm_backward", "aten::native_batch_norm_backward")
def norm_backward(call: Call) -> OpCost | None:
    """Input gradient 8/element (recompute x_hat: 2; g*w: 1; two reductions: 2; combine: 3) plus
    3/element for the weight and bias gradients; reads grad, input, saved statistics and weight,
    writes the input gradient and the parameter gradients."""
    g, x = call.tensor(0, "grad_out"), call.tensor(1, "input")
    if g is None or x is None:
        return None
    if call.name == "aten::native_layer_norm_backward":
        small = [call.tensor(i) for i in (3, 4, 5)]  # mean, rstd, weight
        w = call.tensor(5, "weight")
    else:
        small = [call.tensor(i) for i in (2, 3, 4, 5, 6)]  # weight, running stats, saved stats
        w = call.tensor(2, "weight")
    n = x.numel
    ops = 8 * n + (3 * n if w is not None else 0)
    read = g.nbytes + x.nbytes + sum(t.nbytes for t in small if t is not None)
    written = x.nbytes + (2 * w.nbytes if w is not None else 0)
    return make_cost(ops, x.dtype, read, written, kind="norm")


# --- dropout ----------------------------------------------------------------------------


@register("aten::native_dropout", "aten::dropout", "aten::feature_dropout", "aten::alpha_dropout")
def dropout(call: Call) -> OpCost | None:
    """Training: x * mask * scale (2/element), writes the output and a bool mask; eval: no work."""
    x = call.tensor(0, "input")
    train = call.arg(2, "train", True)
    if x is None:
        return None
    if train is False:
        return OpCost(extra={"kind": "view"})
    return make_cost(2 * x.numel, x.dtype, x.nbytes, x.nbytes + x.numel, kind="elementwise")


@register("aten::native_dropout_backward")
def dropout_backward(call: Call) -> OpCost | None:
    g, mask = call.tensor(0, "grad_output"), call.tensor(1, "mask")
    if g is None or mask is None:
        return None
    return make_cost(2 * g.numel, g.dtype, g.nbytes + mask.nbytes, g.nbytes, kind="elementwise")


# --- losses -----------------------------------------------------------------------------


def _reduced_out(call: Call, x: TensorMeta, reduction_pos: int) -> tuple[int, int]:
    """(bytes written, reduction ops) for a pointwise loss with ``reduction`` (0 none, 1 mean, 2 sum)."""
    red = call.arg(reduction_pos, "reduction", 1)
    if red == 0:
        return x.nbytes, 0
    return x.itemsize, x.numel + (1 if red == 1 else 0)


@register("aten::binary_cross_entropy_with_logits")
def bce_with_logits(call: Call) -> OpCost | None:
    """Stable form (1-t)*x + log(1+exp(-x)): 7/element; weight +1, pos_weight +3; reduction adds."""
    x, t = call.tensor(0, "self"), call.tensor(1, "target")
    if x is None or t is None:
        return None
    w, pw = call.tensor(2, "weight"), call.tensor(3, "pos_weight")
    written, red_ops = _reduced_out(call, x, 4)
    ops = 7 * x.numel + (x.numel if w else 0) + (3 * x.numel if pw else 0) + red_ops
    read = x.nbytes + t.nbytes + (w.nbytes if w else 0) + (pw.nbytes if pw else 0)
    return make_cost(ops, x.dtype, read, written, kind="loss")


@register("aten::binary_cross_entropy")
def bce(call: Call) -> OpCost | None:
    """-(t*log(p) + (1-t)*log(1-p)): 7/element; weight +1; reduction adds."""
    x, t = call.tensor(0, "self"), call.tensor(1, "target")
    if x is None or t is None:
        return None
    w = call.tensor(2, "weight")
    written, red_ops = _reduced_out(call, x, 3)
    ops = 7 * x.numel + (x.numel if w else 0) + red_ops
    return make_cost(ops, x.dtype, x.nbytes + t.nbytes + (w.nbytes if w else 0), written, kind="loss")


@register("aten::binary_cross_entropy_backward")
def bce_backward(call: Call) -> OpCost | None:
    """g * (p - t) / (p * (1 - p)) (clamped): 6/element; weight +1."""
    g, x, t = call.tensor(0, "grad_output"), call.tensor(1, "self"), call.tensor(2, "target")
    if x is None or t is None or g is None:
        return None
    w = call.tensor(3, "weight")
    ops = 6 * x.numel + (x.numel if w else 0)
    read = g.nbytes + x.nbytes + t.nbytes + (w.nbytes if w else 0)
    return make_cost(ops, x.dtype, read, x.nbytes, kind="loss")


@register("aten::mse_loss", "aten::l1_loss", "aten::smooth_l1_loss", "aten::huber_loss")
def mse(call: Call) -> OpCost | None:
    """Subtract and square (abs for l1; smooth variants 4): per element; reduction adds."""
    x, t = call.tensor(0, "self"), call.tensor(1, "target")
    if x is None or t is None:
        return None
    k = {"aten::mse_loss": 2, "aten::l1_loss": 2}.get(call.name, 4)
    written, red_ops = _reduced_out(call, x, 2)
    return make_cost(k * x.numel + red_ops, x.dtype, x.nbytes + t.nbytes, written, kind="loss")


@register("aten::mse_loss_backward")
def mse_backward(call: Call) -> OpCost | None:
    g, x, t = call.tensor(0, "grad_output"), call.tensor(1, "self"), call.tensor(2, "target")
    if g is None or x is None or t is None:
        return None
    return make_cost(3 * x.numel, x.dtype, g.nbytes + x.nbytes + t.nbytes, x.nbytes, kind="loss")


@register("aten::nll_loss_forward", "aten::nll_loss", "aten::nll_loss_nd")
def nll_loss(call: Call) -> OpCost | None:
    """Gather one log-probability per target (read only those), sum them (+1 multiply each with a weight)."""
    x, t = call.tensor(0, "self"), call.tensor(1, "target")
    if x is None or t is None:
        return None
    w = call.tensor(2, "weight")
    n = t.numel
    red = call.arg(3, "reduction", 1)
    ops = n * (2 if w is not None else 1) + (1 if red == 1 else 0)
    read = t.nbytes + n * x.itemsize + (n * w.itemsize if w is not None else 0)
    written = (n * x.itemsize if red == 0 else x.itemsize) + (x.itemsize if call.name == "aten::nll_loss_forward"
                                                              else 0)
    return make_cost(ops, x.dtype, read, written, kind="loss")


@register("aten::nll_loss_backward")
def nll_loss_backward(call: Call) -> OpCost | None:
    """Writes the full-size gradient (zeros, then one value per target); reads targets and the grad."""
    g, x, t = call.tensor(0, "grad_output"), call.tensor(1, "self"), call.tensor(2, "target")
    if g is None or x is None or t is None:
        return None
    w = call.tensor(3, "weight")
    n = t.numel
    ops = n * (2 if w is not None else 1)
    read = g.nbytes + t.nbytes + (n * w.itemsize if w is not None else 0) + x.itemsize
    return make_cost(ops, x.dtype, read, x.nbytes, kind="loss")
