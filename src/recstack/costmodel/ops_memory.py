"""Formulas for data movement: views, allocation, creation, copies, concatenation, indexing.

Views and metadata ops cost nothing (0 FLOPs, 0 bytes: they only make a new
tensor header over the same storage); they are still *covered*. Copies read
their input once and write their output once. Gathers read only the gathered
elements of the source (plus the index tensors), scatters write only the
touched elements (out-of-place variants also copy ``self``).
"""

from __future__ import annotations

import math
from typing import Any

from recstack.costmodel import dtypes
from recstack.costmodel.dtypes import DType, default_dtype, is_dtype
from recstack.costmodel.meta import Call, TensorMeta, broadcast_shape, iter_tensors
from recstack.costmodel.registry import OpCost, make_cost, register

VIEW_OPS = (
    "aten::view",
    "aten::_unsafe_view",
    "aten::_reshape_alias",
    "aten::view_as",
    "aten::t",
    "aten::transpose",
    "aten::transpose_",
    "aten::permute",
    "aten::expand",
    "aten::expand_as",
    "aten::as_strided",
    "aten::unsqueeze",
    "aten::unsqueeze_",
    "aten::squeeze",
    "aten::squeeze_",
    "aten::slice",
    "aten::select",
    "aten::narrow",
    "aten::alias",
    "aten::detach",
    "aten::detach_",
    "aten::lift_fresh",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::split",
    "aten::split_with_sizes",
    "aten::unsafe_split",
    "aten::unsafe_split_with_sizes",
    "aten::chunk",
    "aten::unsafe_chunk",
    "aten::tensor_split",
    "aten::unbind",
    "aten::movedim",
    "aten::moveaxis",
    "aten::swapaxes",
    "aten::swapdims",
    "aten::unflatten",
    "aten::diagonal",
    "aten::unfold",
    "aten::real",
    "aten::imag",
    "aten::view_as_real",
    "aten::view_as_complex",
    "aten::_indices",
    "aten::_values",
    "aten::indices",
    "aten::values",
    "aten::_sparse_coo_tensor_with_dims_and_tensors",
    "aten::_coalesced_",
)
"""Ops that return a view or alias of their input."""

NO_DATA_OPS = (
    "aten::empty",
    "aten::empty_like",
    "aten::empty_strided",
    "aten::empty_permuted",
    "aten::new_empty",
    "aten::new_empty_strided",
    "aten::resize_",
    "aten::set_",
    "aten::_efficientzerotensor",
    "aten::sym_size",
    "aten::sym_stride",
    "aten::sym_numel",
    "aten::size",
    "aten::stride",
    "aten::_nnz",
    "aten::sparse_dim",
    "aten::dense_dim",
    "aten::is_same_size",
    "aten::cudnn_is_acceptable",
    "aten::_has_compatible_shallow_copy_type",
    "aten::record_stream",
    "aten::_assert_async",
    "aten::_assert_tensor_metadata",
    "aten::_version",
    "profiler::_record_function_enter",
    "profiler::_record_function_enter_new",
    "profiler::_record_function_exit",
)
"""Allocation without initialisation, metadata queries, profiler ranges: nothing is read or written."""


@register(*VIEW_OPS)
def view_op(call: Call) -> OpCost:
    return OpCost(extra={"kind": "view"})


@register(*NO_DATA_OPS)
def no_data_op(call: Call) -> OpCost:
    return OpCost(extra={"kind": "metadata"})


@register("aten::_local_scalar_dense", "aten::item", "aten::is_nonzero")
def scalar_read(call: Call) -> OpCost:
    """Reads one element back to the host."""
    t = call.tensor(0, "self")
    return OpCost(0.0, float(t.itemsize if t else 0), 0.0, {"kind": "metadata"})


@register("aten::reshape", "aten::flatten", "aten::contiguous")
def maybe_copy(call: Call) -> OpCost:
    """A view when the input is contiguous, else a copy (read + write the input once).

    These are CompositeImplicit: the counter sees the copy as ``aten::clone``;
    this formula serves direct callers.
    """
    t = call.tensor(0, "self")
    if t is None or t.contiguous:
        return OpCost(extra={"kind": "view"})
    return OpCost(0.0, float(t.nbytes), float(t.nbytes), {"kind": "copy"})


