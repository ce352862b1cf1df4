"""The run session: a RunConfig resolved once into typed parts, the model and batches built, the passes run.

Layers: ``config`` (the typed config tree: RunConfig and its sections) <- ``zoo``,
``workload`` <- ``profiling`` <- ``compilation``, ``distributed``, ``serving``
<- **session** <- ``api`` (the public facade), the commands, sweeps and the advisor.

* :func:`resolve` (:mod:`recstack.session.parts`): every file a config names is
  read and checked (stage rules, machine, compile config, sharding plan) and
  the model source told apart (zoo id or YAML, ``package.module:factory``),
  before any model is built: a bad file fails first, with exit 2.
* :mod:`recstack.session.run`: build a zoo model (:func:`build_zoo`), make the
  batches, run the passes (:func:`profile_module`, :func:`profile_built_zoo`),
  and :func:`profile_config`, what ``recstack profile`` runs (ranks too).

Workers one layer down (a serving worker, a rank, a compile or sharing run)
build through the same pieces: :meth:`recstack.config.build.BuildOptions.of`,
:func:`recstack.zoo.build.build_for_run`, :func:`recstack.profiling.rules.rules_of`
and :func:`recstack.hardware.machine.machine_with_file`.
This package imports no torch at import time (the CLI's start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recstack.session.parts import ModelSource, Parts, resolve
    from recstack.session.run import (
        build_zoo,
        profile_built_zoo,
        profile_config,
        profile_module,
        profile_zoo,
    )

_LAZY = {
    "ModelSource": "recstack.session.parts",
    "Parts": "recstack.session.parts",
    "resolve": "recstack.session.parts",
    "build_zoo": "recstack.session.run",
    "profile_built_zoo": "recstack.session.run",
    "profile_config": "recstack.session.run",
    "profile_module": "recstack.session.run",
    "profile_zoo": "recstack.session.run",
}

__all__ = ["ModelSource", "Parts", "build_zoo", "profile_built_zoo", "profile_config", "profile_module",
           "profile_zoo", "resolve"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'recstack.session' has no attribute {name!r}")
