"""Realistic, reproducible workloads: what a serving system receives (:class:`RawBatch`).

Specs (YAML, validated) describe traffic; ``load_workload`` reads a preset
(``uniform``, ``production``) or a file; ``bind(spec, ...)`` resolves a spec for a
model's features; ``BoundWorkload.batch`` generates batches. ``fit_csv`` fits a spec
from data; ``locality_stats`` / ``workload_stats`` measure re-use in the form of
Meta's published 2022 statistics.
"""

from recstack.workload.batch import FeatureRequest, RawBatch, SparseInput
from recstack.workload.fit import fit_csv, fit_summary
from recstack.workload.generate import BoundWorkload, bind
from recstack.workload.presets import list_presets, load_spec_file, load_workload
from recstack.workload.spec import FeatureSpec, TablePopulation, WorkloadSpec
from recstack.workload.stats import BUCKET_BOUNDS, PUBLISHED_2022, locality_stats, workload_stats

__all__ = [
    "BUCKET_BOUNDS",
    "PUBLISHED_2022",
    "BoundWorkload",
    "FeatureRequest",
    "FeatureSpec",
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
