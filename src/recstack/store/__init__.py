"""The results store: an embedded DuckDB file of sweep points, their stages, the sweeps and serving probes.

Schema and its versions: :mod:`recstack.store.migrations` (documented in docs/sweeps.md);
reading and writing: :mod:`recstack.store.db`.
"""

from recstack.store.db import (
    SweepLock,
    connect,
    done_points,
    migrate,
    read_table,
    transaction,
    write_point,
    write_sweep,
)
from recstack.store.migrations import latest, register

__all__ = ["SweepLock", "connect", "done_points", "latest", "migrate", "read_table", "register", "transaction",
           "write_point", "write_sweep"]
