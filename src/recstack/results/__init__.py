"""Reading a results store: the points as a pandas DataFrame, and the best configuration per model.

    import recstack
    df = recstack.results.load("sweep-out/results.duckdb")          # one row per point
    stages = recstack.results.load("sweep-out/results.duckdb", table="stages")
    probes = recstack.results.load("sweep-out/results.duckdb", table="serving")  # serve --search
    advice = recstack.results.load("sweep-out/results.duckdb", table="advice")  # advise --store
    rows = recstack.results.best(df, p99=0.01, advice=advice)      # what `recstack best --json` prints
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recstack.results.best import best


def load(store: str | Path, table: str = "points") -> Any:
    """A table of the store (``points``, ``stages``, ``sweeps``, ``serving``, ``compile`` or ``advice``) as a pandas DataFrame."""
    from recstack.store.db import read_table

    return read_table(store, table)


__all__ = ["best", "load"]
