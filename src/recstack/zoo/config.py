"""Model configs: a validated, declarative description of a zoo model.

A config names its architecture (``arch``), its embedding tables (with the
feature each table reads and how many IDs per sample it looks up) and the
widths of every dense layer. Widths that must agree with the tables (the
input width of an MLP after an interaction) are checked, and an error names
the field and the value that would fit.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from recstack.config.limits import (
    CONFIG_SCALE_MAX,
    DENSE_FEATURES_MAX,
    EMBEDDING_DIM_MAX,
    LAYER_WIDTH_MAX,
    LAYERS_MAX,
    SIZE_MAX,
    TABLE_COUNT_MAX,
    TABLE_ROWS_MAX,
    TASKS_MAX,
)
from recstack.config.loading import load_yaml_file, parse_config
from recstack.errors import ConfigError
from recstack.zoo import archs

ARCHS = archs.names()
"""Every architecture a config may name (the records of :mod:`recstack.zoo.archs`)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, value: object, info: ValidationInfo) -> object:
        # YAML's true/false would otherwise pass as 1/0 for a number field (embedding_dim: true)
        if isinstance(value, bool) and info.field_name and cls.model_fields[info.field_name].annotation is not bool:
            raise ValueError("expected a number or text, got a boolean")
        return value


Width = Annotated[int, Field(gt=0, le=LAYER_WIDTH_MAX)]
"""One dense layer width: 1 .. LAYER_WIDTH_MAX."""
Layers = Annotated[list[Width], Field(max_length=LAYERS_MAX)]


class TableGroup(_Strict):
    """One table, or ``count`` identical tables named ``name_0 .. name_{count-1}``."""

    name: str = Field(min_length=1, max_length=200)
    rows: int = Field(gt=0, le=TABLE_ROWS_MAX)
    count: int = Field(default=1, gt=0, le=TABLE_COUNT_MAX)
    dim: int | None = Field(default=None, gt=0, le=EMBEDDING_DIM_MAX)
    feature: str | None = Field(default=None, min_length=1, max_length=200)
    pooling: float = Field(default=1.0, gt=0, le=SIZE_MAX, description="IDs per sample (sequence: default length)")
    kind: Literal["pooled", "sequence"] = "pooled"
    max_length: int | None = Field(default=None, gt=0, le=SIZE_MAX)
    fixed_length: bool = False
    side: Literal["request", "candidate"] = Field(
        default="candidate", description="request: a feature of the ranking request (user, context)"
    )
    request_count: int = Field(
        default=0, ge=0, le=TABLE_COUNT_MAX, description="the first request_count tables of the group are request-side"
    )

    @model_validator(mode="after")
    def _check(self) -> TableGroup:
        if self.kind == "sequence" and self.max_length is None:
            raise ValueError("a sequence table needs max_length (the longest sequence)")
        if self.max_length is not None and self.pooling > self.max_length:
            raise ValueError(f"pooling {self.pooling} exceeds max_length {self.max_length}")
        if self.request_count > self.count:
            raise ValueError(f"request_count {self.request_count} exceeds count {self.count}")
        if self.count > 1 and self.feature is not None:
            raise ValueError("feature cannot be shared by a group of tables (count > 1); drop 'feature'")
        return self


class Table(_Strict):
    """A resolved table: one row of the model's embedding layout."""

    name: str
    rows: int
    dim: int
    feature: str
    pooling: float
    kind: Literal["pooled", "sequence"] = "pooled"
    max_length: int | None = None
    fixed_length: bool = False
    side: Literal["request", "candidate"] = "candidate"

    @property
    def bytes_fp32(self) -> int:
        return self.rows * self.dim * 4


