"""Embedding lookups (aten and FBGEMM table-batched), their backward, and the jagged-tensor ops.

Bytes of a lookup = lookups x row bytes (only the rows looked up are read,
never the whole table) + the index, offset and per-sample-weight tensors +
the output. Row bytes = dim x element size; int8/int4/int2 rows also carry
their 4-byte (fp16 scale, fp16 bias) pair. When the index values are known
(the counter always has them) ``extra`` also reports ``lookups``,
``unique_rows`` (distinct rows per table, summed over tables) and
``unique_bytes`` (unique rows x row bytes: what a perfect cache would fetch).

FLOPs of pooling: one add per looked-up element (sum), one more per element
with per-sample weights, one divide per output element for mean; int8/int4
rows cost 2 more per element to dequantise (scale * q + bias). A plain
gather (``embedding``, sequence TBE in fp32) has no FLOPs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from recstack.costmodel import dtypes
from recstack.costmodel.meta import Call, TensorMeta, int_values, iter_tensors
from recstack.costmodel.registry import OpCost, make_cost, register, register_pattern

QUANT_BYTES = 4  # fp16 scale + fp16 bias stored with every int8/int4/int2 row
SUM, MEAN, NONE = 0, 1, 2  # FBGEMM PoolingMode
SPARSE_TYPE_BITS = {0: 32, 1: 16, 2: 8, 3: 4, 4: 2, 5: 16, 6: 8, 8: 8}  # FBGEMM SparseType -> bits
QUANTISED = {2, 3, 4}  # INT8, INT4, INT2
OUTPUT_BYTES = {0: 4, 1: 2, 2: 1, 5: 2, 6: 1}


def row_bytes(dim: int, sparse_type: int) -> int:
    """Bytes of one table row of ``dim`` elements stored as FBGEMM ``SparseType`` ``sparse_type``."""
    bits = SPARSE_TYPE_BITS.get(sparse_type)
    if bits is None:
        raise ValueError(f"unknown SparseType {sparse_type}")
    return math.ceil(dim * bits / 8) + (QUANT_BYTES if sparse_type in QUANTISED else 0)


def unique_rows(indices: TensorMeta | None, start: int = 0, end: int | None = None,
                exclude: int | None = None) -> int | None:
    """Distinct values of ``indices[start:end]`` (minus ``exclude``), or None when the values are unknown."""
    if indices is None or indices.values is None:
        return None
    v = indices.values.reshape(-1)[start:end]
    if exclude is not None and exclude >= 0:
        v = v[v != exclude]
    return int(v.unique().numel()) if v.numel() else 0


def _count_valid(indices: TensorMeta, padding_idx: int | None) -> int:
    if padding_idx is None or padding_idx < 0 or indices.values is None:
        return indices.numel
    return int((indices.values != padding_idx).sum())


def _lookup_extra(lookups: int, uniq: int | None, row: int, **more: float) -> dict[str, float]:
    extra: dict[str, float] = {"lookups": float(lookups), "table_bytes": float(lookups * row)}
    if uniq is not None:
        extra["unique_rows"] = float(uniq)
        extra["unique_bytes"] = float(uniq * row)
    extra.update(more)
    return extra


@register("aten::embedding")
def embedding(call: Call) -> OpCost | None:
    """Gather one row per index: read lookups x row bytes + indices, write the same rows. No FLOPs."""
    w, idx = call.tensor(0, "weight"), call.tensor(1, "indices")
    if w is None or idx is None or w.ndim != 2:
        return None
    d = w.shape[1]
    row = d * w.itemsize
    n = idx.numel
    cost = OpCost(0.0, float(n * row + idx.nbytes), float(n * row), _lookup_extra(n, unique_rows(idx), row))
    cost.extra["kind"] = "embedding"
    return cost


@register("aten::embedding_bag", "aten::_embedding_bag", "aten::_embedding_bag_forward_only")
def embedding_bag(call: Call) -> OpCost | None:
    """Pooled lookup (mode 0 sum, 1 mean, 2 max), optional per-sample weights and padding_idx.

    Written: the [bags, dim] output; for mean/max also offset2bag and bag_size
    (int64), for max also the argmax indices. Rows equal to padding_idx are
    skipped (neither read nor added).
    """
    w, idx, off = call.tensor(0, "weight"), call.tensor(1, "indices"), call.tensor(2, "offsets")
    if w is None or idx is None or w.ndim != 2:
        return None
    mode = int(call.arg(4, "mode", 0))
    psw = call.tensor(6, "per_sample_weights")
    include_last = bool(call.arg(7, "include_last_offset", False))
    padding_idx = call.arg(8, "padding_idx")
    padding_idx = None if padding_idx is None else int(padding_idx)
    d = w.shape[1]
    row = d * w.itemsize
    if idx.ndim == 2:
        bags = idx.shape[0]
    elif off is not None:
        bags = off.numel - (1 if include_last else 0)
    else:
        return None
    n = _count_valid(idx, padding_idx)
    ops = n * d * (2 if psw is not None else 1) + (bags * d if mode == MEAN else 0)
    read = n * row + idx.nbytes + (off.nbytes if off is not None else 0) + (psw.nbytes if psw is not None else 0)
    written = bags * d * w.itemsize
    if mode != SUM:
        written += idx.numel * 8 + bags * 8 + (bags * d * 8 if mode == 2 else 0)
    extra = _lookup_extra(n, unique_rows(idx, exclude=padding_idx), row, bags=float(bags))
    extra["kind"] = "embedding"
    return make_cost(ops, w.dtype, read, written, **extra)


def _bag_backward(call: Call, sparse: bool, pos: dict[str, int]) -> OpCost | None:
    grad, idx = call.tensor(0, "grad"), call.tensor(1, "indices")
    if grad is None or idx is None:
        return None
    num_weights = int(call.arg(pos["num_weights"], "num_weights", 0))
    mode = int(call.arg(pos["mode"], "mode", 0))
    psw = call.tensor(pos["psw"], "per_sample_weights")
    d = grad.shape[-1]
    n = idx.numel
    aux = sum(t.nbytes for i in pos["aux"] if (t := call.tensor(i)) is not None)
    ops = n * d * ((psw is not None) + (mode == MEAN) + (0 if sparse else 1))
    read = grad.nbytes + idx.nbytes + aux + (psw.nbytes if psw is not None else 0)
    if sparse:  # COO gradient: one value row and one int64 index per lookup
        written = n * d * grad.itemsize + n * 8
    else:  # dense [num_weights, dim] gradient, zero-filled then accumulated
        written = num_weights * d * grad.itemsize
    extra = _lookup_extra(n, unique_rows(idx), d * grad.itemsize)
    extra["kind"] = "embedding_backward"
    return make_cost(ops, grad.dtype, read, written, **extra)


@register("aten::_embedding_bag_backward")
def embedding_bag_backward(call: Call) -> OpCost | None:
    """Dispatches on ``sparse``: a COO gradient (L rows) or a dense table-sized gradient."""
    sparse = bool(call.arg(9, "sparse", False))
    return _bag_backward(call, sparse, {"num_weights": 6, "mode": 8, "psw": 10, "aux": [2, 3, 4]})


@register("aten::_embedding_bag_sparse_backward")
def embedding_bag_sparse_backward(call: Call) -> OpCost | None:
    return _bag_backward(call, True, {"num_weights": 5, "mode": 7, "psw": 8, "aux": [2, 3, 4]})


@register("aten::_embedding_bag_dense_backward")
def embedding_bag_dense_backward(call: Call) -> OpCost | None:
    return _bag_backward(call, False, {"num_weights": 5, "mode": 7, "psw": 8, "aux": [2, 3, 4]})


@register("aten::embedding_dense_backward", "aten::embedding_backward", "aten::embedding_sparse_backward")
def embedding_backward(call: Call) -> OpCost | None:
    """Accumulate one gradient row per lookup: dense writes a [num_weights, dim] table, sparse L rows."""
    grad, idx = call.tensor(0, "grad_output") or call.tensor(0, "grad"), call.tensor(1, "indices")
    if grad is None or idx is None:
        return None
    num_weights = int(call.arg(2, "num_weights", 0))
    sparse = call.name == "aten::embedding_sparse_backward" or bool(call.arg(5, "sparse", False))
    d = grad.shape[-1]
    n = idx.numel
    written = n * d * grad.itemsize + n * 8 if sparse else num_weights * d * grad.itemsize
    extra = _lookup_extra(n, unique_rows(idx), d * grad.itemsize)
    extra["kind"] = "embedding_backward"
    return make_cost(0 if sparse else n * d, grad.dtype, grad.nbytes + idx.nbytes, written, **extra)


@register("aten::_embedding_bag_per_sample_weights_backward")
def per_sample_weights_backward(call: Call) -> OpCost | None:
    """One dot product (2*dim FLOPs) of the bag's gradient with the looked-up row, per lookup."""
    grad, w, idx = call.tensor(0, "grad"), call.tensor(1, "weight"), call.tensor(2, "indices")
    if grad is None or w is None or idx is None:
        return None
    d = w.shape[1]
    n = idx.numel
    row = d * w.itemsize
    aux = sum(t.nbytes for i in (3, 4) if (t := call.tensor(i)) is not None)
    read = grad.nbytes + n * row + idx.nbytes + aux
    extra = _lookup_extra(n, unique_rows(idx), row)
    extra["kind"] = "embedding_backward"
    return make_cost(2 * n * d, w.dtype, read, n * w.itemsize, **extra)


