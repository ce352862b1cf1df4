"""A RunConfig resolved once into typed parts, every file it names read and checked before a model is built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from recstack.config.build import BuildOptions
from recstack.config.run import RunConfig
from recstack.usercode import is_factory

if TYPE_CHECKING:
    from recstack.compilation.config import CompileConfig
    from recstack.distributed.sharding import PlanFile
    from recstack.profiling.rules import StageRules


@dataclass(frozen=True)
class ModelSource:
    """What ``RunConfig.model`` names: a zoo model (an id or a model YAML) or a ``package.module:factory``."""

    kind: Literal["zoo", "factory", "module"]  # module: an nn.Module handed to recstack.profile
    name: str

    @classmethod
    def of(cls, model: str | None) -> ModelSource:
        if model is None:
            return cls("module", "")
        return cls("factory" if is_factory(model) else "zoo", model)


@dataclass(frozen=True)
class Parts:
    """The typed parts of one run: the config tree's sections, each parsed (files read, fields checked)."""

    source: ModelSource
    build: BuildOptions  # the build section (zoo models)
    rules: StageRules | None
    machine: dict[str, Any] | None
    machine_file: str | None  # where ``machine`` was read from (None for a dict or no machine)
    compile: CompileConfig | None
    sharding_plan: PlanFile | None  # a plan YAML of --nproc > 1 (None for a sharding type)


def resolve(cfg: RunConfig) -> Parts:
    """Read and check every file ``cfg`` names (stage rules, machine, compile config, sharding plan): errors
    name the file and the field (exit 2), before any model is built or factory called."""
    from recstack.profiling.rules import rules_of

    rules = rules_of(cfg.stage_rules)
    compile_cfg = None
    if cfg.compile is not None:
        from recstack.compilation.config import load_compile_config

        compile_cfg = load_compile_config(cfg.compile)
    plan = None
    if cfg.nproc > 1 and Path(cfg.sharding).is_file():
        from recstack.distributed.sharding import load_plan_file

        plan = load_plan_file(cfg.sharding)
    from recstack.hardware.machine import machine_with_file  # the one machine resolver (auto, a file, a dict)

    machine, machine_file = machine_with_file(cfg.machine)
    return Parts(ModelSource.of(cfg.model), BuildOptions.of(cfg), rules, machine, machine_file, compile_cfg, plan)


__all__ = ["ModelSource", "Parts", "resolve"]
