"""Tensor element types as the cost formulas see them, without importing torch.

A formula needs a dtype's size in bytes, whether it is floating point or complex, and torch's type
promotion; :class:`DType` holds exactly that, so the cost model prices shapes recorded in a trace
(dtype names such as ``float`` or ``c10::BFloat16``) without loading torch. Live tensors' dtypes are
converted at the boundary (:func:`as_dtype`, from :func:`recstack.costmodel.meta.meta_of`); a dtype
outside the table below (float8, unsigned 16-64 bit ...) is built from torch's own attributes, and its
promotion is asked of torch (which is then already loaded: the dtype came from a tensor).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DType:
    """One element type: torch's name (``float32``), size in bytes and kind."""

    name: str
    itemsize: int
    is_floating_point: bool = False
    is_complex: bool = False

    def __repr__(self) -> str:
        return f"torch.{self.name}"


BOOL = DType("bool", 1)
UINT8 = DType("uint8", 1)
INT8 = DType("int8", 1)
INT16 = DType("int16", 2)
INT32 = DType("int32", 4)
INT64 = DType("int64", 8)
FLOAT16 = DType("float16", 2, is_floating_point=True)
BFLOAT16 = DType("bfloat16", 2, is_floating_point=True)
FLOAT32 = DType("float32", 4, is_floating_point=True)
FLOAT64 = DType("float64", 8, is_floating_point=True)
COMPLEX64 = DType("complex64", 8, is_complex=True)
COMPLEX128 = DType("complex128", 16, is_complex=True)

BY_NAME = {d.name: d for d in (BOOL, UINT8, INT8, INT16, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64,
                               COMPLEX64, COMPLEX128)}
# Promotion category: bool < integer < floating < complex (torch's rule: the higher category wins).
_CATEGORY = {"bool": 0, "uint8": 1, "int8": 1, "int16": 1, "int32": 1, "int64": 1, "float16": 2, "bfloat16": 2,
             "float32": 2, "float64": 2, "complex64": 3, "complex128": 3}
_COMPLEX_OF = {2: COMPLEX64, 4: COMPLEX64, 8: COMPLEX128}  # a float's itemsize -> the complex that holds it
_FROM_TORCH: dict[Any, DType] = {}


def as_dtype(dt: Any) -> DType:
    """A torch.dtype (or a DType) as a DType."""
    if isinstance(dt, DType):
        return dt
    found = _FROM_TORCH.get(dt)
    if found is None:
        name = str(dt).removeprefix("torch.")
        found = BY_NAME.get(name) or DType(name, int(dt.itemsize), bool(dt.is_floating_point), bool(dt.is_complex))
        _FROM_TORCH[dt] = found
    return found


def is_dtype(x: Any) -> bool:
    """Whether ``x`` is a dtype argument (a DType; a live torch.dtype is converted before formulas see it)."""
    return isinstance(x, DType)


def default_dtype() -> DType:
    """torch's default floating dtype when torch is loaded (it may have been changed), else float32."""
    torch = sys.modules.get("torch")
    return as_dtype(torch.get_default_dtype()) if torch is not None else FLOAT32


def promote(a: DType, b: DType) -> DType:
    """``torch.promote_types(a, b)`` (the table's dtypes by rule; any other dtype by torch itself)."""
    if a == b:
        return a
    ca, cb = _CATEGORY.get(a.name), _CATEGORY.get(b.name)
    if ca is None or cb is None:
        import torch

        return as_dtype(torch.promote_types(getattr(torch, a.name), getattr(torch, b.name)))
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if _CATEGORY[hi.name] == 3 and _CATEGORY[lo.name] == 2:  # complex with a wider float
            return _COMPLEX_OF[max(lo.itemsize, hi.itemsize // 2)]
        return hi
    if ca == 1:
        if {a.name, b.name} == {"uint8", "int8"}:
            return INT16
        if "uint8" in (a.name, b.name):  # uint8 with a wider signed integer: the signed one
            return a if a.name != "uint8" else b
        return a if a.itemsize > b.itemsize else b
    if ca == 2 and a.itemsize == b.itemsize:  # float16 with bfloat16
        return FLOAT32
    return a if a.itemsize > b.itemsize else b
