"""``--module-map FILE``: ranges that stand for modules, as pydantic models (loaded only when given)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from recstack.config.loading import load_yaml_file, parse_config


class ModuleMapEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    match: str = Field(min_length=1, description="glob on a range name, e.g. 'nn.Module: MLP_1' or '## dense ##'")
    path: str = Field(min_length=1, description="the module path that range stands for, e.g. 'over_arch'")
    type: str | None = Field(None, description="the module's class name, for the stage type rules")


class ModuleMap(BaseModel):
    """``--module-map FILE``: ``modules: [{match, path, type}]``, first match wins."""

    model_config = ConfigDict(extra="forbid")
    modules: list[ModuleMapEntry] = Field(default_factory=list)

    def lookup(self, name: str) -> ModuleMapEntry | None:
        return next((m for m in self.modules if fnmatch.fnmatchcase(name, m.match)), None)


def load_module_map(path: str | Path) -> ModuleMap:
    return parse_config(ModuleMap, load_yaml_file(path), source=str(path))
