"""What a cost formula sees of an op call: tensor metadata, scalar arguments, optional outputs.

A formula never touches tensor data except the *values* of integer tensors
(embedding indices, offsets, per-table dims), which a :class:`TensorMeta`
carries by reference when they are available (a real tensor, not a meta or
fake one). Everything else is shapes, dtypes and the scalar arguments as the
dispatcher passed them (positional in schema order, keyword-only ones as
keyword arguments).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recstack.costmodel.dtypes import DType, as_dtype, default_dtype, promote

if TYPE_CHECKING:
    import torch

INDEX_BYTES = 8  # one int64 coordinate of a sparse COO index


@dataclass(frozen=True)
class TensorMeta:
    """Shape, dtype and (for integer tensors, when known) the values of one tensor.

    ``sparse_nnz`` is set for sparse COO tensors: their bytes are the stored
    values plus the int64 index matrix, not the dense size.
    """

    shape: tuple[int, ...]
    dtype: DType  # a torch.dtype given here is converted (as_dtype)
    values: torch.Tensor | None = None
    sparse_nnz: int | None = None
    sparse_dim: int = 0
    contiguous: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, DType):
            object.__setattr__(self, "dtype", as_dtype(self.dtype))

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return dtype_size(self.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of the stored data (sparse: values + index matrix)."""
        if self.sparse_nnz is not None:
            dense_part = math.prod(self.shape[self.sparse_dim :])
            return self.sparse_nnz * (dense_part * self.itemsize + self.sparse_dim * INDEX_BYTES)
        return self.numel * self.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_floating(self) -> bool:
        return self.dtype.is_floating_point or self.dtype.is_complex

    def dim(self, d: int) -> int:
        return self.shape[d if d >= 0 else d + len(self.shape)]


def dtype_size(dtype: DType | torch.dtype) -> int:
    return int(dtype.itemsize)


def meta_of(x: Any, keep_values: bool = True) -> Any:
    """Replace tensors (also inside lists and tuples) by TensorMeta and torch dtypes by DType; leave other
    values as they are. (A tensor or dtype means torch is loaded: it is not imported here.)"""
    if isinstance(x, TensorMeta):
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(meta_of(v, keep_values) for v in x)
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(x, torch.Tensor):
            return _tensor_meta(x, keep_values)
        if isinstance(x, torch.dtype):
            return as_dtype(x)
    return x


def _tensor_meta(t: torch.Tensor, keep_values: bool) -> TensorMeta:
    import torch

    if t.layout == torch.sparse_coo:
        return TensorMeta(tuple(t.shape), t.dtype, None, int(t._nnz()), int(t.sparse_dim()))
    if t.layout != torch.strided:
        return TensorMeta(tuple(int(s) for s in t.shape), t.dtype)
    values = None
    plain = type(t) in (torch.Tensor, torch.nn.Parameter)  # not a fake, functional or other subclass tensor
    if keep_values and plain and not (t.dtype.is_floating_point or t.dtype.is_complex) and t.device.type != "meta":
        values = t
    return TensorMeta(tuple(int(s) for s in t.shape), t.dtype, values, contiguous=t.is_contiguous())


def iter_tensors(x: Any) -> Iterator[TensorMeta]:
    if isinstance(x, TensorMeta):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from iter_tensors(v)


@dataclass
class Call:
    """One op call as a formula sees it.

    ``name`` is the packet name (``aten::addmm``); ``overload`` the overload
    (``default``, ``Tensor``, ...). ``outputs`` holds the metadata of the
    returned tensors when the caller knows them (the counter does); formulas
    use them only where the output size depends on data (boolean masks,
    jagged permutes) and fall back to what the inputs imply otherwise.
    """

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: tuple[TensorMeta, ...] | None = None
    overload: str = ""

    def arg(self, pos: int, name: str | None = None, default: Any = None) -> Any:
        if name is not None and name in self.kwargs:
            return self.kwargs[name]
        if pos < len(self.args):
            return self.args[pos]
        return default

    def tensor(self, pos: int, name: str | None = None) -> TensorMeta | None:
        v = self.arg(pos, name)
        return v if isinstance(v, TensorMeta) else None

    def inputs(self) -> list[TensorMeta]:
        """Every tensor argument (lists flattened), except an ``out=`` tensor."""
        found = list(iter_tensors(self.args))
        for k, v in self.kwargs.items():
            if k != "out":
                found.extend(iter_tensors(v))
        return found

    def out(self, i: int = 0) -> TensorMeta | None:
        if self.outputs is not None and i < len(self.outputs):
            return self.outputs[i]
        return None

    def out_kwarg(self) -> TensorMeta | None:
        v = self.kwargs.get("out")
        return v if isinstance(v, TensorMeta) else None


def broadcast_shape(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s):
            j = nd - len(s) + i
            if d != 1:
                out[j] = d
    return tuple(out)


def result_dtype(tensors: Sequence[TensorMeta], scalars: Sequence[Any] = ()) -> DType:
    """Type promotion as torch does it for the common cases (dimensioned tensors first, then scalars)."""
    dims = [t for t in tensors if t.ndim > 0] or list(tensors)
    if not dims:
        return default_dtype()
    dt = dims[0].dtype
    for t in dims[1:]:
        dt = promote(dt, t.dtype)
    if not (dt.is_floating_point or dt.is_complex) and any(isinstance(s, float) for s in scalars):
        dt = default_dtype()
    return dt


def int_values(t: TensorMeta | None) -> list[int] | None:
    """The values of a small integer tensor as Python ints, or None when they are not known."""
    if t is None or t.values is None:
        return None
    return [int(v) for v in t.values.reshape(-1).tolist()]
