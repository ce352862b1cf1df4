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
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from recstack.config.loading import load_yaml_file, parse_config
from recstack.errors import ConfigError

ARCHS = ("dlrm", "ncf", "wnd", "mtwnd", "din", "dien")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TableGroup(_Strict):
    """One table, or ``count`` identical tables named ``name_0 .. name_{count-1}``."""

    name: str = Field(min_length=1)
    rows: int = Field(gt=0)
    count: int = Field(default=1, gt=0)
    dim: int | None = Field(default=None, gt=0)
    feature: str | None = None
    pooling: float = Field(default=1.0, gt=0, description="IDs per sample (sequence: default length)")
    kind: Literal["pooled", "sequence"] = "pooled"
    max_length: int | None = Field(default=None, gt=0)
    fixed_length: bool = False

    @model_validator(mode="after")
    def _check(self) -> TableGroup:
        if self.kind == "sequence" and self.max_length is None:
            raise ValueError("a sequence table needs max_length (the longest sequence)")
        if self.max_length is not None and self.pooling > self.max_length:
            raise ValueError(f"pooling {self.pooling} exceeds max_length {self.max_length}")
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

    @property
    def bytes_fp32(self) -> int:
        return self.rows * self.dim * 4


class ModelConfig(_Strict):
    """A zoo model. Layer lists include the input width first (``[in, h1, ..., out]``)."""

    name: str = Field(min_length=1)
    arch: Literal["dlrm", "ncf", "wnd", "mtwnd", "din", "dien"]
    description: str = ""
    embedding_dim: int = Field(gt=0)
    dense_features: int = Field(default=0, ge=0)
    tables: list[TableGroup] = Field(min_length=1)
    # dlrm
    bottom_mlp: list[int] | None = None
    interaction: Literal["concat", "dot"] = "concat"
    # dlrm, wnd, din, dien: top MLP; mtwnd: the shared MLP
    top_mlp: list[int] | None = None
    wide: bool = True
    # ncf
    mlp: list[int] | None = None
    final_mlp: list[int] | None = None
    # mtwnd
    tasks: int = Field(default=1, gt=0)
    task_mlp: list[int] | None = None
    # din
    attention_hidden: list[int] | None = None
    # dien
    extractor_hidden: int | None = Field(default=None, gt=0)
    evolution_cell: Literal["augru", "gru", "rnn"] = "augru"
    extractor_cell: Literal["gru", "rnn"] = "gru"
    attention_dim: int | None = Field(default=None, gt=0)
    sequence_tables: str | None = None
    scale: float = Field(default=1.0, gt=0)

    @field_validator("bottom_mlp", "top_mlp", "mlp", "final_mlp", "task_mlp", "attention_hidden")
    @classmethod
    def _positive_widths(cls, v: list[int] | None) -> list[int] | None:
        if v is not None:
            if not v:
                raise ValueError("layer list is empty; give [input, hidden..., output]")
            if any(w <= 0 for w in v):
                raise ValueError("layer widths must be positive integers")
        return v

    def resolved_tables(self) -> list[Table]:
        out: list[Table] = []
        for g in self.tables:
            names = [g.name] if g.count == 1 else [f"{g.name}_{i}" for i in range(g.count)]
            for n in names:
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
                    )
                )
        seen: set[str] = set()
        for t in out:
            if t.name in seen:
                raise ConfigError(f"duplicate table name {t.name!r}; table names must be unique", field="tables")
            seen.add(t.name)
        return out

    def scaled(self, scale: float) -> ModelConfig:
        if not (scale > 0) or not math.isfinite(scale):
            raise ConfigError(f"must be a positive number (got {scale})", field="--scale")
        return self.model_copy(update={"scale": self.scale * scale})


BUILTIN = ("rmc1", "rmc2", "rmc3", "ncf", "wnd", "mtwnd", "din", "dien")


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