# --- FBGEMM table-batched embeddings -------------------------------------------------------


@dataclass
class TableLookups:
    dim: int
    lookups: int
    unique: int | None
    row: int


def tbe_tables(dims: list[int], offsets: TensorMeta | None, indices: TensorMeta | None,
               row_of: list[int]) -> tuple[list[TableLookups], int, bool]:
    """Per-table lookups and unique rows of a TBE call; (tables, batch size, approximate?).

    ``offsets`` has T*B+1 entries (table-major); table t owns
    ``indices[offsets[t*B] : offsets[(t+1)*B]]``. Without offset values the
    lookups are split evenly over the tables (approximate).
    """
    t = len(dims)
    offs = int_values(offsets) if offsets is not None and offsets.numel <= (1 << 22) else None
    total = indices.numel if indices is not None else 0
    b = ((offsets.numel - 1) // t) if offsets is not None and t else 0
    tables: list[TableLookups] = []
    if offs is None or t == 0:
        for d, r in zip(dims, row_of, strict=True):
            tables.append(TableLookups(d, total // max(1, t), None, r))
        return tables, b, True
    for i, (d, r) in enumerate(zip(dims, row_of, strict=True)):
        start, end = offs[i * b], offs[(i + 1) * b]
        tables.append(TableLookups(d, end - start, unique_rows(indices, start, end), r))
    return tables, b, False


def _tbe_extra(tables: list[TableLookups], approximate: bool) -> dict[str, float]:
    extra: dict[str, float] = {
        "lookups": float(sum(t.lookups for t in tables)),
        "table_bytes": float(sum(t.lookups * t.row for t in tables)),
        "tables": float(len(tables)),
    }
    if all(t.unique is not None for t in tables):
        extra["unique_rows"] = float(sum(t.unique or 0 for t in tables))
        extra["unique_bytes"] = float(sum((t.unique or 0) * t.row for t in tables))
    if approximate:
        extra["approximate"] = 1.0
    return extra


def _pool_ops(tables: list[TableLookups], pooling: int, weighted: bool, quantised: list[bool], bags: int) -> float:
    ops = 0.0
    for t, q in zip(tables, quantised, strict=True):
        per = (1 if pooling != NONE else 0) + (1 if weighted else 0) + (2 if q else 0)
        ops += t.lookups * t.dim * per + (bags * t.dim if pooling == MEAN else 0)
    return ops


def _small(*ts: TensorMeta | None) -> int:
    return sum(t.nbytes for t in ts if t is not None)


@register("fbgemm::int_nbit_split_embedding_codegen_lookup_function",
          "fbgemm::int_nbit_split_embedding_uvm_caching_codegen_lookup_function")
def tbe_inference(call: Call) -> OpCost | None:
    """FBGEMM inference TBE (fp32/fp16/bf16/fp8/int8/int4/int2 rows, per-table dims from D_offsets)."""
    dims_off = int_values(call.tensor(5, "D_offsets"))
    tys = int_values(call.tensor(4, "weights_tys"))
    indices, offsets = call.tensor(12, "indices"), call.tensor(13, "offsets")
    if dims_off is None or tys is None or indices is None:
        return None
    dims = [b - a for a, b in zip(dims_off[:-1], dims_off[1:], strict=True)]
    if len(tys) != len(dims) or any(ty not in SPARSE_TYPE_BITS for ty in tys):
        return None
    pooling = int(call.arg(14, "pooling_mode", SUM))
    weights = call.tensor(15, "indice_weights")
    out_size = OUTPUT_BYTES.get(int(call.arg(16, "output_dtype", 1)), 4)
    rows = [row_bytes(d, ty) for d, ty in zip(dims, tys, strict=True)]
    tables, bags, approx = tbe_tables(dims, offsets, indices, rows)
    ops = _pool_ops(tables, pooling, weights is not None, [ty in QUANTISED for ty in tys], bags)
    meta = _small(call.tensor(2), call.tensor(3), call.tensor(4), call.tensor(5))
    read = sum(t.lookups * t.row for t in tables) + indices.nbytes + _small(offsets, weights) + meta
    if pooling == NONE:
        written = sum(t.lookups * t.dim for t in tables) * out_size
    else:
        written = bags * sum(dims) * out_size
    extra = _tbe_extra(tables, approx)
    extra["kind"] = "embedding"
    return make_cost(ops, dtypes.FLOAT32, read, written, **extra)


# argument positions of the training TBE ops (schema order)
_TRAIN_FWD: dict[str, dict[str, Any]] = {
    "bag_wrapper": {"weights": (0, 1), "weights_offsets": 5, "D_offsets": 6, "indices": 10, "offsets": 11,
                    "pooling": 12, "indice_weights": 13, "output_dtype": 17},
    "nobag_wrapper": {"weights": (0, 1), "weights_offsets": 5, "D": 6, "indices": 8, "offsets": 9,
                      "output_dtype": 13},
    "cpu": {"weights": (0,), "weights_offsets": 1, "D_offsets": 2, "indices": 5, "offsets": 6, "pooling": 7,
            "indice_weights": 8, "output_dtype": 9},
}
_TRAIN_BWD: dict[str, dict[str, Any]] = {
    "bag_wrapper": {"weights": (1, 2), "weights_offsets": 6, "D_offsets": 7, "indices": 12, "offsets": 13,
                    "pooling": 14, "indice_weights": 15},
    "nobag_wrapper": {"weights": (1, 2), "weights_offsets": 6, "D": 7, "indices": 10, "offsets": 11},
    "cpu": {"weights": (1,), "weights_offsets": 3, "D_offsets": 4, "indices": 8, "offsets": 9, "pooling": 10,
            "indice_weights": 11},
}

# optimizer state bytes per row (read and written) and ops per row, as functions of the row's dim
OPTIMIZERS = {
    "sgd": (lambda d: 0, lambda d: 2 * d),
    "exact_sgd": (lambda d: 0, lambda d: 2 * d),
    "rowwise_adagrad": (lambda d: 4, lambda d: 4 * d + 3),
    "exact_rowwise_adagrad": (lambda d: 4, lambda d: 4 * d + 3),
    "adagrad": (lambda d: 4 * d, lambda d: 7 * d),
    "exact_adagrad": (lambda d: 4 * d, lambda d: 7 * d),
    "adam": (lambda d: 8 * d, lambda d: 12 * d),
}


def _train_layout(call: Call, pos: dict[str, Any]) -> tuple[list[int], TensorMeta, int] | None:
    """(dims per table, the weights tensor in use, weights element size)."""
    wts = [call.tensor(i) for i in pos["weights"]]
    w = next((t for t in wts if t is not None and t.numel > 0), None)
    if w is None:
        return None
    if "D" in pos:
        wo = call.tensor(pos["weights_offsets"])
        d = call.arg(pos["D"])
        if wo is None or not isinstance(d, int):
            return None
        return [d] * wo.numel, w, w.itemsize
    dims_off = int_values(call.tensor(pos["D_offsets"]))
    if dims_off is None:
        return None
    return [b - a for a, b in zip(dims_off[:-1], dims_off[1:], strict=True)], w, w.itemsize


def _variant(packet: str) -> str:
    if packet.endswith("_cpu"):
        return "cpu"
    return "nobag_wrapper" if "_nobag_" in packet else "bag_wrapper"


@register_pattern(r"fbgemm::split_embedding(_nobag)?_codegen_forward_(weighted|unweighted)(_vbe)?_pt2_wrapper"
                  r"|fbgemm::split_embedding(_nobag)?_codegen_forward_cpu")
def tbe_train_forward(call: Call) -> OpCost | None:
    """FBGEMM training TBE forward (fp32/fp16 rows of dim x element size)."""
    pos = _TRAIN_FWD[_variant(call.name)]
    layout = _train_layout(call, pos)
    indices, offsets = call.tensor(pos["indices"]), call.tensor(pos["offsets"])
    if layout is None or indices is None:
        return None
    dims, w, size = layout
    pooling = int(call.arg(pos["pooling"], None, SUM)) if "pooling" in pos else NONE
    weights = call.tensor(pos["indice_weights"]) if "indice_weights" in pos else None
    if weights is not None and weights.numel == 0:
        weights = None
    out_size = OUTPUT_BYTES.get(int(call.arg(pos["output_dtype"], None, 0)), 4)
    tables, bags, approx = tbe_tables(dims, offsets, indices, [d * size for d in dims])
    ops = _pool_ops(tables, pooling, weights is not None, [False] * len(tables), bags)
    read = sum(t.lookups * t.row for t in tables) + indices.nbytes + _small(offsets, weights)
    written = (sum(t.lookups * t.dim for t in tables) if pooling == NONE else bags * sum(dims)) * out_size
    extra = _tbe_extra(tables, approx)
    extra["kind"] = "embedding"
    return make_cost(ops, w.dtype, read, written, **extra)


_BWD = re.compile(r"fbgemm::split_embedding(?P<nobag>_nobag)?_backward_codegen_(?P<opt>[a-z_]+?)"
                  r"_(?:weighted|unweighted)(?:_exact)?(?:_vbe)?_pt2_wrapper"
                  r"|fbgemm::split_embedding_backward_codegen_(?P<opt_cpu>[a-z_]+?)_cpu")


@register_pattern(_BWD.pattern)
def tbe_train_backward(call: Call) -> OpCost | None:
    """FBGEMM training TBE backward with the fused optimizer update.

    Reads the output gradient once, accumulates one gradient row per lookup
    (dim adds; x2 with per-sample weights or mean pooling), then updates every
    unique row: read and write the row and its optimizer state (sgd: none,
    rowwise_adagrad: 4 bytes, adagrad: dim x 4, adam: 2 x dim x 4) with the
    optimizer's per-row arithmetic (sgd 2*dim, rowwise_adagrad 4*dim+3,
    adagrad 7*dim, adam 12*dim). Other optimizers are not covered.
    """
    m = _BWD.fullmatch(call.name)
    if m is None:
        return None
    opt = OPTIMIZERS.get(m.group("opt") or m.group("opt_cpu") or "")
    pos = _TRAIN_BWD[_variant(call.name)]
    layout = _train_layout(call, pos)
    grad = call.tensor(0, "grad_output")
    indices, offsets = call.tensor(pos["indices"]), call.tensor(pos["offsets"])
    if opt is None or layout is None or grad is None or indices is None:
        return None
    state_bytes, row_ops = opt
    dims, w, size = layout
    pooling = int(call.arg(pos["pooling"], None, SUM)) if "pooling" in pos else NONE
    weights = call.tensor(pos["indice_weights"]) if "indice_weights" in pos else None
    if weights is not None and weights.numel == 0:
        weights = None
    tables, bags, approx = tbe_tables(dims, offsets, indices, [d * size for d in dims])
    ops = 0.0
    update = 0
    for t in tables:
        u = t.unique if t.unique is not None else t.lookups
        ops += t.lookups * t.dim * (1 + (weights is not None) + (pooling == MEAN)) + u * row_ops(t.dim)
        update += u * (t.row + state_bytes(t.dim))
    read = grad.nbytes + indices.nbytes + _small(offsets, weights) + update
    extra = _tbe_extra(tables, approx)
    extra["kind"] = "embedding_backward"
    extra["updated_bytes"] = float(update)
    return make_cost(ops, w.dtype, read, update, **extra)


@register_pattern(r"fbgemm::split_embedding_codegen_grad_indice_weights(_vbe)?(_pt2_wrapper|_cpu)")
def tbe_grad_indice_weights(call: Call) -> OpCost | None:
    """Gradient of per-sample weights: a dim-long dot product per lookup (2*dim FLOPs), one value each."""
    cpu = call.name.endswith("_cpu")
    pos: dict[str, Any] = {"weights": (1,) if cpu else (1, 2), "D_offsets": 3 if cpu else 7}
    layout = _train_layout(call, pos)
    grad = call.tensor(0, "grad_output")
    indices, offsets = (call.tensor(4), call.tensor(5)) if cpu else (call.tensor(9), call.tensor(10))
    if layout is None or grad is None or indices is None:
        return None
    dims, w, size = layout
    tables, _, approx = tbe_tables(dims, offsets, indices, [d * size for d in dims])
    ops = sum(2 * t.lookups * t.dim for t in tables)
    read = grad.nbytes + sum(t.lookups * t.row for t in tables) + indices.nbytes + _small(offsets)
    extra = _tbe_extra(tables, approx)
    extra["kind"] = "embedding_backward"
    return make_cost(ops, w.dtype, read, indices.numel * 4, **extra)


@register("fbgemm::bounds_check_indices")
def bounds_check_indices(call: Call) -> OpCost | None:
    """Check every index against its table's row count (2 integer compares each); reads only."""
    rows, indices, offsets = call.tensor(0, "rows_per_table"), call.tensor(1, "indices"), call.tensor(2, "offsets")
    if indices is None:
        return None
    n_off = offsets.numel if offsets is not None else 0
    return make_cost(2 * indices.numel + n_off, indices.dtype, indices.nbytes + _small(rows, offsets), 0,
                     kind="check")


@register("fbgemm::pruned_array_lookup")
def pruned_array_lookup(call: Call) -> OpCost | None:
    """Remap each index through its table's remapping array: read index + one remap entry, write one."""
    indices, offsets, remap = call.tensor(0, "indices"), call.tensor(1, "offsets"), call.tensor(2)
    if indices is None or remap is None:
        return None
    read = indices.nbytes + indices.numel * remap.itemsize + _small(offsets, call.tensor(3))
    return OpCost(0.0, float(read), float(indices.numel * remap.itemsize), {"kind": "gather"})


# --- jagged / KeyedJaggedTensor ops -----------------------------------------------------------


@register("fbgemm::asynchronous_complete_cumsum", "fbgemm::asynchronous_exclusive_cumsum",
          "fbgemm::asynchronous_inclusive_cumsum")
def fbgemm_cumsum(call: Call) -> OpCost | None:
    """Lengths -> offsets: one add per element; complete_cumsum writes N+1 values."""
    t = call.tensor(0, "t_in")
    if t is None:
        return None
    extra_one = 1 if "complete" in call.name else 0
    out = call.out(0)
    written = out.nbytes if out is not None else (t.numel + extra_one) * t.itemsize
    return make_cost(t.numel, t.dtype, t.nbytes, written, kind="scan")


def _permute_sparse(call: Call, lengths_pos: int, values_pos: int, weights_pos: int) -> OpCost | None:
    permute, lengths, values = call.tensor(0, "permute"), call.tensor(lengths_pos), call.tensor(values_pos)
    if permute is None or lengths is None or values is None:
        return None
    weights = call.tensor(weights_pos, "weights")
    outs = [o for o in (call.outputs or ()) if o is not None]
    if outs:
        written = sum(o.nbytes for o in outs)
        moved = sum(o.nbytes for o in outs[1:])  # permuted values (+ weights): read once from the source
    else:
        written = lengths.nbytes + values.nbytes + (weights.nbytes if weights is not None else 0)
        moved = written - lengths.nbytes
    read = permute.nbytes + lengths.nbytes + moved
    # two prefix sums (input and output offsets) over the lengths
    return make_cost(2 * lengths.numel, lengths.dtype, read, written, kind="copy")


@register("fbgemm::permute_2D_sparse_data", "fbgemm::permute_1D_sparse_data", "fbgemm::permute_sparse_features")
def permute_sparse_data(call: Call) -> OpCost | None:
    """Reorder KJT features: copy lengths and the moved values (and weights); prefix sums over lengths."""
    return _permute_sparse(call, 1, 2, 3)


@register("fbgemm::permute_2D_sparse_data_input1D")
def permute_sparse_data_input1d(call: Call) -> OpCost | None:
    return _permute_sparse(call, 1, 2, 4)


@register("fbgemm::segment_sum_csr")
def segment_sum_csr(call: Call) -> OpCost | None:
    """Sum values per CSR segment: one add per value."""
    csr, values = call.tensor(1, "csr_seg"), call.tensor(2, "values")
    if csr is None or values is None:
        return None
    out = call.out(0)
    written = out.nbytes if out is not None else max(0, csr.numel - 1) * values.itemsize
    return make_cost(values.numel, values.dtype, csr.nbytes + values.nbytes, written, kind="reduction")


def _jagged_dense_out(values: TensorMeta, offsets: list[TensorMeta], max_lengths: list[int]) -> TensorMeta:
    b = max(0, offsets[0].numel - 1)
    return TensorMeta((b, *max_lengths, *values.shape[1:]), values.dtype)


@register("fbgemm::jagged_to_padded_dense", "fbgemm::jagged_to_padded_dense_forward", "fbgemm::jagged_2d_to_dense",
          "fbgemm::jagged_1d_to_dense")
def jagged_to_dense(call: Call) -> OpCost | None:
    """Pad a jagged tensor: write the dense [B, max_len, ...] output, read the values and offsets."""
    values = call.tensor(0, "values")
    offs = list(iter_tensors(call.arg(1, "offsets")))
    ml = call.arg(2)
    if values is None or not offs:
        return None
    max_lengths = list(ml) if isinstance(ml, (list, tuple)) else [int(ml)]
    if call.name == "fbgemm::jagged_1d_to_dense":
        values = TensorMeta((values.numel,), values.dtype)
    out = call.out(0) or _jagged_dense_out(values, offs, max_lengths)
    read = min(values.nbytes, out.nbytes) + sum(o.nbytes for o in offs)
    return OpCost(0.0, float(read), float(out.nbytes), {"kind": "copy"})


@register("fbgemm::dense_to_jagged", "fbgemm::dense_to_jagged_forward")
def dense_to_jagged(call: Call) -> OpCost | None:
    """Gather the valid rows of a padded dense tensor into jagged values (total_L rows)."""
    dense = call.tensor(0, "dense")
    offs = list(iter_tensors(call.arg(1, "x_offsets")))
    if dense is None or not offs:
        return None
    total = call.arg(2, "total_L")
    out = call.out(0)
    if out is not None:
        n_rows = out.shape[0]
    elif isinstance(total, int):
        n_rows = total
    else:
        last = int_values(offs[-1])
        if last is None:
            return None
        n_rows = last[-1]
    row = math.prod(dense.shape[len(offs) + 1 :]) * dense.itemsize
    return OpCost(0.0, float(n_rows * row + sum(o.nbytes for o in offs)), float(n_rows * row), {"kind": "copy"})


@register("fbgemm::expand_into_jagged_permute", "fbgemm::offsets_range")
def expand_permute(call: Call) -> OpCost | None:
    """Write ``output_size``/``range_size`` integers, one integer op each; read the small inputs."""
    size = call.arg(3, "output_size") if call.name.endswith("permute") else call.arg(1, "range_size")
    ref = call.tensor(0)
    if not isinstance(size, int) or ref is None:
        return None
    read = sum(t.nbytes for t in call.inputs())
    out = call.out(0)
    written = out.nbytes if out is not None else size * ref.itemsize
    return make_cost(size, ref.dtype, read, written, kind="copy")


@register("fbgemm::keyed_jagged_index_select_dim1", "fbgemm::jagged_index_select",
          "fbgemm::block_bucketize_sparse_features", "fbgemm::group_index_select_dim0",
          "fbgemm::permute_pooled_embs", "fbgemm::permute_pooled_embs_auto_grad", "fbgemm::regroup_keyed_tensor",
          "fbgemm::permute_multi_embedding", "fbgemm::kt_regroup_arguments")
def jagged_select(call: Call) -> OpCost | None:
    """Selections and regroupings whose output size depends on data: write the outputs, read what they
    select (at most the outputs' size per input) plus the small index tensors.

    block_bucketize also does 3 integer ops (divide, modulo, compare) per index. Needs the outputs.
    """
    if not call.outputs:
        return None
    written = sum(o.nbytes for o in call.outputs if o is not None)
    read = min(sum(t.nbytes for t in call.inputs()), written + sum(
        t.nbytes for t in call.inputs() if t.numel <= 4096))
    cost = OpCost(0.0, float(read), float(written), {"kind": "copy"})
    if call.name == "fbgemm::block_bucketize_sparse_features":
        idx = call.tensor(1, "indices")
        if idx is not None:
            cost.extra["int_ops"] = float(3 * idx.numel)
    return cost
