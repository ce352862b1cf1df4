"""The results store's schema, as a numbered list of forward migrations.

The store records its version in ``meta`` (``schema_version``). Opening a store
for writing applies every migration newer than that, in order, each in one
transaction with the version bump; a store whose version is newer than this
recstack knows is refused (it was written by a newer recstack). Another
feature adds its tables with :func:`register`, at a version above the last,
here in this module so that every opening of a store knows every migration::

    register(3, "name", "CREATE TABLE name (point_id VARCHAR, ...)")

Versions are unique and the list is append-only: a released migration is never
edited (docs/sweeps.md documents each version). The three tables' columns are
the fields of their row models under :mod:`recstack.schema` (a released
column is never changed there either; tests/test_sweep.py holds the on-disk
columns of every table).

* 1: ``points``, ``stages``, ``sweeps`` (``recstack sweep``).
* 2: ``serving`` (``recstack serve --search --store``: one row per probe).
* 3: ``compile`` (``recstack compile --recommend --store``: one row per candidate config).
* 4: ``advice`` (``recstack advise --store``: one row per measured what-if and combination).

The ``points`` table's RunConfig columns follow :class:`~recstack.config.run.RunConfig`:
a field added to RunConfig later becomes a nullable column when a store is
opened for writing (:func:`run_config_columns`), so a new run option needs no
migration of its own.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from recstack.config.run import RunConfig
from recstack.schema.documents import columns
from recstack.schema.store_rows import CompileRow, ServingRow
from recstack.schema.sweep_model import PointRow


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: str | Callable[[Any], None]  # SQL (statements separated by ';'), or a function of the connection


MIGRATIONS: list[Migration] = []


def register(version: int, name: str, apply: str | Callable[[Any], None]) -> Migration:
    """Add a migration; versions must be new and above every registered one."""
    if MIGRATIONS and version <= MIGRATIONS[-1].version:
        raise ValueError(f"migration {version} ({name}) must be above {MIGRATIONS[-1].version}")
    m = Migration(version, name, apply)
    MIGRATIONS.append(m)
    return m


def latest() -> int:
    return MIGRATIONS[-1].version if MIGRATIONS else 0


def column_type(fname: str) -> str:
    """The DuckDB type of a RunConfig field's column (dicts and files as JSON text)."""
    kinds = _kinds(RunConfig.model_fields[fname].annotation)
    if any(k is dict or typing.get_origin(k) is dict for k in kinds):
        return "VARCHAR"
    if kinds and all(k is int for k in kinds):
        return "BIGINT"
    if kinds and all(k in (int, float) for k in kinds):
        return "DOUBLE"
    if kinds and all(k is bool for k in kinds):
        return "BOOLEAN"
    return "VARCHAR"


def _kinds(annotation: Any) -> list[Any]:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [k for a in typing.get_args(annotation) for k in _kinds(a)]
    if typing.get_origin(annotation) is Literal:
        return [type(a) for a in typing.get_args(annotation)]
    origin = typing.get_origin(annotation)
    return [] if annotation is type(None) else [origin or annotation]


def run_config_columns() -> dict[str, str]:
    """RunConfig field -> column type, in field order."""
    return {f: column_type(f) for f in RunConfig.model_fields}


POINT_COLUMNS = dict(columns(PointRow))
"""The ``points`` table's own columns (the row model's fields: :class:`recstack.schema.sweep_model.PointRow`)."""


def _v1(con: Any) -> None:
    cols = dict(POINT_COLUMNS)
    for f, t in run_config_columns().items():
        cols.setdefault(f, t)
    con.execute("CREATE TABLE points (" + ", ".join(f'"{k}" {v}' for k, v in cols.items()) + ")")
    con.execute(
        "CREATE TABLE stages (point_id VARCHAR NOT NULL, stage VARCHAR NOT NULL, time_s DOUBLE, share DOUBLE, "
        "flops DOUBLE, bytes DOUBLE, bound VARCHAR, roof_fraction DOUBLE, PRIMARY KEY (point_id, stage))"
    )
    con.execute(
        "CREATE TABLE sweeps (sweep_id VARCHAR PRIMARY KEY, name VARCHAR, spec VARCHAR, started TIMESTAMP, "
        "finished TIMESTAMP, host VARCHAR, recstack_version VARCHAR, executor VARCHAR, points_total INTEGER, "
        "points_run INTEGER, points_failed INTEGER, wall_s DOUBLE)"
    )