class ModelConfig(_Strict):
    """A zoo model. Layer lists include the input width first (``[in, h1, ..., out]``)."""

    name: str = Field(min_length=1, max_length=200)
    arch: Literal[ARCHS]  # type: ignore[valid-type]  # the registry's names, so an unknown arch lists them
    description: str = ""
    embedding_dim: int = Field(gt=0, le=EMBEDDING_DIM_MAX)
    dense_features: int = Field(default=0, ge=0, le=DENSE_FEATURES_MAX)
    tables: list[TableGroup] = Field(min_length=1, max_length=TABLE_COUNT_MAX)
    # dlrm
    bottom_mlp: Layers | None = None
    interaction: Literal["concat", "dot", "dcn"] = "concat"
    # dlrm with interaction dcn (DCNv2): low-rank cross layers over [dense, embeddings]
    cross_layers: int | None = Field(default=None, gt=0, le=LAYERS_MAX)
    cross_rank: int | None = Field(default=None, gt=0, le=LAYER_WIDTH_MAX)
    # dlrm, wnd, din, dien: top MLP; mtwnd: the shared MLP
    top_mlp: Layers | None = None
    wide: bool = True
    # ncf
    mlp: Layers | None = None
    final_mlp: Layers | None = None
    # mtwnd
    tasks: int = Field(default=1, gt=0, le=TASKS_MAX)
    task_mlp: Layers | None = None
    # din
    attention_hidden: Layers | None = None
    # dien
    extractor_hidden: int | None = Field(default=None, gt=0, le=LAYER_WIDTH_MAX)
    evolution_cell: Literal["augru", "gru", "rnn"] = "augru"
    extractor_cell: Literal["gru", "rnn"] = "gru"
    attention_dim: int | None = Field(default=None, gt=0, le=LAYER_WIDTH_MAX)
    sequence_tables: str | None = None
    # deepfm: latent factors per field (each sparse table row holds [w, v_1..v_k, padding])
    fm_factors: int | None = Field(default=None, gt=0, le=EMBEDDING_DIM_MAX)
    # twotower: the user (query) and item (candidate) towers over tables named user*/item*
    user_tower: Layers | None = None
    item_tower: Layers | None = None
    # bst, hstu: stacked attention blocks over the behaviour sequence
    blocks: int | None = Field(default=None, gt=0, le=LAYERS_MAX)
    attention_heads: int | None = Field(default=None, gt=0, le=LAYER_WIDTH_MAX)
    ffn_dim: int | None = Field(default=None, gt=0, le=LAYER_WIDTH_MAX)  # bst
    linear_dim: int | None = Field(default=None, gt=0, le=LAYER_WIDTH_MAX)  # hstu: U and V width per head
    scale: float = Field(default=1.0, gt=0, le=CONFIG_SCALE_MAX)

    @field_validator("bottom_mlp", "top_mlp", "mlp", "final_mlp", "task_mlp", "attention_hidden", "user_tower", "item_tower")
    @classmethod
    def _positive_widths(cls, v: list[int] | None) -> list[int] | None:
        if v is not None:
            if not v:
                raise ValueError("layer list is empty; give [input, hidden..., output]")
        return v

    @model_validator(mode="after")
    def _check_table_count(self) -> ModelConfig:
        total = sum(g.count for g in self.tables)
        if total > TABLE_COUNT_MAX:
            raise ValueError(f"tables: {total:,} tables in all, above the limit {TABLE_COUNT_MAX:,}")
        return self

    def largest_scale(self) -> float:
        """The largest ``scale`` whose tables stay within TABLE_ROWS_MAX rows."""
        return TABLE_ROWS_MAX / max(g.rows for g in self.tables)

    def check_rows(self, field: str = "scale") -> None:
        """ConfigError (naming ``field`` and a scale that fits) if a scaled table exceeds TABLE_ROWS_MAX rows."""
        for g in self.tables:
            rows = g.rows * self.scale
            if not rows <= TABLE_ROWS_MAX:
                raise ConfigError(
                    f"table {g.name!r} would have {rows:.3g} rows at scale {self.scale:g}, above the limit "
                    f"{TABLE_ROWS_MAX:.0e}; use a scale of {_round_down(self.largest_scale()):g} or less",
                    field=field,
                )

    def resolved_tables(self) -> list[Table]:
        self.check_rows()
        out: list[Table] = []
        for g in self.tables:
            names = [g.name] if g.count == 1 else [f"{g.name}_{i}" for i in range(g.count)]
            for i, n in enumerate(names):
                rows = max(1, math.ceil(g.rows * self.scale))
                out.append(
                    Table(
                        name=n,
                        rows=rows,
                        dim=g.dim or self.embedding_dim,
                        feature=g.feature or n,
                        pooling=g.pooling,
                        kind=g.kind,
                        max_length=g.max_length,
                        fixed_length=g.fixed_length,
                        side="request" if i < g.request_count else g.side,
                    )
                )
        seen: set[str] = set()
        for t in out:
            if t.name in seen:
                raise ConfigError(f"duplicate table name {t.name!r}; table names must be unique", field="tables")
            seen.add(t.name)
        return out

    def summary_row(self, lookups_per_sample: float, dense_flops_per_sample: float, dense_params: int) -> dict:
        """The `zoo list` row (:class:`recstack.schema.zoo_model.ZooRow`): table figures from this config, the
        dense figures as given (from a skeleton)."""
        from recstack.schema.documents import check
        from recstack.schema.zoo_model import ZooRow

        tables = self.resolved_tables()
        return check(ZooRow, {
            "name": self.name,
            "arch": self.arch,
            "description": self.description,
            "tables": len(tables),
            "rows": sum(t.rows for t in tables),
            "embedding_dim": self.embedding_dim,
            "table_bytes": sum(t.bytes_fp32 for t in tables),
            "lookups_per_sample": lookups_per_sample,
            "dense_flops_per_sample": dense_flops_per_sample,
            "dense_params": dense_params,
            "params": sum(t.rows * t.dim for t in tables) + dense_params,
            "dense_features": self.dense_features,
            "scale": self.scale,
        })

    def scaled(self, scale: float) -> ModelConfig:
        if not (scale > 0) or not math.isfinite(scale):
            raise ConfigError(f"must be a positive number (got {scale})", field="--scale")
        new_scale = self.scale * scale
        fits = min(CONFIG_SCALE_MAX, self.largest_scale())
        if not new_scale <= fits:
            raise ConfigError(
                f"{scale:g} is too large: tables are limited to {TABLE_ROWS_MAX:.0e} rows and the scale to "
                f"{CONFIG_SCALE_MAX:g}; use --scale {_round_down(fits / self.scale):g} or less",
                field="--scale",
            )
        return self.model_copy(update={"scale": new_scale})


