"""The stage vocabulary, in tree order: one home for the names every layer (rules, analyses, renderers) uses.

A base module (imports nothing of recstack), so a renderer can order stages without importing the profiler.
"""

from __future__ import annotations

FORWARD_STAGES = ("feature_processing", "embedding", "dense", "interaction", "sequence", "head")
TRAIN_STAGES = ("loss", "backward", "optimizer")
ALL_STAGES = FORWARD_STAGES + TRAIN_STAGES + ("communication", "other")