register(1, "points, stages, sweeps", _v1)

SERVING_COLUMNS: list[tuple[str, str]] = columns(ServingRow)  # recstack.schema.store_rows.ServingRow

# IF NOT EXISTS: a file that ``recstack serve --search --store`` wrote before the table joined the store
# (a DuckDB file holding only ``serving``, same columns) keeps its rows and becomes a store.
SERVING_TABLE = "CREATE TABLE IF NOT EXISTS serving (" + ", ".join(f"{n} {t}" for n, t in SERVING_COLUMNS) + ")"

register(2, "serving", SERVING_TABLE)

COMPILE_COLUMNS: list[tuple[str, str]] = columns(CompileRow)  # recstack.schema.store_rows.CompileRow

register(3, "compile", "CREATE TABLE compile (" + ", ".join(f"{n} {t}" for n, t in COMPILE_COLUMNS) + ")")

ADVICE_COLUMNS: list[tuple[str, str]] = [
    ("advice_id", "VARCHAR"),  # one ``recstack advise`` run
    ("name", "VARCHAR"),  # the lever (e.g. batch_size=1024), or the combination (a + b)
    ("created_at", "TIMESTAMP"),
    ("host", "VARCHAR"),
    ("recstack_version", "VARCHAR"),
    ("model", "VARCHAR"),
    ("mode", "VARCHAR"),
    ("goal", "VARCHAR"),  # throughput | latency
    ("config_key", "VARCHAR"),  # the baseline's RunConfig.key()
    ("run_config", "JSON"),  # the baseline RunConfig
    ("what_if_config", "JSON"),  # the baseline with the lever's change: what reproduces it
    ("rank", "INTEGER"),  # 1: top of the ranking
    ("lever_kind", "VARCHAR"),  # backend, dtype, ..., combination
    ("stage", "VARCHAR"),  # the stage it targets (step: the whole step)
    ("change", "JSON"),  # RunConfig fields the lever sets
    ("options", "JSON"),  # factory keyword options it sets
    ("exact_change", "VARCHAR"),
    ("recommended", "BOOLEAN"),
    ("winner", "BOOLEAN"),
    ("reason", "VARCHAR"),
    ("step_speedup", "DOUBLE"),  # baseline / what-if median time per sample, same rounds
    ("step_ci_low", "DOUBLE"),
    ("step_ci_high", "DOUBLE"),
    ("verdict", "VARCHAR"),  # improvement | regression | noise | unmeasured
    ("base_s", "DOUBLE"),  # median s per sample (uninstrumented steps / batch size, whatever the goal)
    ("what_if_s", "DOUBLE"),
    ("stage_speedup", "DOUBLE"),
    ("deviation_max_abs", "DOUBLE"),
    ("deviation_max_rel", "DOUBLE"),
    ("within_tolerance", "BOOLEAN"),
    ("tolerance", "DOUBLE"),
    ("loss_steps", "INTEGER"),  # training dtype levers: the loss after this many steps, fp32 and the lever
    ("loss_base", "DOUBLE"),
    ("loss_what_if", "DOUBLE"),
    ("loss_rel_dev", "DOUBLE"),
    ("build_s", "DOUBLE"),
    ("baseline_bytes", "BIGINT"),
    ("what_if_bytes", "BIGINT"),
    ("contended", "BOOLEAN"),
    ("result_json", "JSON"),  # the lever's whole result in the advice document
]

register(4, "advice", "CREATE TABLE advice (" + ", ".join(f"{n} {t}" for n, t in ADVICE_COLUMNS) + ")")

# A table a later migration adds -> its columns, so that reading it from an older store gives no rows.
LATER_TABLES: dict[str, list[tuple[str, str]]] = {"serving": SERVING_COLUMNS, "compile": COMPILE_COLUMNS,
                                                  "advice": ADVICE_COLUMNS}

__all__ = ["ADVICE_COLUMNS", "COMPILE_COLUMNS", "LATER_TABLES", "MIGRATIONS", "POINT_COLUMNS", "SERVING_COLUMNS", "SERVING_TABLE", "Migration", "column_type",
           "latest", "register", "run_config_columns"]
