"""The results store's schema, as a numbered list of forward migrations.

The store records its version in ``meta`` (``schema_version``). Opening a store
for writing applies every migration newer than that, in order, each in one
transaction with the version bump; a store whose version is newer than this
recstack knows is refused (it was written by a newer recstack). Another
feature adds its tables with :func:`register`, at a version above the last,
here in this module so that every opening of a store knows every migration::

    register(3, "name", "CREATE TABLE name (point_id VARCHAR, ...)")

Versions are unique and the list is append-only: a released migration is never
edited (docs/sweeps.md documents each version).

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


POINT_COLUMNS = {
    # identity
    "point_id": "VARCHAR PRIMARY KEY",  # sha256 of config_hash, recstack_version, host (16 hex)
    "config_hash": "VARCHAR NOT NULL",  # RunConfig.key()
    "sweep_id": "VARCHAR",
    "config_json": "VARCHAR",
    # where and with what
    "recstack_version": "VARCHAR NOT NULL",
    "git_commit": "VARCHAR",
    "host": "VARCHAR NOT NULL",
    "cpu_model": "VARCHAR",
    "executor": "VARCHAR",
    "parallel": "INTEGER",  # points run side by side (1: alone)
    # outcome
    "status": "VARCHAR NOT NULL",  # ok | failed | timeout
    "reason": "VARCHAR",
    "attempts": "INTEGER",
    "started": "TIMESTAMP",
    "finished": "TIMESTAMP",
    "contended": "BOOLEAN",
    "contention_evidence": "VARCHAR",
    # figures (measured: uninstrumented steps of the timing pass)
    "step_p50_s": "DOUBLE",
    "step_p90_s": "DOUBLE",
    "step_p99_s": "DOUBLE",
    "throughput": "DOUBLE",  # samples/s at the p50 step: batch_size / step_p50_s
    "overhead": "DOUBLE",  # stage pass / uninstrumented step (median of paired ratios)
    "iters_run": "INTEGER",  # timing-pass pairs run (raised from iters by the sweep's min_timed_s)
    "timed_s": "DOUBLE",  # time inside the timed steps of the timing and op passes
    "wall_s": "DOUBLE",  # the point's wall time in its worker (build or reuse, passes, analyses)
    "build_s": "DOUBLE",  # model build time (0 when a build was reused)
    "store_write_s": "DOUBLE",  # the previous point's store transaction (measured by the writer)
    "profile_path": "VARCHAR",  # relative to the store's folder
}


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

SERVING_COLUMNS: list[tuple[str, str]] = [
    ("search_id", "VARCHAR"),
    ("probe", "INTEGER"),
    ("kind", "VARCHAR"),  # probe | result | best
    ("created_at", "TIMESTAMP"),
    ("model", "VARCHAR"),
    ("config_key", "VARCHAR"),
    ("run_config", "JSON"),
    ("max_batch", "INTEGER"),
    ("workers", "INTEGER"),
    ("threads", "INTEGER"),
    ("backend", "VARCHAR"),
    ("dtype", "VARCHAR"),
    ("gpu_threshold", "INTEGER"),
    ("target_pct", "DOUBLE"),
    ("target_s", "DOUBLE"),
    ("qps", "DOUBLE"),  # the scheduled rate of the probe (offered_qps: the arrivals drawn / duration)
    ("offered_qps", "DOUBLE"),
    ("achieved_qps", "DOUBLE"),
    ("requests", "BIGINT"),
    ("failed", "BIGINT"),
    ("late", "BIGINT"),
    ("p50_s", "DOUBLE"),
    ("p95_s", "DOUBLE"),
    ("p99_s", "DOUBLE"),
    ("p999_s", "DOUBLE"),
    ("mean_s", "DOUBLE"),
    ("target_ci_low_s", "DOUBLE"),
    ("target_ci_high_s", "DOUBLE"),
    ("queue_s_mean", "DOUBLE"),
    ("service_s_mean", "DOUBLE"),
    ("utilisation", "DOUBLE"),
    ("meets_target", "BOOLEAN"),
    ("qps_at_target", "DOUBLE"),
    ("contended", "BOOLEAN"),
    ("result_json", "JSON"),
]

# IF NOT EXISTS: a file that ``recstack serve --search --store`` wrote before the table joined the store
# (a DuckDB file holding only ``serving``, same columns) keeps its rows and becomes a store.
SERVING_TABLE = "CREATE TABLE IF NOT EXISTS serving (" + ", ".join(f"{n} {t}" for n, t in SERVING_COLUMNS) + ")"

register(2, "serving", SERVING_TABLE)

COMPILE_COLUMNS: list[tuple[str, str]] = [
    ("search_id", "VARCHAR"),  # one ``recstack compile --recommend`` run
    ("candidate", "INTEGER"),  # its order in the search (the chosen row repeats the chosen one's figures)
    ("kind", "VARCHAR"),  # candidate | composite | chosen
    ("created_at", "TIMESTAMP"),
    ("host", "VARCHAR"),
    ("recstack_version", "VARCHAR"),
    ("model", "VARCHAR"),
    ("mode", "VARCHAR"),
    ("config_key", "VARCHAR"),  # RunConfig.key()
    ("run_config", "JSON"),
    ("name", "VARCHAR"),  # e.g. per-stage/dynamic-auto, whole-model/static
    ("policy", "VARCHAR"),  # the dynamic-shape policy
    ("compile_config", "JSON"),  # the candidate's compile config (what --compile takes)
    ("eligible", "BOOLEAN"),
    ("why", "VARCHAR"),  # why not eligible
    ("run_speedup", "DOUBLE"),  # eager_run_s / compiled_run_s
    ("eager_run_s", "DOUBLE"),
    ("compiled_run_s", "DOUBLE"),
    ("stages", "JSON"),  # {stage: {eager_s, compiled_s, speedup}}
    ("recompiles", "INTEGER"),
    ("graph_breaks", "INTEGER"),
    ("fallbacks", "INTEGER"),
    ("numerics_ok", "BOOLEAN"),
    ("max_abs_err", "DOUBLE"),
    ("batch_sizes", "JSON"),
    ("eval_s", "DOUBLE"),  # the candidate's evaluation wall time
    ("result_json", "JSON"),  # the candidate's whole result
]

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
    ("base_s", "DOUBLE"),  # median s per sample (goal latency: per step)
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
