"""A zoo config resolved (scale, tasks) and its model on the meta device: shapes and counts, no memory.

Below the build and its preflight, so the footprint model (:mod:`recstack.zoo.footprint`) can read a model's
shapes without importing the build that calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recstack.config.limits import TASKS_MAX
from recstack.errors import ConfigError
from recstack.zoo import archs
from recstack.zoo.config import ModelConfig, load_model_config

if TYPE_CHECKING:
    from recstack.zoo.models import RecModel


def resolve_config(model: str | ModelConfig, scale: float = 1.0, tasks: int | None = None) -> ModelConfig:
    cfg = load_model_config(model) if isinstance(model, str) else model
    if scale != 1.0:
        cfg = cfg.scaled(scale)
    if tasks is not None:
        if isinstance(tasks, bool) or not isinstance(tasks, int) or not 1 <= tasks <= TASKS_MAX:
            raise ConfigError(f"must be an integer in 1 .. {TASKS_MAX} (got {tasks!r})", field="--tasks")
        if not archs.get(cfg.arch).tasks:
            with_tasks = " ".join(a.name for a in archs.all_archs() if a.tasks)
            raise ConfigError(f"only arch {with_tasks} has tasks (model {cfg.name} is {cfg.arch})", field="--tasks")
        cfg = cfg.model_copy(update={"tasks": tasks})
    return cfg


def skeleton(cfg: ModelConfig) -> RecModel:
    """The model on the meta device: layer shapes and parameter counts, no memory."""
    import torch

    from recstack.zoo.embedding import TorchEmbeddings
    with torch.device("meta"):
        backend = TorchEmbeddings(cfg.resolved_tables(), sparse=False, device="meta")
        return archs.get(cfg.arch).model_class()(cfg, backend)


def dense_param_count(model: RecModel) -> int:
    return sum(
        p.numel() for name, p in model.named_parameters() if not name.startswith(("sparse_arch.", "feature_processing."))
    )
