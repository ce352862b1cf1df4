"""``--machine FILE|auto``: which machine file a command classifies against.

``auto`` is this host's cached measurement (measured ``--quick`` and cached when there is none);
anything else is a machine JSON file (from ``recstack machine``).
"""

from __future__ import annotations

import sys

from recstack.analysis.pipeline import Machine, as_machine

HOST = "auto"
"""The one word every command's --machine takes for this host's machine file (hardware.machine.AUTO)."""


def machine_arg(value: str) -> Machine:
    """``--machine``: a machine JSON file, or ``auto`` for this host's cached figures (measured
    ``--quick`` and cached when there are none; :func:`recstack.hardware.machine.machine_with_file`, the one
    resolver, which also takes the old word ``host`` with a warning)."""
    from recstack.hardware.machine import AUTO, machine_with_file, machine_word

    if machine_word(value) != AUTO:  # a file: recorded as given
        machine = as_machine(value)
    else:
        figures, file = machine_with_file(AUTO, measure=True,
                                          progress=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True))
        machine = as_machine(figures, file)
    assert machine is not None
    return machine


__all__ = ["HOST", "machine_arg"]
