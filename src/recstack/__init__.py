"""recstack: a hierarchical, cross-stack profiler and benchmark suite for recommendation models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recstack.version import __version__

__all__ = ["Profile", "__version__", "profile", "profile_zoo"]

if TYPE_CHECKING:
    from recstack.api import profile, profile_zoo
    from recstack.tree import Profile


def __getattr__(name: str) -> Any:
    # Lazy: `import recstack` stays light (the CLI's startup, `zoo list`, need no profiler).
    if name in ("profile", "profile_zoo"):
        from recstack import api

        return getattr(api, name)
    if name == "Profile":
        from recstack.tree import Profile

        return Profile
    raise AttributeError(f"module 'recstack' has no attribute {name!r}")
