"""Collectors: stage detection, the timing pass, the op pass, and assembling the Profile tree.

The names below load lazily, so that importing a submodule (the trace importer uses the stage rules and the
op-pass tree) does not import torch through the profile runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recstack.profiling.rules import StageRule, StageRules, detect_stages, load_stage_rules
    from recstack.profiling.runner import ProfileOptions, profile_model

__all__ = ["ProfileOptions", "StageRule", "StageRules", "detect_stages", "load_stage_rules", "profile_model"]
_LAZY = {"StageRule": "rules", "StageRules": "rules", "detect_stages": "rules", "load_stage_rules": "rules",
         "ProfileOptions": "runner", "profile_model": "runner"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"recstack.profiling.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'recstack.profiling' has no attribute {name!r}")
