"""``--machine FILE|auto``: which machine file a command classifies against.

``auto`` is this host's cached measurement (measured ``--quick`` and cached when there is none);
anything else is a machine JSON file (from ``recstack machine``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from recstack.analysis.pipeline import Machine, as_machine

HOST = "auto"
"""The one word every command's --machine takes for this host's machine file (profile, demo, shard-sim too)."""
OLD_HOST = "host"  # analyse/roofline/import's former word for it: still accepted, with a warning


def machine_arg(value: str) -> Machine:
    """``--machine``: a machine JSON file, or ``auto`` for this host's cached figures (measured
    ``--quick`` and cached when there are none)."""
    if value == OLD_HOST and not Path(value).exists():
        import warnings

        warnings.warn(f"--machine {OLD_HOST} is deprecated: use --machine {HOST}", FutureWarning, stacklevel=2)
        value = HOST
    if value != HOST:
        machine = as_machine(value)
    else:
        from recstack.hardware.machine import cache_path, get_machine

        figures = get_machine(quick=True, progress=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True))
        machine = as_machine(figures, str(cache_path()))
    assert machine is not None
    return machine


__all__ = ["HOST", "OLD_HOST", "machine_arg"]
