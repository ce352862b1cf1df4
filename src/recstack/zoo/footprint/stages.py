"""The zoo's forward stages by top-level module name (as the profiler's name rules place them)."""

from __future__ import annotations

FORWARD = ("feature_processing", "embedding", "dense", "interaction", "sequence", "head")
TRAIN = ("loss", "backward", "optimizer")

_CHILD_STAGE = {
    "feature_processing": "feature_processing",
    "sparse_arch": "embedding",
    "dense_arch": "dense",
    "query_dense_arch": "dense",
    "candidate_dense_arch": "dense",
    "inter_arch": "interaction",
    "attention": "sequence",
    "interest_extractor": "sequence",
    "interest_evolution": "sequence",
    "transformer": "sequence",
    "encoder": "sequence",
    "over_arch": "head",
    "task_towers": "head",
}


def stage_of_child(name: str) -> str | None:
    """The stage of a zoo model's top-level child ``name`` (None: not a stage root)."""
    return _CHILD_STAGE.get(name)
