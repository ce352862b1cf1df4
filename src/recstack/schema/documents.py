"""Result documents besides the profile: typed models, their committed JSON Schemas and generated docs.

Each document recstack writes (a machine file, a serving result, a compile report, ...) has a pydantic
model under :mod:`recstack.schema`; :data:`DOCUMENTS` names them. The writer validates what it writes
(:func:`check` returns the same dict: the model is a check, not a conversion, so outputs keep their keys),
and a reader of a file validates what it reads (:func:`check` with ``source``: one-line DataError).
``python -m recstack.schema`` writes ``NAME.schema.json`` beside ``profile.schema.json`` for each; ``python -m
recstack.schema.docgen docs/result-documents.md`` their tables.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import types
import typing
from dataclasses import dataclass
from importlib import resources
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from recstack.errors import DataError

NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


class Doc(BaseModel):
    """A result document's part: every key named (a writer that adds one adds it here)."""

    model_config = ConfigDict(extra="forbid")


class OpenDoc(BaseModel):
    """A part whose further keys are kept unchecked (files from other recstack versions add keys)."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class Column:
    """A field's store column type when its Python type does not say it (``Annotated[int, Column("BIGINT")]``)."""

    sql: str


_SQL = ((bool, "BOOLEAN"), (int, "INTEGER"), (float, "DOUBLE"), (str, "VARCHAR"), (dt.datetime, "TIMESTAMP"))


def columns(cls: type[BaseModel]) -> list[tuple[str, str]]:
    """The store columns of a row model, in field order: (name, DuckDB type). A field's :class:`Column` gives
    its type, else its Python type does (dicts, lists: JSON); a required field is NOT NULL."""
    out = []
    for name, f in cls.model_fields.items():
        sql = next((m.sql for m in f.metadata if isinstance(m, Column)), None) or _sql_type(f.annotation)
        out.append((f.alias or name, sql + (" NOT NULL" if f.is_required() and "PRIMARY" not in sql else "")))
    return out


def _sql_type(tp: Any) -> str:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        kinds = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = kinds[0] if len(kinds) == 1 else Any
    if typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return next((sql for py, sql in _SQL if tp is py), "JSON")


# name -> (model, "what writes it; where it is read"). In docs order.
DOCUMENTS: dict[str, tuple[str, str]] = {
    "machine": ("machine_model:MachineFile", "`recstack machine` (the host's cache and `-o FILE`; read by every "
                "roofline, docs/machine.md)"),
    "zoo-row": ("zoo_model:ZooRow", "`recstack zoo list --json` (one per model)"),
    "correlate": ("correlate_model:CorrelateDocument", "`recstack correlate --json-out FILE` (docs/correlate.md)"),
    "sweep-point": ("sweep_model:PointSummary", "a sweep point's worker (`recstack.sweeps.point.summarise`)"),
    "store-points-row": ("sweep_model:PointRow", "`recstack sweep` into the store's `points` table"),
    "serving": ("serving_model:ServingResult", "`recstack serve --json` (beside `qps` and `contention`; each "
                "probe's `result_json`), docs/serving.md"),
    "store-serving-row": ("store_rows:ServingRow", "`recstack serve --search --store` into the `serving` table"),
    "store-compile-row": ("store_rows:CompileRow", "`recstack compile --recommend --store` into the `compile` table"),
    "compile": ("compile_model:CompileReport", "`recstack compile --json` / `-o FILE` (docs/compile.md)"),
    "share": ("share_model:ShareResult", "`recstack share --json` (docs/sharing.md)"),
    "shard-sim": ("shard_sim_model:ShardSimPrediction", "`recstack shard-sim` (`--json`: its `prediction`)"),
    "rank-launch": ("launch_model:RankLaunchSpec", "`recstack profile --nproc N` for its ranks (`spec.json`, read "
                    "by each rank)"),
    "memory": ("memory_model:MemoryDocument", "`recstack memory --json` (docs/memory.md)"),
    "advice": ("advice_model:AdviceDocument", "`recstack advise --json` / `-o` (docs/advise.md)"),
}

D = TypeVar("D", bound=dict[str, Any])


def model(name: str) -> type[BaseModel]:
    module, _, attr = DOCUMENTS[name][0].partition(":")
    cls: type[BaseModel] = getattr(importlib.import_module(f"recstack.schema.{module}"), attr)
    return cls


def check(cls: type[BaseModel], d: D, source: str | None = None) -> D:
    """``d`` itself once it validates against ``cls``. Written (no ``source``): a mismatch is recstack's own
    bug (ValueError naming the key). Read from ``source``: DataError naming the file and the first bad key."""
    try:
        cls.model_validate(d)
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = f"{where}: {e['msg']} (got {_short(e.get('input'))})"
        if source is None:
            raise ValueError(f"{cls.__name__} written with {msg}") from None
        raise DataError(f"{source}: {msg}") from None
    return d


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def schema_file(name: str) -> str:
    return f"{name}.schema.json"


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of document ``name``, generated from its model."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://recstack.invalid/schema/documents/{name}.json",
        **model(name).model_json_schema(by_alias=True, mode="validation"),
    }


def json_schema_text(name: str) -> str:
    return json.dumps(json_schema(name), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def committed_json_schema(name: str) -> dict[str, Any]:
    text = resources.files("recstack.schema").joinpath(schema_file(name)).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded
