"""Deployment sweeps: a grid of runs into a results store (docs/sweeps.md).

    import recstack
    res = recstack.sweep({"base": {"scale": 0.01}, "grid": {"model": ["rmc1"], "batch_size": [16, 256]}}, "out")
    df = recstack.results.load(res.store)

``recstack.sweep`` is :func:`recstack.sweeps.runner.sweep`; this package holds the
sweep file (:mod:`~recstack.sweeps.spec`), the driver (:mod:`~recstack.sweeps.run`) and the executors.
"""

from recstack.sweeps.spec import SweepSpec, load_sweep

__all__ = ["SweepSpec", "load_sweep"]
