"""The build section of a run's config: what a zoo model is built with (``recstack.zoo.BuildOptions``).

Its fields are RunConfig fields, read from a RunConfig in one place
(:meth:`BuildOptions.of`), so a run, a serving worker, a rank, a compile run
and a sharing run build the same model from the same config. Built directly
(``BuildOptions(mode="train")``) it is checked by :meth:`BuildOptions.validate`
against RunConfig's own choices and ranges, errors naming the CLI flag.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, get_args

from recstack.config.limits import BATCH_SIZE_MAX, SEED_MAX, SEED_MIN, TASKS_MAX
from recstack.errors import ConfigError

if TYPE_CHECKING:
    from recstack.config.run import RunConfig


@dataclass(frozen=True)
class BuildOptions:
    backend: str = "torch"
    mode: str = "inference"
    table_dtype: str = "fp32"
    optimizer: str = "sgd"
    learning_rate: float = 0.01
    seed: int = 0
    tasks: int | None = None
    batch_size: int = 1024  # only for the memory estimate of sparse gradients

    @classmethod
    def of(cls, cfg: RunConfig, **overrides: Any) -> BuildOptions:
        """The build section of ``cfg`` (the one place a RunConfig becomes build options), with ``overrides``
        (a serving worker builds for inference at its largest batch, a rank with the TorchRec backend)."""
        return cls(**{**{f.name: getattr(cfg, f.name) for f in fields(cls)}, **overrides})

    def validate(self) -> None:
        from recstack.config.run import RunConfig

        for field in ("backend", "mode", "table_dtype", "optimizer"):
            allowed = get_args(RunConfig.model_fields[field].annotation)
            value = getattr(self, field)
            if value not in allowed:
                raise ConfigError(f"must be one of {', '.join(allowed)} (got {value!r})", field=_flag(field))
        for field, value, low, high in (
            ("--tasks", self.tasks, 1, TASKS_MAX),
            ("--seed", self.seed, SEED_MIN, SEED_MAX),
            ("--batch-size", self.batch_size, 1, BATCH_SIZE_MAX),
        ):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"must be an integer (got {value!r})", field=field)
            if not low <= value <= high:
                raise ConfigError(f"must be in {low} .. {high} (got {value})", field=field)
        if not isinstance(self.learning_rate, (int, float)) or not 0 < self.learning_rate < float("inf"):
            raise ConfigError(f"must be a positive number (got {self.learning_rate!r})", field="learning_rate")


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


__all__ = ["BuildOptions"]
