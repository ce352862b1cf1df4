"""The build section of a run's config: what a zoo model is built with (``recstack.zoo.BuildOptions``).

Its fields are RunConfig fields: the same names and defaults, checked by
RunConfig's own rules (:meth:`BuildOptions.validate`, errors naming the CLI
flag), and read from a RunConfig in one place (:meth:`BuildOptions.of`), so a
run, a serving worker, a rank, a compile run and a sharing run build the same
model from the same config.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from recstack.config.run import RunConfig, check_field


def _default(name: str) -> Any:
    return RunConfig.model_fields[name].default


@dataclass(frozen=True)
class BuildOptions:
    backend: str = _default("backend")
    mode: str = _default("mode")
    table_dtype: str = _default("table_dtype")
    optimizer: str = _default("optimizer")
    learning_rate: float = _default("learning_rate")
    seed: int = _default("seed")
    tasks: int | None = _default("tasks")
    batch_size: int = _default("batch_size")  # only for the memory estimate of sparse gradients

    @classmethod
    def of(cls, cfg: RunConfig, **overrides: Any) -> BuildOptions:
        """The build section of ``cfg`` (the one place a RunConfig becomes build options), with ``overrides``
        (a serving worker builds for inference at its largest batch, a rank with the TorchRec backend)."""
        return cls(**{**{f.name: getattr(cfg, f.name) for f in fields(cls)}, **overrides})

    def validate(self) -> None:
        """Each field against RunConfig's rule for it (a ConfigError naming the CLI flag)."""
        for f in fields(self):
            check_field(f.name, getattr(self, f.name), "--" + f.name.replace("_", "-"))


__all__ = ["BuildOptions"]
