"""The compile config: YAML kept apart from model code, validated, resolved against a model.

::

    defaults: {backend: inductor, dynamic: auto}      # settings for every compiled region
    rules:                                             # optional: regional compilation
      - {match: "dense_arch", mode: max-autotune-no-cudagraphs}
      - {match: "over_arch"}
      - {match: "sparse_arch*", enabled: false}        # keep eager (compiled around)
      - {match: "over_arch", options: {freezing: true}}  # inductor options (inference: weights as constants)

Without ``rules`` the whole model is one compiled region (whole-model mode).
With rules, every module whose path matches a rule (first matching rule wins,
its settings over ``defaults``) and is not inside another compiled module
becomes a compiled region; ``enabled: false`` on a module inside a compiled
region runs it eagerly (``torch.compiler.disable``: a graph break on purpose).
A rule that matches no module is an error naming the rule.
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from torch import nn

from recstack.config.loading import load_yaml_file, parse_config
from recstack.errors import ConfigError

WHOLE = ""  # the module path of the whole model


class DynamicDim(BaseModel):
    """A dynamic input dimension by name: argument ``arg`` of the region's forward (``*`` = every tensor
    argument; ``batch.dense`` = an attribute of an argument), dimension ``dim``, marked ``how``."""

    model_config = ConfigDict(extra="forbid")
    arg: str = Field(min_length=1, description="forward argument name, '*' for every tensor argument")
    dim: int = Field(0, ge=0, le=16)
    how: Literal["mark_dynamic", "maybe_mark_dynamic", "unbacked"] = "maybe_mark_dynamic"


class Settings(BaseModel):
    """How one region compiles; a field left out takes the ``defaults`` value (then torch's)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool | None = None
    backend: str | None = Field(None, min_length=1, description="inductor, aot_eager, eager or any registered")
    mode: str | None = Field(None, description="inductor mode: default, reduce-overhead, max-autotune, ...")
    dynamic: bool | Literal["auto"] | None = None
    fullgraph: bool | None = None
    dims: list[DynamicDim] | None = None
    recompile_limit: int | None = Field(None, ge=1, le=1024)
    on_recompile: Literal["allow", "fail"] | None = None
    options: dict[str, bool | int | float | str] | None = Field(
        None, description="inductor options passed as torch.compile(options=...), e.g. {freezing: true}")

    @field_validator("options")
    @classmethod
    def _known_options(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return v if v is None else check_inductor_options(v)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, v: str | None) -> str | None:
        if v is None:
            return v
        import torch

        known = set(torch.compiler.list_backends(exclude_tags=())) | {"inductor", "eager", "aot_eager"}
        if v not in known:
            raise ValueError(f"unknown backend {v!r}; registered: {', '.join(sorted(known))}")
        return v

    def over(self, base: Settings) -> Settings:
        """These settings with ``base`` filling the fields left out."""
        mine = self.model_dump(exclude_none=True)
        return Settings.model_validate({**base.model_dump(exclude_none=True), **mine})


class Rule(Settings):
    match: str = Field(min_length=1, description="glob on the module path, e.g. 'over_arch' or 'towers.*'")


class CompileConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    defaults: Settings = Field(default_factory=Settings)
    rules: list[Rule] = Field(default_factory=list)

    @property
    def whole_model(self) -> bool:
        return not self.rules

    def to_yaml(self) -> str:
        import yaml

        data: dict[str, Any] = {"defaults": self.defaults.model_dump(exclude_none=True, mode="json")}
        if self.rules:
            data["rules"] = [r.model_dump(exclude_none=True, mode="json") for r in self.rules]
        return yaml.safe_dump(data, sort_keys=False)


def check_inductor_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` if every key is an inductor option (``torch._inductor.list_options``) whose current
    value has the given value's type; else ValueError naming the first bad key. Where torch offers no
    list of options, the keys pass unchecked (torch.compile then rejects unknown ones itself)."""
    import torch._inductor as inductor
    import torch._inductor.config as iconfig

    lister = getattr(inductor, "list_options", None)
    known = set(lister()) if callable(lister) else None
    for key, value in options.items():
        if known is not None and key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=3)
            raise ValueError(f"unknown inductor option {key!r}" + (f"; did you mean {', '.join(near)}" if near else ""))
        current = getattr(iconfig, key, None)
        if type(current) in (bool, int, float, str) and type(value) is not type(current):
            raise ValueError(f"inductor option {key!r} takes a {type(current).__name__} (got {value!r})")
    return options


# torch's own defaults for fields no config sets (``dynamic: auto`` is torch's ``dynamic=None``).
TORCH_DEFAULTS = Settings(enabled=True, backend="inductor", mode=None, dynamic="auto", fullgraph=False, dims=[],
                          recompile_limit=None, on_recompile="allow", options=None)


def load_compile_config(source: str | Path | dict[str, Any] | CompileConfig) -> CompileConfig:
    """A compile config from a YAML file, a dict or an object; errors name the file and field."""
    if isinstance(source, CompileConfig):
        return source
    if isinstance(source, dict):
        return parse_config(CompileConfig, source, source="compile")
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"no such compile config file {str(path)!r}", field="compile")
    data = load_yaml_file(path)
    return parse_config(CompileConfig, data if data is not None else {}, source=str(path))


@dataclass
class Region:
    """One module compiled as a unit, with its resolved settings and the rule that chose it."""

    path: str
    settings: Settings
    rule: str


@dataclass
class Plan:
    """What a config does to a model: regions compiled, modules kept eager inside them."""

    regions: list[Region]
    eager: list[Region]  # enabled: false inside a compiled region (compiled around)
    whole_model: bool


def plan_regions(model: nn.Module, cfg: CompileConfig, *, source: str = "compile") -> Plan:
    """Resolve ``cfg`` against ``model``'s module paths. A rule matching no module raises ConfigError."""
    base = cfg.defaults.over(TORCH_DEFAULTS)
    if cfg.whole_model:
        regions = [Region(WHOLE, base, "defaults")] if base.enabled else []
        return Plan(regions=regions, eager=[], whole_model=True)
    paths = [p for p, _ in model.named_modules() if p]
    for i, r in enumerate(cfg.rules):
        if not any(fnmatch.fnmatchcase(p, r.match) for p in paths):
            near = ", ".join(p for p in paths if "." not in p)
            raise ConfigError(f"rule {r.match!r} matches no module; top-level modules are {near}",
                              source=source, field=f"rules[{i}].match")
    regions: list[Region] = []
    eager: list[Region] = []
    for p in paths:
        rule = next((r for r in cfg.rules if fnmatch.fnmatchcase(p, r.match)), None)
        if rule is None:
            continue
        s = Settings.model_validate(rule.model_dump(exclude={"match"})).over(base)
        inside = next((r for r in regions if p.startswith(r.path + ".")), None)
        if inside is None and s.enabled:
            regions.append(Region(p, s, rule.match))
        elif inside is not None and not s.enabled:
            eager.append(Region(p, s, rule.match))
    return Plan(regions=regions, eager=eager, whole_model=False)


__all__ = ["WHOLE", "CompileConfig", "DynamicDim", "Plan", "Region", "Rule", "Settings", "load_compile_config",
           "plan_regions"]