@register("aten::to", "aten::type_as")
def to(call: Call) -> OpCost:
    """A no-op when dtype (and device) already match, else a converting copy (read input, write output)."""
    t = call.tensor(0, "self")
    if t is None:
        return OpCost(extra={"kind": "view"})
    target = call.tensor(1, "other")
    dtype = target.dtype if target is not None else next(
        (a for a in (*call.args[1:], *call.kwargs.values()) if is_dtype(a)), t.dtype
    )
    copy = bool(call.kwargs.get("copy", False))
    if dtype == t.dtype and not copy:
        return OpCost(extra={"kind": "view"})
    return OpCost(0.0, float(t.nbytes), float(t.numel * dtype.itemsize), {"kind": "copy"})


# --- creation --------------------------------------------------------------------


def _out_or(call: Call, shape: tuple[int, ...] | None, dtype: DType | None) -> TensorMeta | None:
    out = call.out(0) or call.out_kwarg()
    if out is not None:
        return out
    if shape is None:
        return None
    return TensorMeta(tuple(int(s) for s in shape), dtype or default_dtype())


def _dtype_kw(call: Call, default: DType | None) -> DType | None:
    dt = call.kwargs.get("dtype")
    return dt if is_dtype(dt) else default


def _size_arg(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v):
        return tuple(v)
    return None


@register(
    "aten::zeros",
    "aten::ones",
    "aten::full",
    "aten::rand",
    "aten::randn",
    "aten::normal",
    "aten::scalar_tensor",
)
def create_sized(call: Call) -> OpCost | None:
    """Creation from a size: writes the output once (RNG draws are not counted as FLOPs)."""
    shape = () if call.name == "aten::scalar_tensor" else _size_arg(call.arg(0, "size"))
    out = _out_or(call, shape, _dtype_kw(call, None))
    return None if out is None else OpCost(0.0, 0.0, float(out.nbytes), {"kind": "create"})


@register("aten::randint", "aten::randperm", "aten::arange", "aten::linspace", "aten::eye", "aten::tril_indices",
          "aten::triu_indices")
def create_other(call: Call) -> OpCost | None:
    """Creation whose size comes from several arguments: the output's size is needed (the counter knows it)."""
    out = call.out(0) or call.out_kwarg()
    if out is None and call.name == "aten::randint":
        size = next((_size_arg(a) for a in call.args if _size_arg(a) is not None), None)
        out = _out_or(call, size, _dtype_kw(call, dtypes.INT64))
    if out is None and call.name == "aten::arange":
        nums = [a for a in call.args if isinstance(a, (int, float)) and not isinstance(a, bool)]
        if nums:
            start, end, step = (0, nums[0], 1) if len(nums) == 1 else (nums[0], nums[1], nums[2] if len(nums) > 2 else 1)
            n = max(0, math.ceil((end - start) / step))
            out = TensorMeta((n,), _dtype_kw(call, dtypes.INT64 if all(isinstance(x, int) for x in nums) else None)
                             or default_dtype())
    return None if out is None else OpCost(0.0, 0.0, float(out.nbytes), {"kind": "create"})


@register("aten::zeros_like", "aten::ones_like", "aten::full_like", "aten::rand_like", "aten::randn_like",
          "aten::randint_like")
def create_like(call: Call) -> OpCost | None:
    src = call.tensor(0, "self")
    out = _out_or(call, src.shape if src else None, _dtype_kw(call, src.dtype if src else None))
    return None if out is None else OpCost(0.0, 0.0, float(out.nbytes), {"kind": "create"})


@register("aten::new_zeros", "aten::new_ones", "aten::new_full")
def create_new(call: Call) -> OpCost | None:
    src = call.tensor(0, "self")
    out = _out_or(call, _size_arg(call.arg(1, "size")), _dtype_kw(call, src.dtype if src else None))
    return None if out is None else OpCost(0.0, 0.0, float(out.nbytes), {"kind": "create"})


@register("aten::fill_", "aten::zero_", "aten::uniform_", "aten::normal_", "aten::random_", "aten::exponential_",
          "aten::bernoulli_", "aten::geometric_", "aten::log_normal_", "aten::cauchy_")
