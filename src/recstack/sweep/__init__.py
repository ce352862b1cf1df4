"""Deployment sweeps: a grid of runs into a results store (docs/sweeps.md).

    import recstack
    res = recstack.sweep({"base": {"scale": 0.01}, "grid": {"model": ["rmc1"], "batch_size": [16, 256]}}, "out")
    df = recstack.results.load(res.store)
"""

from recstack.sweep.run import SweepResult, sweep
from recstack.sweep.spec import SweepSpec, load_sweep

__all__ = ["SweepResult", "SweepSpec", "load_sweep", "sweep"]
