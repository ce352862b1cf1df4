"""Realistic, reproducible workloads: what a serving system receives (:class:`RawBatch`).

Specs (YAML, validated) describe traffic; ``load_workload`` reads a preset
(``uniform``, ``production``) or a file; ``bind(spec, ...)`` resolves a spec for a
model's features; ``BoundWorkload.batch`` generates batches. ``fit_csv`` fits a spec
from data; ``locality_stats`` / ``workload_stats`` measure re-use in the form of
Meta's published 2022 statistics.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recstack.workload.batch import FeatureRequest, RawBatch, SparseInput
    from recstack.workload.fit import fit_csv, fit_summary
    from recstack.workload.generate import BoundWorkload, bind
    from recstack.workload.presets import list_presets, load_spec_file, load_workload
    from recstack.workload.spec import FeatureSpec, TablePopulation, WorkloadSpec
    from recstack.workload.stats import BUCKET_BOUNDS, PUBLISHED_2022, locality_stats, workload_stats

# Lazy (the names resolve on first use): the CLI's startup needs no torch.
_LAZY = {
    "BUCKET_BOUNDS": "recstack.workload.stats",
    "PUBLISHED_2022": "recstack.workload.stats",
    "BoundWorkload": "recstack.workload.generate",
    "FeatureRequest": "recstack.workload.batch",
    "FeatureSpec": "recstack.workload.spec",
    "RawBatch": "recstack.workload.batch",
    "SparseInput": "recstack.workload.batch",
    "TablePopulation": "recstack.workload.spec",
    "WorkloadSpec": "recstack.workload.spec",
    "bind": "recstack.workload.generate",
    "fit_csv": "recstack.workload.fit",
    "fit_summary": "recstack.workload.fit",
    "list_presets": "recstack.workload.presets",
    "load_spec_file": "recstack.workload.presets",
    "load_workload": "recstack.workload.presets",
    "locality_stats": "recstack.workload.stats",
    "workload_stats": "recstack.workload.stats",
}

__all__ = [
    "BUCKET_BOUNDS",
    "BoundWorkload",
    "FeatureRequest",
    "FeatureSpec",
    "PUBLISHED_2022",
    "RawBatch",
    "SparseInput",
    "TablePopulation",
    "WorkloadSpec",
    "bind",
    "fit_csv",
    "fit_summary",
    "list_presets",
    "load_spec_file",
    "load_workload",
    "locality_stats",
    "workload_stats",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'recstack.workload' has no attribute {name!r}")