def fill_inplace(call: Call) -> OpCost | None:
    """In-place fill (or RNG fill): writes ``self`` once; a tensor fill value is read."""
    t = call.tensor(0, "self")
    if t is None:
        return None
    val = call.tensor(1)
    return OpCost(0.0, float(val.nbytes if val else 0), float(t.nbytes), {"kind": "create"})


@register("aten::bernoulli")
def bernoulli(call: Call) -> OpCost | None:
    t = call.tensor(0, "self")
    if t is None:
        return None
    out = _out_or(call, t.shape, t.dtype)
    assert out is not None
    p = call.tensor(1, "p")
    return OpCost(0.0, float(t.nbytes + (p.nbytes if p else 0)), float(out.nbytes), {"kind": "create"})


# --- copies ---------------------------------------------------------------------


@register(
    "aten::clone",
    "aten::_to_copy",
    "aten::lift_fresh_copy",
    "aten::alias_copy",
    "aten::detach_copy",
    "aten::t_copy",
    "aten::view_copy",
    "aten::permute_copy",
    "aten::transpose_copy",
    "aten::unsqueeze_copy",
    "aten::squeeze_copy",
    "aten::_to_dense",
    "aten::to_dense",
    "aten::flip",
    "aten::roll",
    "aten::tril",
    "aten::triu",
    "aten::_conj_physical",
    "aten::conj_physical",
    "aten::_neg_view_copy",
)
def copy_unary(call: Call) -> OpCost | None:
    """Read the input once, write an output of the same shape (dtype from the output or the ``dtype`` kwarg)."""
    t = call.tensor(0, "self")
    if t is None:
        return None
    out = _out_or(call, t.shape, _dtype_kw(call, t.dtype))
    assert out is not None
    return OpCost(0.0, float(t.nbytes), float(out.nbytes), {"kind": "copy"})


@register("aten::copy_")
def copy_inplace(call: Call) -> OpCost | None:
    """``self.copy_(src)``: read ``src`` (at its own size: broadcasting re-reads nothing new), write ``self``."""
    dst = call.tensor(0, "self")
    src = call.arg(1, "src")
    if dst is None:
        return None
    read = src.nbytes if isinstance(src, TensorMeta) else 0
    return OpCost(0.0, float(read), float(dst.nbytes), {"kind": "copy"})


@register(
    "aten::slice_copy",
    "aten::select_copy",
    "aten::narrow_copy",
    "aten::expand_copy",
    "aten::as_strided_copy",
    "aten::diagonal_copy",
    "aten::repeat",
    "aten::constant_pad_nd",
    "aten::reflection_pad1d",
    "aten::reflection_pad2d",
    "aten::replication_pad1d",
    "aten::replication_pad2d",
)
def copy_reshaped(call: Call) -> OpCost | None:
    """Copies whose output shape differs from the input's: write the output, read what it is made of."""
    t = call.tensor(0, "self")
    out = call.out(0) or call.out_kwarg()
    if t is None:
        return None
    if out is None:
        out = _reshaped_out(call, t)
        if out is None:
            return None
    whole = call.name in ("aten::repeat", "aten::expand_copy") or "pad" in call.name
    read = t.nbytes if whole else out.nbytes
    return OpCost(0.0, float(read), float(out.nbytes), {"kind": "copy"})


