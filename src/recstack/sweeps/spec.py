"""The sweep file: which runs a sweep makes, as RunConfig fields, expanded and validated before any runs.

    base:    {scale: 0.01, iters: 8}          # fields every point shares (optional)
    grid:    {model: [rmc1, ncf], batch_size: [16, 256]}   # cartesian product
    zip:     {backend: [torch, tbe], table_dtype: [fp32, fp16]}  # lists walked together
    points:  [{model: dien, batch_size: 64}]  # explicit points, added as given (over base)
    exclude: [{model: ncf, batch_size: 256}]  # drop every point matching all of these fields
    min_timed_s: 3.0                          # optional: time-targeted timing passes (sweeps.calibrate)

Expansion: every grid combination is joined with every zip row (the zip's
lists have one length), each over ``base``; then ``points`` are added, and
points matching an ``exclude`` entry are removed. Every point is validated by
:class:`~recstack.config.run.RunConfig` before anything runs; an error names
the point (its number and fields) and the field. A point that names no
``machine`` gets :data:`DEFAULT_MACHINE` (``auto``, as ``recstack profile``).
Points are ordered so that
those sharing a model build (model, scale, backend, dtypes, mode, workload)
run one after the other, smaller batches first.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from recstack.config.run import RunConfig, file_fields
from recstack.errors import ConfigError

# What a built zoo model depends on: points equal in these share one build (inference mode).
BUILD_FIELDS = ("model", "scale", "backend", "table_dtype", "dtype", "mode", "optimizer", "learning_rate", "seed",
                "tasks", "workload")

MAX_POINTS = 100_000
# What `recstack profile` uses by default: this host's cached machine file, so points are classified (bound
# columns) and their capacity probes compared, as a profile's are. A point's own ``machine`` (or none) wins.
DEFAULT_MACHINE = "auto"


def _check_fields(value: dict[str, Any], what: str) -> dict[str, Any]:
    unknown = [k for k in value if k not in RunConfig.model_fields]
    if unknown:
        raise ValueError(f"unknown RunConfig field {unknown[0]!r}; the fields are "
                         + ", ".join(RunConfig.model_fields))
    return value


class SweepSpec(BaseModel):
    """A sweep file (YAML) or dict: see the module docstring."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="a label for the sweep (stored in the sweeps table)")
    min_timed_s: float | None = Field(
        None, gt=0, le=3600, description="raise each point's iters so that its timing pass's steps take about "
        "this many seconds (recstack.sweeps.calibrate)")
    base: dict[str, Any] = Field(default_factory=dict, description="RunConfig fields every point shares")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="field -> values (cartesian product)")
    zip: dict[str, list[Any]] = Field(default_factory=dict, description="field -> values, walked together")
    points: list[dict[str, Any]] = Field(default_factory=list, description="explicit points (over base)")
    exclude: list[dict[str, Any]] = Field(default_factory=list, description="drop points matching all fields")

    @field_validator("base")
    @classmethod
    def _base_fields(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_fields(v, "base")

    @field_validator("grid", "zip")
    @classmethod
    def _lists(cls, v: dict[str, list[Any]], info: ValidationInfo) -> dict[str, list[Any]]:
        _check_fields(v, str(info.field_name))
        for k, values in v.items():
            if not values:
                raise ValueError(f"{k}: empty list; give at least one value or remove the field")
        return v

    @field_validator("zip")
    @classmethod
    def _zip_lengths(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        lengths = {k: len(vals) for k, vals in v.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"zipped lists must have one length (got {lengths})")
        return v

    @field_validator("points", "exclude")
    @classmethod
    def _point_fields(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, p in enumerate(v):
            _check_fields(p, f"[{i}]")
        return v

    # -- expansion ------------------------------------------------------------------
    def raw_points(self) -> list[dict[str, Any]]:
        """The points as field dicts (before validation), in file order."""
        overlap = (set(self.grid) & set(self.zip)) | ((set(self.grid) | set(self.zip)) & set(self.base))
        if overlap:
            raise ConfigError(f"field {sorted(overlap)[0]!r} is given twice (base, grid, zip); give it once",
                              field="grid")
        out: list[dict[str, Any]] = []
        if self.grid or self.zip or not self.points:
            keys = list(self.grid)
            zrows = [dict(zip(self.zip, vals, strict=True)) for vals in zip(*self.zip.values(), strict=True)] or [{}]
            combos = itertools.product(*(self.grid[k] for k in keys))
            for combo in combos:
                for z in zrows:
                    out.append({**self.base, **dict(zip(keys, combo, strict=True)), **z})
                    if len(out) > MAX_POINTS:
                        raise ConfigError(f"more than {MAX_POINTS} points; split the sweep", field="grid")
        out.extend({**self.base, **p} for p in self.points)
        return [p for p in out if not any(_matches(p, ex) for ex in self.exclude)]

    def expand(self, source: str | None = None) -> list[RunConfig]:
        """Every point as a validated RunConfig, ordered to share builds; duplicates removed."""
        raw = self.raw_points()
        if not raw:
            raise ConfigError("the sweep has no points (empty grid, or everything excluded)", source=source,
                              field="grid")
        configs: list[RunConfig] = []
        seen: set[str] = set()
        for i, p in enumerate(raw):
            try:
                cfg = RunConfig.build({"machine": DEFAULT_MACHINE, **p})
            except ConfigError as exc:
                where = f"point {i + 1} ({_describe(p)})"
                raise ConfigError(f"{where}: {exc.detail}", source=source, field=exc.field) from None
            if cfg.model is None:
                raise ConfigError(f"point {i + 1} ({_describe(p)}): no model; add model to base, grid or the point",
                                  source=source, field="model")
            key = cfg.key()
            if key not in seen:
                seen.add(key)
                configs.append(cfg)
        return sorted(configs, key=order_key)


def _matches(point: dict[str, Any], rule: dict[str, Any]) -> bool:
    return all(k in point and point[k] == v for k, v in rule.items())


def _describe(p: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in p.items() if not isinstance(v, dict))[:200]


def build_key(cfg: RunConfig) -> tuple[str, ...]:
    """Points with one build key can share a built model (inference only: training changes the weights)."""
    return tuple(str(getattr(cfg, f)) for f in BUILD_FIELDS)


def order_key(cfg: RunConfig) -> tuple[Any, ...]:
    return (build_key(cfg), cfg.batch_size, cfg.threads or 0, cfg.key())


def load_sweep(path: str | Path) -> tuple[SweepSpec, list[RunConfig]]:
    """Read and expand a sweep YAML; relative file names in it are relative to the YAML's folder."""
    from recstack.config.loading import load_yaml_file, parse_config

    data = load_yaml_file(path)
    spec = parse_config(SweepSpec, data, source=str(path))
    spec = _resolve_files(spec, Path(path).parent)
    return spec, spec.expand(source=str(path))


def _resolve_files(spec: SweepSpec, base: Path) -> SweepSpec:
    def fix(d: dict[str, Any]) -> dict[str, Any]:
        out = dict(d)
        for f in file_fields():
            v = out.get(f)
            if isinstance(v, str) and not Path(v).is_absolute() and (base / v).is_file():
                out[f] = str(base / v)
            if isinstance(v, list):
                out[f] = [str(base / x) if isinstance(x, str) and not Path(x).is_absolute() and (base / x).is_file()
                          else x for x in v]
        return out

    return spec.model_copy(update={"base": fix(spec.base), "grid": fix(spec.grid), "zip": fix(spec.zip),
                                   "points": [fix(p) for p in spec.points]})


def as_spec(spec: SweepSpec | dict[str, Any] | str | Path) -> tuple[SweepSpec, list[RunConfig]]:
    """A SweepSpec, a dict or a YAML file name -> (spec, expanded points)."""
    if isinstance(spec, (str, Path)):
        return load_sweep(spec)
    if isinstance(spec, dict):
        from recstack.config.loading import parse_config

        spec = parse_config(SweepSpec, spec, source="sweep")
    if not isinstance(spec, SweepSpec):
        raise ConfigError(f"must be a SweepSpec, a dict or a YAML file (got {type(spec).__name__})", field="spec")
    return spec, spec.expand()


__all__ = ["BUILD_FIELDS", "SweepSpec", "as_spec", "build_key", "load_sweep", "order_key"]
