"""Import torch.profiler (Kineto) traces into the recstack tree; ``annotate`` for recording them.

:func:`import_trace` (``recstack import``) reads a trace file or a folder of per-rank traces
(:mod:`.decode`: streaming typed decoding; :mod:`.collect`: compact columns; :mod:`.fold`: the
sweep into the live op pass's structures; :mod:`.build`: the Profile). :func:`annotate` names a
profiler range after every module's path while a model runs. See docs/import.md.
"""

from __future__ import annotations

from recstack.traceimport.annotate import annotate
from recstack.traceimport.build import import_trace

__all__ = ["annotate", "import_trace"]