def _round_down(x: float) -> float:
    """``x`` rounded down to two significant digits (a suggested limit that really fits)."""
    if not x > 0 or not math.isfinite(x):
        return x
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return round(math.floor(x / step) * step, 12)


LISTING_ORDER = ("rmc1", "rmc2", "rmc3", "ncf", "wnd", "mtwnd", "din", "dien", "dlrmv2", "deepfm", "twotower", "bst", "hstu")
"""The order the shipped models are listed in (the paper's eight, then the modern ones); a YAML added to
``zoo/configs/`` and not named here lists after them, by name."""


def _shipped_models() -> tuple[str, ...]:
    """Every ``zoo/configs/NAME.yaml``: a new built-in model is one YAML file there."""
    names = [p.name[:-5] for p in resources.files("recstack.zoo").joinpath("configs").iterdir() if p.name.endswith(".yaml")]
    rank = {n: i for i, n in enumerate(LISTING_ORDER)}
    return tuple(sorted(names, key=lambda n: (rank.get(n, len(rank)), n)))


BUILTIN = _shipped_models()


ZOO_IDS = " ".join(BUILTIN)
"""The built-in ids as help texts and the README list them (one place: help that lists them cannot go stale)."""


def builtin_names() -> list[str]:
    return list(BUILTIN)


def load_model_config(name_or_path: str) -> ModelConfig:
    """A built-in model by id (``rmc1``), or a user YAML file path."""
    key = name_or_path.strip().lower()
    if key in BUILTIN:
        text = resources.files("recstack.zoo").joinpath(f"configs/{key}.yaml")
        with resources.as_file(text) as p:
            data = load_yaml_file(p)
        return parse_config(ModelConfig, data, source=f"{key}.yaml")
    p = Path(name_or_path)
    if p.suffix.lower() in (".yaml", ".yml") or p.exists():
        data = load_yaml_file(p)
        return parse_config(ModelConfig, data, source=str(p))
    raise ConfigError(
        f"unknown model {name_or_path!r}; choose one of {', '.join(BUILTIN)} or pass a model YAML file",
        field="model",
    )
