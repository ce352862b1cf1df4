"""A profile as a table: one row per node, for pandas, spreadsheets and SQL.

    from recstack.export import to_dataframe
    df = to_dataframe(Profile.load("out.json"))

Contract: :func:`node_rows` returns one dict per node in tree order (depth
first, parents before children) with :data:`BASE_COLUMNS` first, then every
scalar extra of any node, flattened (a dict extra ``latency_s`` becomes
``latency_s.p50`` ...; lists such as ``shapes`` are left out, their counts
such as ``distinct_shapes`` stay). A column that mixes strings with numbers is
written as strings. Missing values are ``None`` (empty in CSV, null in
Parquet, NaN/None in pandas). CSV needs nothing beyond the standard library;
Parquet needs ``pyarrow`` and :func:`to_dataframe` needs ``pandas``: a missing
one raises :class:`~recstack.errors.RecstackError` naming the package.

Files are written atomically (a temporary file renamed over the target), so a
full disk leaves an existing export intact. In CSV, a text cell that a
spreadsheet would run as a formula (it starts with ``=``, ``+``, ``-``, ``@``, a
tab or a carriage return, and is not a number) gets a leading ``'``, as
spreadsheets expect (:func:`spreadsheet_safe`); numbers are written as they are.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recstack.errors import DataError, RecstackError
from recstack.outputs import atomic_output
from recstack.tree import Node, Profile

if TYPE_CHECKING:
    import pandas

BASE_COLUMNS = (
    "path",
    "name",
    "level",
    "stage",
    "parent_path",
    "depth",
    "time_s",
    "self_time_s",
    "share_of_run",
    "calls",
    "flops",
    "bytes",
    "intensity",
    "bound",
)
FORMATS = ("csv", "parquet")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

Scalar = None | bool | int | float | str


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _flatten(prefix: str, v: Any, out: dict[str, Scalar]) -> None:
    if isinstance(v, float) and not math.isfinite(v):
        out[prefix] = None
    elif _scalar(v):
        out[prefix] = v
    elif isinstance(v, dict):
        for k, x in v.items():
            _flatten(f"{prefix}.{k}", x, out)


def _walk(node: Node, parent: str | None, depth: int) -> Iterator[tuple[Node, str | None, int]]:
    yield node, parent, depth
    for c in node.children:
        yield from _walk(c, node.path, depth + 1)


def node_rows(profile: Profile) -> list[dict[str, Scalar]]:
    """One row per node (see the module docstring); every row has every column."""
    total = profile.root.time_s
    rows: list[dict[str, Scalar]] = []
    extra_cols: dict[str, None] = {}
    for n, parent, depth in _walk(profile.root, None, 0):
        row: dict[str, Scalar] = {
            "path": n.path,
            "name": n.name,
            "level": n.level,
            "stage": n.stage,
            "parent_path": parent,
            "depth": depth,
            "time_s": n.time_s,
            "self_time_s": n.self_time_s,
            "share_of_run": (n.time_s / total) if total else None,
            "calls": n.calls,
            "flops": n.flops,
            "bytes": n.bytes,
            "intensity": n.intensity,
            "bound": n.bound if _scalar(n.bound) else str(n.bound),
        }
        flat: dict[str, Scalar] = {}
        for k, v in n.extra.items():
            if k != "bound":
                _flatten(k, v, flat)
        for k, v in flat.items():
            key = k if k not in BASE_COLUMNS else f"extra.{k}"
            row[key] = v
            extra_cols.setdefault(key)
        rows.append(row)
    columns = list(BASE_COLUMNS) + sorted(extra_cols)
    out = [{c: r.get(c) for c in columns} for r in rows]
    _unify_types(out, columns)
    return out


def column_kind(values: list[Scalar]) -> str:
    """"bool", "int", "float" or "str" for a column's non-null values ("float" if all are null)."""
    present = [v for v in values if v is not None]
    if not present:
        return "float"
    if all(isinstance(v, bool) for v in present):
        return "bool"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "int"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "float"
    return "str"


def _unify_types(rows: list[dict[str, Scalar]], columns: list[str]) -> None:
    for c in columns:
        kind = column_kind([r[c] for r in rows])
        for r in rows:
            v = r[c]
            if v is None:
                continue
            if kind == "str" and not isinstance(v, str):
                r[c] = str(v).lower() if isinstance(v, bool) else str(v)
            elif kind == "float":
                r[c] = float(v)


def to_dataframe(profile: Profile) -> pandas.DataFrame:
    """The node table as a pandas DataFrame (needs ``pandas``)."""
    try:
        import pandas as pd
    except ImportError:
        raise RecstackError("to_dataframe needs the 'pandas' package: pip install pandas") from None
    rows = node_rows(profile)
    columns = list(rows[0]) if rows else list(BASE_COLUMNS)
    df = pd.DataFrame.from_records(rows, columns=columns)
    for c in columns:
        if column_kind([r[c] for r in rows]) == "int" and df[c].isna().any():
            df[c] = df[c].astype("Int64")
    return df


def spreadsheet_safe(v: Scalar) -> Scalar:
    """``v``, or for text a spreadsheet would read as a formula (``=HYPERLINK(...)``), ``'`` + ``v``."""
    if not isinstance(v, str) or not v.startswith(FORMULA_START):
        return v
    try:
        float(v)
        return v  # a number written as text (a mixed column): not a formula
    except ValueError:
        return "'" + v


def write_csv(profile: Profile, path: str | Path) -> Path:
    """Write the node table as CSV (UTF-8, header row, empty cells for missing values), atomically."""
    rows = node_rows(profile)
    p = Path(path)
    try:
        with atomic_output(p) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=[spreadsheet_safe(c) for c in rows[0]])
            w.writeheader()
            for r in rows:
                w.writerow({spreadsheet_safe(k): ("" if v is None else spreadsheet_safe(v)) for k, v in r.items()})
    except OSError as exc:
        raise DataError(f"{p}: cannot write ({exc.strerror or exc})") from None
    return p


def write_parquet(profile: Profile, path: str | Path) -> Path:
    """Write the node table as Parquet with typed columns (needs ``pyarrow``)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise RecstackError("parquet export needs the 'pyarrow' package: pip install pyarrow") from None
    rows = node_rows(profile)
    types = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string()}
    arrays, names = [], []
    for c in rows[0]:
        vals = [r[c] for r in rows]
        arrays.append(pa.array(vals, type=types[column_kind(vals)]))
        names.append(c)
    table = pa.Table.from_arrays(arrays, names=names)
    table = table.replace_schema_metadata(
        {"recstack.run_id": profile.run_id, "recstack.model": str(profile.run.get("model", ""))}
    )
    p = Path(path)
    try:
        with atomic_output(p) as tmp:
            pq.write_table(table, tmp)
    except OSError as exc:
        raise DataError(f"{p}: cannot write ({exc})") from None
    return p


def export(profile: Profile, path: str | Path, fmt: str) -> Path:
    """Write the node table in ``fmt`` (``csv`` or ``parquet``) to ``path``."""
    if fmt == "csv":
        return write_csv(profile, path)
    if fmt == "parquet":
        return write_parquet(profile, path)
    raise DataError(f"export format must be one of {', '.join(FORMATS)} (got {fmt!r})")


__all__ = [
    "BASE_COLUMNS",
    "FORMATS",
    "export",
    "node_rows",
    "spreadsheet_safe",
    "to_dataframe",
    "write_csv",
    "write_parquet",
]
