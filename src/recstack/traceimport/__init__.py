"""Import torch.profiler (Kineto) traces into the recstack tree; ``annotate`` for recording them.

:func:`import_trace` (``recstack import``) reads a trace file or a folder of per-rank traces
(:mod:`.decode`: streaming typed decoding; :mod:`.collect`: compact columns; :mod:`.parallel`: a large
trace in parts, one process per core; :mod:`.fold`: the
sweep into the live op pass's structures; :mod:`.cost`: the cost model on recorded shapes;
:mod:`.build`: the Profile). :func:`annotate` names a profiler range after every module's path
while a model runs. See docs/import.md. Both load lazily; importing a trace never loads torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recstack.traceimport.annotate import annotate
    from recstack.traceimport.build import import_trace

__all__ = ["annotate", "import_trace"]
_LAZY = {"annotate": "recstack.traceimport.annotate", "import_trace": "recstack.traceimport.build"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'recstack.traceimport' has no attribute {name!r}")
