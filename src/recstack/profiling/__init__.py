"""Collectors: stage detection, the timing pass, the op pass, and assembling the Profile tree."""

from recstack.profiling.rules import StageRule, StageRules, detect_stages, load_stage_rules
from recstack.profiling.runner import ProfileOptions, profile_model

__all__ = ["ProfileOptions", "StageRule", "StageRules", "detect_stages", "load_stage_rules", "profile_model"]
