"""The ``serving`` table: every probe of ``recstack serve --search`` in a results store (``--store FILE``).

The table is migration 2 of the results store (:mod:`recstack.store.migrations`): ``--store`` may name
a sweep's store (the rows join its points), an older store (migrated forward) or a new file (made a store).

One row per probe, written in its own transaction (a search stopped half-way
keeps every probe it finished); the search's result rows have ``kind =
'result'`` (one per configuration) and ``'best'``. The columns are listed in
docs/serving.md and docs/sweeps.md; ``result_json`` holds the whole summary (histogram included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recstack.schema.documents import check
from recstack.schema.store_rows import ServingRow
from recstack.store import db
from recstack.store.migrations import SERVING_COLUMNS

COLUMNS = SERVING_COLUMNS


class ServingStore:
    """The results store at ``path`` (created, or migrated to the latest schema) receiving ``serving`` rows.

    Nothing is held open between rows: each :meth:`write` opens the file for one transaction
    (:func:`recstack.store.db.transaction`), so a sweep writing the same store, or ``recstack results``
    reading it, waits at most one row.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        db.migrate(self.path)

    def write(self, row: dict[str, Any]) -> None:
        """One row, in its own transaction; missing columns are NULL, ``created_at`` is the commit's clock."""
        db.append_row(self.path, "serving", COLUMNS, check(ServingRow, row))


def probe_row(search_id: str, index: int, kind: str, point: dict[str, Any], result: dict[str, Any] | None,
              target_pct: float, target_s: float) -> dict[str, Any]:
    """The row of one probe (or of a configuration's result: ``point`` carries ``qps_at_target``)."""
    lat = (result or {}).get("latency_s") or {}
    key = {50.0: "p50", 95.0: "p95", 99.0: "p99", 99.9: "p999"}.get(target_pct, "p99")
    ci = ((result or {}).get("latency_ci95_s") or {}).get(key) or [None, None]
    contention = (result or {}).get("contention") or {}
    return {
        "search_id": search_id, "probe": index, "kind": kind,
        **{k: point.get(k) for k in ("model", "config_key", "run_config", "max_batch", "workers", "threads",
                                     "backend", "dtype", "gpu_threshold", "meets_target", "qps_at_target")},
        "target_pct": target_pct, "target_s": target_s,
        **{k: (result or {}).get(k) for k in ("qps", "offered_qps", "achieved_qps", "requests", "failed", "late",
                                              "queue_s_mean", "service_s_mean", "utilisation")},
        "p50_s": lat.get("p50"), "p95_s": lat.get("p95"), "p99_s": lat.get("p99"), "p999_s": lat.get("p999"),
        "mean_s": lat.get("mean"), "target_ci_low_s": ci[0], "target_ci_high_s": ci[1],
        "contended": bool(contention.get("detected")) if isinstance(contention, dict) else None,
        "result_json": result,
    }
