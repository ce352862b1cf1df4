"""recstack: a hierarchical, cross-stack profiler and benchmark suite for recommendation models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recstack.version import __version__

__all__ = [
    "Batch",
    "Call",
    "ConfigError",
    "Profile",
    "RecstackError",
    "RunConfig",
    "UserCodeError",
    "__version__",
    "advise",
    "annotate",
    "profile",
    "profile_zoo",
    "results",
    "sweep",
]

if TYPE_CHECKING:
    from recstack import results
    from recstack.advisor.advise import advise
    from recstack.api import profile, profile_zoo
    from recstack.calls import Batch, Call
    from recstack.config.run import RunConfig
    from recstack.errors import ConfigError, RecstackError, UserCodeError
    from recstack.sweeps.runner import sweep
    from recstack.traceimport.annotate import annotate
    from recstack.tree import Profile

# Lazy: `import recstack` stays light (the CLI's startup, `zoo list`, need no torch).
_LAZY = {
    "advise": "recstack.advisor.advise",  # measured what-ifs (docs/advise.md)
    "profile": "recstack.api",
    "profile_zoo": "recstack.api",
    "Call": "recstack.calls",  # a batch as forward's exact arguments
    "Batch": "recstack.calls",  # a batch with its labels
    "annotate": "recstack.traceimport.annotate",
    "Profile": "recstack.tree",
    "RunConfig": "recstack.config.run",
    "ConfigError": "recstack.errors",
    "RecstackError": "recstack.errors",
    "UserCodeError": "recstack.errors",
    "sweep": "recstack.sweeps.runner",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "results":  # a module: recstack.results.load(STORE)
        return importlib.import_module("recstack.results")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'recstack' has no attribute {name!r}")
