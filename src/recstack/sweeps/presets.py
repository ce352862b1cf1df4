"""Named sweeps (``recstack sweep --preset NAME``)."""

from __future__ import annotations

from typing import Any

from recstack.errors import ConfigError
from recstack.zoo.config import BUILTIN

ZOO = list(BUILTIN)

PRESETS: dict[str, dict[str, Any]] = {
    # The cross-stack characterisation (Hsia et al., IISWC 2020) on this host, grown to every zoo model
    # (the paper's eight and the modern ones; 13 today: 13 x 5 x 2 x 2 = 260 points). Each point's timing pass
    # takes about min_timed_s (iters raised for fast steps, docs/sweeps.md), so that the timed steps outweigh
    # the per-point fixed cost: the eight's 160 points took about 15 minutes on 2 cores.
    "characterise": {
        "name": "characterise",
        "min_timed_s": 3.0,
        "base": {"scale": 0.05, "iters": 10, "warmup": 3, "op_iters": 2},
        "grid": {
            "model": ZOO,
            "batch_size": [1, 16, 64, 256, 1024],
            "backend": ["torch", "tbe"],
            "workload": ["uniform", "production"],
        },
    },
}


def preset(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; the presets are {', '.join(PRESETS)}", field="--preset")
    return PRESETS[name]


__all__ = ["PRESETS", "preset"]
