"""The ``compile`` table: every candidate of ``recstack compile --recommend`` in a results store (``--store FILE``).

The table is migration 3 of the results store (:mod:`recstack.store.migrations`): ``--store`` may name a
sweep's store (the rows join its points), an older store (migrated forward) or a new file (made a store).
One row per candidate config, written in its own transaction as soon as it is measured (a search stopped
half-way keeps every candidate it finished), then the composite (if one was built) and one ``chosen`` row
repeating the proposal's figures with the config written as YAML. Columns: docs/sweeps.md.
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

from recstack.schema.documents import check
from recstack.schema.store_rows import CompileRow
from recstack.store import db
from recstack.store.migrations import COMPILE_COLUMNS
from recstack.version import __version__


class CompileStore:
    """The results store at ``path`` (created, or migrated to the latest schema) receiving ``compile`` rows;
    opened for one transaction per row, so a sweep or reader of the same file waits at most one row."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.search_id = uuid.uuid4().hex[:12]
        self.host = socket.gethostname()
        db.migrate(self.path)

    def write(self, row: dict[str, Any]) -> None:
        """One row; missing columns are NULL, ``created_at`` is the commit's clock."""
        row = {"search_id": self.search_id, "host": self.host, "recstack_version": __version__, **row}
        db.append_row(self.path, "compile", COMPILE_COLUMNS, check(CompileRow, row))


def candidate_row(index: int, kind: str, cand: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The row of one evaluated candidate (``cand``: a result of the search) for the run ``run``
    (``model``, ``mode``, ``config_key``, ``run_config``, ``batch_sizes``)."""
    total = (cand.get("stages") or {}).get("run") or {}
    return {
        "candidate": index, "kind": kind, **run,
        **{k: cand.get(k) for k in ("name", "policy", "eligible", "why", "recompiles", "graph_breaks",
                                    "numerics_ok", "max_abs_err", "stages", "eval_s")},
        "compile_config": cand.get("config"), "run_speedup": cand.get("speedup"),
        "eager_run_s": total.get("eager_s"), "compiled_run_s": total.get("compiled_s"),
        "fallbacks": len(cand["fallbacks"]) if isinstance(cand.get("fallbacks"), list) else None,
        "result_json": cand,
    }


def store_writer(path: str, cfg: Any) -> tuple[Any, Any]:
    """A results store (migrated now) and the callback writing each result of the search as one row."""
    from recstack.compilation.store import CompileStore, candidate_row
    from recstack.outputs import check_writable

    check_writable(path, "--store")
    store = CompileStore(path)
    run = {"model": cfg.model, "mode": cfg.mode, "config_key": cfg.key(), "run_config": cfg.model_dump(mode="json")}
    count = [0]

    def on_result(kind: str, res: dict[str, Any]) -> None:
        count[0] += kind != "chosen"
        store.write(candidate_row(count[0], kind, res, {**run, "batch_sizes": res.get("batch_sizes")}))

    return on_result, store


__all__ = ["CompileStore", "candidate_row", "store_writer"]
