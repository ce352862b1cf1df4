"""Request-side compute sharing: what a ranking request's candidates recompute, and what sharing saves.

* :mod:`recstack.sharing.provenance`: dispatch-level provenance (which ops compute only from
  request-side inputs);
* :mod:`recstack.sharing.execute`: the batched and the shared execution (deduplicate request-side
  inputs, run once per request, expand where they meet candidate values), timed;
* :mod:`recstack.sharing.analysis`: the per-stage shares, savings, speedup and saving curve;
* :mod:`recstack.sharing.commands`: ``recstack share``.
"""

from __future__ import annotations

from recstack.sharing.analysis import analyse_sharing
from recstack.sharing.execute import Sides
from recstack.sharing.provenance import SharingStops

__all__ = ["SharingStops", "Sides", "analyse_sharing"]
