"""The model zoo: recommendation models from declarative configs (``configs/``, one YAML each) over the
architectures of :mod:`recstack.zoo.archs` (one record each)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recstack.zoo.build import BuildOptions, build_model, module_tree, preflight, resolve_config, summary
    from recstack.zoo.config import ModelConfig, builtin_names, load_model_config
    from recstack.zoo.embedding import BACKENDS
    from recstack.zoo.models import RecModel

# Lazy (the names resolve on first use): `zoo list` and the CLI's startup need no torch.
_LAZY = {
    "BACKENDS": "recstack.zoo.embedding",
    "BuildOptions": "recstack.zoo.build",
    "ModelConfig": "recstack.zoo.config",
    "RecModel": "recstack.zoo.models",
    "build_model": "recstack.zoo.build",
    "builtin_names": "recstack.zoo.config",
    "load_model_config": "recstack.zoo.config",
    "module_tree": "recstack.zoo.build",
    "preflight": "recstack.zoo.build",
    "resolve_config": "recstack.zoo.build",
    "summary": "recstack.zoo.build",
}

__all__ = [
    "BACKENDS",
    "BuildOptions",
    "ModelConfig",
    "RecModel",
    "build_model",
    "builtin_names",
    "load_model_config",
    "module_tree",
    "preflight",
    "resolve_config",
    "summary",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'recstack.zoo' has no attribute {name!r}")
