"""Request-side compute sharing: what a ranking request's candidates recompute, and what sharing saves.

* :mod:`recstack.sharing.provenance`: dispatch-level provenance (which ops compute only from
  request-side inputs);
* :mod:`recstack.sharing.execute`: the batched and the shared execution (deduplicate request-side
  inputs, run once per request, expand where they meet candidate values), timed;
* :mod:`recstack.sharing.analysis`: the per-stage shares, savings, speedup and saving curve;
* :mod:`recstack.sharing.commands`: ``recstack share``.
"""

from __future__ import annotations

from typing import Any

# Imported on first use: `recstack share`'s registration must not import torch (CLI start-up).
_EXPORTS = {
    "analyse_sharing": "recstack.sharing.analysis",
    "Sides": "recstack.sharing.execute",
    "SharingStops": "recstack.sharing.provenance",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'recstack.sharing' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)


__all__ = ["SharingStops", "Sides", "analyse_sharing"]
