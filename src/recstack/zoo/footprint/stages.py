"""The zoo's forward stages by top-level module name (as the profiler's name rules place them)."""

from __future__ import annotations

from recstack.zoo import archs

FORWARD = ("feature_processing", "embedding", "dense", "interaction", "sequence", "head")
TRAIN = ("loss", "backward", "optimizer")

_CHILD_STAGE = {
    "feature_processing": "feature_processing",
    "sparse_arch": "embedding",
    "dense_arch": "dense",
    "inter_arch": "interaction",
    "over_arch": "head",
}
"""The top-level children every architecture shares; each adds its own (:attr:`recstack.zoo.archs.Arch.child_stages`)."""


def stage_of_child(name: str) -> str | None:
    """The stage of a zoo model's top-level child ``name`` (None: not a stage root)."""
    return _CHILD_STAGE.get(name) or archs.child_stages().get(name)
