"""Stage rules (``--stage-rules FILE``): the user's globs that place modules in stages, as pydantic models.

Apart from :mod:`recstack.profiling.rules` (which re-exports them lazily) so that code that only places
modules by their names and types loads no pydantic.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from recstack.config.loading import load_yaml_file, parse_config
from recstack.stage_names import FORWARD_STAGES


class StageRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    match: str = Field(min_length=1, description="glob on the module path, e.g. 'over_arch.*'")
    stage: str

    def model_post_init(self, _ctx: object) -> None:
        if self.stage not in FORWARD_STAGES + ("other",):
            raise ValueError(f"stage must be one of {', '.join(FORWARD_STAGES + ('other',))} (got {self.stage!r})")


class StageRules(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[StageRule] = Field(default_factory=list)


def load_stage_rules(path: str | Path) -> StageRules:
    return parse_config(StageRules, load_yaml_file(path), source=str(path))
