"""Check a results store before anything reads or migrates it: one clear error naming the file and the fault.

A store a user hands us may be truncated (a copy cut short, a full disk), damaged
by hand, or written by something else. :func:`check_store` runs on every
opening of an existing store (:func:`recstack.store.db.migrate` before any
migration, every reader before its query) and refuses, as a
:class:`~recstack.errors.DataError` (exit 2):

* a ``meta.schema_version`` that is not a whole number;
* a table the store's version must have that is missing;
* a column of a table recstack wrote whose type is of another kind (text where a number belongs, ...);
* NULL in a key column (a point without ``point_id``, a stage without its point, ...);
* a file whose pages cannot be read (the key columns of every table are scanned, so truncation shows here).

Extra tables and columns are allowed (a user's own annotations); RunConfig
columns other than ``model`` and ``batch_size`` are not type-checked, since a
field's type may change between versions and an older store stays readable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recstack.errors import DataError
from recstack.store.migrations import ADVICE_COLUMNS, COMPILE_COLUMNS, POINT_COLUMNS, SERVING_COLUMNS

FIX = "restore the store from a copy, or give another store"

# table -> the schema version that added it
TABLE_VERSIONS = {"points": 1, "stages": 1, "sweeps": 1, "serving": 2, "compile": 3, "advice": 4}

STAGE_COLUMNS = {"point_id": "VARCHAR", "stage": "VARCHAR", "time_s": "DOUBLE", "share": "DOUBLE",
                 "flops": "DOUBLE", "bytes": "DOUBLE", "bound": "VARCHAR", "roof_fraction": "DOUBLE"}
SWEEP_COLUMNS = {"sweep_id": "VARCHAR", "name": "VARCHAR", "spec": "VARCHAR", "started": "TIMESTAMP",
                 "finished": "TIMESTAMP", "host": "VARCHAR", "recstack_version": "VARCHAR", "executor": "VARCHAR",
                 "points_total": "INTEGER", "points_run": "INTEGER", "points_failed": "INTEGER", "wall_s": "DOUBLE"}

# table -> {column: declared type}: what a store written by recstack has
COLUMNS: dict[str, dict[str, str]] = {
    "meta": {"key": "VARCHAR", "value": "VARCHAR"},
    "points": {**{k: v.split()[0] for k, v in POINT_COLUMNS.items()}, "model": "VARCHAR", "batch_size": "BIGINT"},
    "stages": STAGE_COLUMNS,
    "sweeps": SWEEP_COLUMNS,
    "serving": dict(SERVING_COLUMNS),
    "compile": dict(COMPILE_COLUMNS),
    "advice": dict(ADVICE_COLUMNS),
}

# table -> columns every row must fill (what the store is keyed and grouped by)
KEYS = {"meta": ("key",), "points": ("point_id", "config_hash", "status", "model"), "stages": ("point_id", "stage"),
        "sweeps": ("sweep_id",), "serving": ("search_id", "kind"), "compile": ("search_id", "kind"),
        "advice": ("advice_id", "name")}

_KINDS = {
    "number": ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
               "UBIGINT", "UHUGEINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL"),
    "text": ("VARCHAR", "JSON", "TEXT", "STRING"),
    "bool": ("BOOLEAN",),
    "time": ("TIMESTAMP", "DATE", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S"),
}


def kind_of(sql_type: str) -> str:
    """``number``, ``text``, ``bool``, ``time`` or the type itself (a kind of its own)."""
    base = sql_type.upper().split("(")[0].strip()
    return next((k for k, names in _KINDS.items() if base in names), base)


def read_version(con: Any, path: str | Path) -> int:
    """``meta.schema_version`` as an int (0: no meta table or no row); a value that is no integer is refused."""
    if "meta" not in tables(con):
        return 0
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return 0
    text = str(row[0]).strip() if row[0] is not None else ""
    if not (text.isdigit() and int(text) > 0):
        raise DataError(f"{path}: meta.schema_version is {row[0]!r}, not a whole number >= 1; "
                        f"the store is damaged ({FIX})")
    return int(text)


def tables(con: Any) -> dict[str, str]:
    """Table name -> type (``BASE TABLE`` or ``VIEW``) of the main schema."""
    return dict(con.execute("SELECT table_name, table_type FROM information_schema.tables "
                            "WHERE table_schema = 'main'").fetchall())


def check_store(con: Any, path: str | Path, version: int) -> None:
    """Refuse a store of ``version`` whose tables, column types or key columns are not what recstack wrote."""
    have = tables(con)
    for table, since in TABLE_VERSIONS.items():
        if version >= since and table not in have:
            raise DataError(f"{path}: table {table!r} is missing (a version-{version} store has "
                            f"{', '.join(t for t, v in TABLE_VERSIONS.items() if v <= version)}); "
                            f"the store is damaged ({FIX})")
    for table in [t for t in COLUMNS if t in have]:
        check_table(con, path, table)


def check_table(con: Any, path: str | Path, table: str) -> None:
    """One table: its known columns' kinds, then NULLs in its key columns. Every column is counted, which
    reads all of its pages: a truncated file fails here (a DataError from the guarded connection), before
    anything is migrated or appended."""
    found = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                             "WHERE table_schema = 'main' AND table_name = ?", [table]).fetchall())
    for col, want in COLUMNS[table].items():
        if col not in found:
            if col in KEYS[table]:
                raise DataError(f"{path}: {table}.{col}: column missing; the store is damaged ({FIX})")
            continue
        if kind_of(found[col]) != kind_of(want):
            raise DataError(f"{path}: {table}.{col} is {found[col]}, not {kind_of(want)} ({want}); "
                            f"the store is damaged or foreign ({FIX})")
    cols = list(found)
    counts = con.execute(f"SELECT count(*), {', '.join(f'count({chr(34)}{c}{chr(34)})' for c in cols)} "
                         f'FROM "{table}"').fetchone()
    filled = dict(zip(cols, counts[1:], strict=True))
    for k in (k for k in KEYS[table] if k in found):
        n = counts[0] - filled[k]
        if n:
            raise DataError(f"{path}: {table}.{k}: {n} row{'s' if n != 1 else ''} with no value (NULL) in a key "
                            f"column; the store is damaged ({FIX})")


__all__ = ["COLUMNS", "KEYS", "TABLE_VERSIONS", "check_store", "check_table", "kind_of", "read_version", "tables"]