def _reshaped_out(call: Call, t: TensorMeta) -> TensorMeta | None:
    if call.name == "aten::repeat":
        reps = _size_arg(call.arg(1, "repeats"))
        if reps is None:
            return None
        shape = (1,) * (len(reps) - t.ndim) + t.shape
        return TensorMeta(tuple(a * b for a, b in zip(shape, reps, strict=True)), t.dtype)
    if call.name == "aten::expand_copy":
        size = _size_arg(call.arg(1, "size"))
        if size is None:
            return None
        pad = (1,) * (len(size) - t.ndim) + t.shape
        return TensorMeta(tuple(p if s == -1 else s for s, p in zip(size, pad, strict=True)), t.dtype)
    if call.name in ("aten::slice_copy", "aten::narrow_copy", "aten::select_copy"):
        dim = int(call.arg(1, "dim", 0))
        shape = list(t.shape)
        d = dim % max(1, t.ndim)
        if call.name == "aten::select_copy":
            shape.pop(d)
        elif call.name == "aten::narrow_copy":
            shape[d] = int(call.arg(3, "length", shape[d]))
        else:
            start = call.arg(2, "start") or 0
            end = call.arg(3, "end")
            step = int(call.arg(4, "step", 1) or 1)
            start = max(0, start + shape[d] if start < 0 else start)
            end = shape[d] if end is None else min(shape[d], end + shape[d] if end < 0 else end)
            shape[d] = max(0, (end - start + step - 1) // step)
        return TensorMeta(tuple(shape), t.dtype)
    return None


@register("aten::cat", "aten::stack", "aten::concat", "aten::concatenate", "aten::hstack", "aten::vstack")
def cat(call: Call) -> OpCost | None:
    """Read every input once, write the output once (its size is the inputs' total)."""
    tensors = [t for t in iter_tensors(call.arg(0, "tensors")) if t.numel > 0 or t.ndim > 1]
    if not tensors:
        return OpCost(extra={"kind": "copy"})
    read = sum(t.nbytes for t in tensors)
    out = call.out(0) or call.out_kwarg()
    itemsize = out.itemsize if out is not None else max(t.itemsize for t in tensors)
    written = out.nbytes if out is not None else sum(t.numel for t in tensors) * itemsize
    return OpCost(0.0, float(read), float(written), {"kind": "copy"})


@register("aten::slice_backward", "aten::select_backward", "aten::diagonal_backward", "aten::unfold_backward",
          "aten::as_strided_scatter", "aten::slice_scatter", "aten::select_scatter", "aten::diagonal_scatter")
def embed_into(call: Call) -> OpCost | None:
    """Place a smaller tensor into a full-size output (backward of a view, or ``*_scatter``).

    The output is written once at full size; the small tensor (and, for
    ``*_scatter``, the base) is read once.
    """
    if call.name.endswith("_backward"):
        grad = call.tensor(0, "grad_output") or call.tensor(0, "grad")
        sizes = _size_arg(call.arg(1, "input_sizes"))
        out = call.out(0) or (TensorMeta(sizes, grad.dtype) if sizes is not None and grad is not None else None)
        if grad is None or out is None:
            return None
        return OpCost(0.0, float(grad.nbytes), float(out.nbytes), {"kind": "copy"})
    base = call.tensor(0, "self")
    src = call.tensor(1, "src")
    if base is None or src is None:
        return None
    return OpCost(0.0, float(base.nbytes + src.nbytes), float(base.nbytes), {"kind": "copy"})


# --- gathers and scatters ----------------------------------------------------------


def _index_select_shape(call: Call) -> tuple[TensorMeta, TensorMeta, int] | None:
    t = call.tensor(0, "self")
    idx = call.tensor(2, "index")
    if t is None or idx is None:
        return None
    return t, idx, int(call.arg(1, "dim", 0))


@register("aten::index_select")
def index_select(call: Call) -> OpCost | None:
    """Gather whole slices along ``dim``: read the index and the selected slices, write them."""
    got = _index_select_shape(call)
    if got is None:
        return None
    t, idx, dim = got
    shape = list(t.shape) if t.ndim else [1]
    shape[dim % len(shape)] = idx.numel
    n = math.prod(shape)
    return OpCost(0.0, float(idx.nbytes + n * t.itemsize), float(n * t.itemsize), {"kind": "gather"})


@register("aten::gather", "aten::take", "aten::take_along_dim")
def gather(call: Call) -> OpCost | None:
    """Output has the index's shape: read the index and one source element per output element."""
    t = call.tensor(0, "self")
    idx = call.tensor(2, "index") if call.name == "aten::gather" else call.tensor(1, "index") or call.tensor(1)
    if t is None or idx is None:
        return None
    n = idx.numel
    return OpCost(0.0, float(idx.nbytes + n * t.itemsize), float(n * t.itemsize), {"kind": "gather"})


def _selected_count(self_t: TensorMeta, indices: list[Any]) -> int | None:
    """Elements selected by advanced indexing ``self[indices]`` (None when a boolean mask's values are unknown).

    Index tensors broadcast together; a boolean mask of k dims consumes k dims
    of ``self`` and selects its True entries; ``None`` keeps a dim whole.
    """
    idx_shapes: list[tuple[int, ...]] = []
    kept = 1
    d = 0
    for ix in indices:
        if ix is None:
            kept *= self_t.shape[d] if d < self_t.ndim else 1
            d += 1
        elif not isinstance(ix, TensorMeta):
            return None
        elif ix.dtype in (dtypes.BOOL, dtypes.UINT8):
            if ix.values is None:
                return None
            idx_shapes.append((int(ix.values.count_nonzero()),))
            d += ix.ndim
        else:
            idx_shapes.append(ix.shape)
            d += 1
    kept *= math.prod(self_t.shape[d:])
    return math.prod(broadcast_shape(idx_shapes)) * kept


@register("aten::index", "aten::_unsafe_index")
def index(call: Call) -> OpCost | None:
    """Advanced indexing (gather): read the index tensors and the selected elements, write them."""
    t = call.tensor(0, "self")
    indices = call.arg(1, "indices") or []
    if t is None:
        return None
    out = call.out(0)
    n = out.numel if out is not None else _selected_count(t, list(indices))
    if n is None:
        return None
    idx_bytes = sum(ix.nbytes for ix in iter_tensors(indices))
    return OpCost(0.0, float(idx_bytes + n * t.itemsize), float(n * t.itemsize), {"kind": "gather"})


@register("aten::index_put_", "aten::index_put", "aten::_index_put_impl_", "aten::_unsafe_index_put")
def index_put(call: Call) -> OpCost | None:
    """Scatter ``values`` into ``self[indices]``: read indices and values, write the selected elements.

    ``accumulate=True`` also reads the selected elements and adds (1 FLOP each).
    The out-of-place ``index_put`` first copies ``self`` (read + write of ``self``).
    """
    t = call.tensor(0, "self")
    indices = call.arg(1, "indices") or []
    values = call.tensor(2, "values")
    accumulate = bool(call.arg(3, "accumulate", False))
    if t is None or values is None:
        return None
    n = _selected_count(t, list(indices))
    if n is None:
        n = values.numel
    idx_bytes = sum(ix.nbytes for ix in iter_tensors(indices))
    sel = n * t.itemsize
    read = idx_bytes + values.nbytes + (sel if accumulate else 0)
    written = sel
    if call.name == "aten::index_put":
        read += t.nbytes
        written = t.nbytes
    return make_cost(n if accumulate else 0, t.dtype, read, written, kind="scatter")


def _scatter_like(call: Call, src_pos: int, ops_per_elem: int, inplace: bool) -> OpCost | None:
    t = call.tensor(0, "self")
    idx = call.tensor(2, "index")
    if t is None or idx is None:
        return None
    src = call.tensor(src_pos, "src") or call.tensor(src_pos, "source")
    n = idx.numel if call.name.startswith("aten::scatter") else (src.numel if src is not None else idx.numel)
    touched = n * t.itemsize
    read = idx.nbytes + (src.nbytes if src is not None else 0) + (touched if ops_per_elem else 0)
    written = touched
    if not inplace:
        read += t.nbytes
        written = t.nbytes
    alpha = call.kwargs.get("alpha", 1)
    ops = n * ops_per_elem + (n if ops_per_elem and alpha not in (1, 1.0) else 0)
    return make_cost(ops, t.dtype, read, written, kind="scatter")


@register("aten::scatter", "aten::scatter_")
def scatter(call: Call) -> OpCost | None:
    """``scatter(self, dim, index, src|value)``: write one element per index entry (out-of-place copies self)."""
    return _scatter_like(call, 3, 0, call.name.endswith("_"))


@register("aten::scatter_add", "aten::scatter_add_", "aten::scatter_reduce", "aten::scatter_reduce_")
def scatter_add(call: Call) -> OpCost | None:
    """Like scatter, plus one read-modify-write add per index entry."""
    return _scatter_like(call, 3, 1, call.name.endswith("_"))


@register("aten::index_add", "aten::index_add_")
def index_add(call: Call) -> OpCost | None:
    """``self.index_add_(dim, index, source, alpha)``: one add per source element (+1 multiply if alpha != 1)."""
    return _scatter_like(call, 3, 1, call.name.endswith("_"))


@register("aten::index_copy", "aten::index_copy_")
def index_copy(call: Call) -> OpCost | None:
    return _scatter_like(call, 3, 0, call.name.endswith("_"))


@register("aten::index_fill", "aten::index_fill_")
def index_fill(call: Call) -> OpCost | None:
    """Fill whole slices along ``dim``: write them, read the index."""
    got = _index_select_shape(call)
    if got is None:
        return None
    t, idx, dim = got
    slice_n = t.numel // max(1, t.dim(dim)) if t.ndim else 1
    touched = idx.numel * slice_n * t.itemsize
    if call.name.endswith("_"):
        return OpCost(0.0, float(idx.nbytes), float(touched), {"kind": "scatter"})
    return OpCost(0.0, float(idx.nbytes + t.nbytes), float(t.nbytes), {"kind": "scatter"})


@register("aten::masked_select", "aten::nonzero", "aten::argwhere", "aten::masked_scatter", "aten::masked_scatter_",
          "aten::repeat_interleave", "aten::unique_consecutive", "aten::_unique2", "aten::unique_dim")
def data_dependent(call: Call) -> OpCost | None:
    """Output size depends on the data: read every input once, write the outputs the call produced.

    Without the outputs (a pure call without them) this returns None.
    ``masked_scatter_`` writes ``self``. Sorting-based uniques count no FLOPs.
    """
    if call.name == "aten::masked_scatter_":
        t = call.tensor(0, "self")
        return None if t is None else OpCost(0.0, float(sum(x.nbytes for x in call.inputs())), float(t.nbytes),
                                             {"kind": "copy"})
    if call.outputs is None:
        return None
    read = sum(x.nbytes for x in call.inputs())
    written = sum(o.nbytes for o in call.outputs if o is not None)
    return OpCost(0.0, float(read), float(written), {"kind": "copy"})


@register("aten::searchsorted", "aten::bucketize")
def searchsorted(call: Call) -> OpCost | None:
    """Binary search: ceil(log2(len(boundaries))) comparisons per query element."""
    if call.name == "aten::bucketize":
        q, b = call.tensor(0, "self"), call.tensor(1, "boundaries")
    else:
        b, q = call.tensor(0, "sorted_sequence"), call.tensor(1, "self")
    if q is None or b is None:
        return None
    steps = max(1, math.ceil(math.log2(max(2, b.shape[-1] if b.ndim else 1))))
    out_int32 = bool(call.kwargs.get("out_int32", False))
    written = q.numel * (4 if out_int32 else 8)
    return make_cost(q.numel * steps, q.dtype, q.nbytes + b.nbytes, written, kind="search")


@register("aten::coalesce", "aten::_coalesce")
def coalesce(call: Call) -> OpCost | None:
    """Sparse COO coalesce: sort the nnz indices (n log2 n integer compares), sum duplicates."""
    t = call.tensor(0, "self")
    if t is None or t.sparse_nnz is None:
        return None
    nnz = t.sparse_nnz
    out = call.out(0)
    written = out.nbytes if out is not None else t.nbytes
    row = math.prod(t.shape[t.sparse_dim :])
    cost = make_cost(nnz * row, t.dtype, t.nbytes, written, kind="sort")
    cost.extra["int_ops"] = float(nnz * max(1, math.ceil(math.log2(max(2, nnz)))))
    return cost


@register("aten::sparse_mask")
def sparse_mask(call: Call) -> OpCost | None:
    """Gather ``self`` at the mask's nnz positions."""
    t, mask = call.tensor(0, "self"), call.tensor(1, "mask")
    if t is None or mask is None or mask.sparse_nnz is None:
        return None
    row = math.prod(t.shape[mask.sparse_dim :])
    sel = mask.sparse_nnz * row * t.itemsize
    idx = mask.sparse_nnz * mask.sparse_dim * 8
    return OpCost(0.0, float(idx + sel), float(idx + sel), {"kind": "gather"})
