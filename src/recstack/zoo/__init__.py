"""The model zoo: eight industry-representative recommendation models from declarative configs."""

from recstack.zoo.build import BuildOptions, build_model, module_tree, preflight, resolve_config, summary
from recstack.zoo.config import ModelConfig, builtin_names, load_model_config
from recstack.zoo.embedding import BACKENDS
from recstack.zoo.models import RecModel

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
