"""The ``serving`` table: every probe of ``recstack serve --search`` in a DuckDB file (``--store FILE``).

One row per probe, written in its own transaction (a search stopped half-way
keeps every probe it finished); the search's result rows have ``kind =
'result'`` (one per configuration) and ``'best'``. The columns are listed in
docs/serving.md; ``result_json`` holds the whole summary (histogram included).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recstack.errors import DataError

COLUMNS: list[tuple[str, str]] = [
    ("search_id", "VARCHAR"),
    ("probe", "INTEGER"),
    ("kind", "VARCHAR"),  # probe | result | best
    ("created_at", "TIMESTAMP"),
    ("model", "VARCHAR"),
    ("config_key", "VARCHAR"),
    ("run_config", "JSON"),
    ("max_batch", "INTEGER"),
    ("workers", "INTEGER"),
    ("threads", "INTEGER"),
    ("backend", "VARCHAR"),
    ("dtype", "VARCHAR"),
    ("gpu_threshold", "INTEGER"),
    ("target_pct", "DOUBLE"),
    ("target_s", "DOUBLE"),
    ("qps", "DOUBLE"),  # the scheduled rate of the probe (offered_qps: the arrivals drawn / duration)
    ("offered_qps", "DOUBLE"),
    ("achieved_qps", "DOUBLE"),
    ("requests", "BIGINT"),
    ("failed", "BIGINT"),
    ("late", "BIGINT"),
    ("p50_s", "DOUBLE"),
    ("p95_s", "DOUBLE"),
    ("p99_s", "DOUBLE"),
    ("p999_s", "DOUBLE"),
    ("mean_s", "DOUBLE"),
    ("target_ci_low_s", "DOUBLE"),
    ("target_ci_high_s", "DOUBLE"),
    ("queue_s_mean", "DOUBLE"),
    ("service_s_mean", "DOUBLE"),
    ("utilisation", "DOUBLE"),
    ("meets_target", "BOOLEAN"),
    ("qps_at_target", "DOUBLE"),
    ("contended", "BOOLEAN"),
    ("result_json", "JSON"),
]

CREATE = "CREATE TABLE IF NOT EXISTS serving (" + ", ".join(f"{n} {t}" for n, t in COLUMNS) + ")"


class ServingStore:
    """An open DuckDB file with the ``serving`` table."""

    def __init__(self, path: str | Path) -> None:
        import duckdb

        self.path = str(path)
        try:
            self.con = duckdb.connect(self.path)
            self.con.execute(CREATE)
        except duckdb.Error as exc:
            raise DataError(f"--store: cannot open {self.path} as a DuckDB file ({exc})") from None

    def write(self, row: dict[str, Any]) -> None:
        """One row, in its own transaction; missing columns are NULL."""
        names = [n for n, _ in COLUMNS]
        values = [_cell(row.get(n)) for n in names]
        marks = ", ".join("current_timestamp" if n == "created_at" else "?" for n in names)
        values = [v for n, v in zip(names, values, strict=True) if n != "created_at"]
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.execute(f"INSERT INTO serving ({', '.join(names)}) VALUES ({marks})", values)
            self.con.execute("COMMIT")
        except Exception:
            self.con.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.con.close()


def _cell(v: Any) -> Any:
    return json.dumps(v, default=str) if isinstance(v, (dict, list)) else v


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
