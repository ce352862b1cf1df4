"""The figures of a store's ``serving`` table for the sweep report (computes; draws nothing).

One configuration is one grid point of one ``recstack serve --search`` (its ``search_id``, RunConfig
key and serving fields). Per configuration:

* ``points``: each probe's scheduled load (``qps``) against its latency at the target percentile
  (``p99_s`` for a p99 target; measured from the scheduled arrival), in load order;
* ``qps_at_target``: the highest scheduled QPS among its *full* probes that met the target (formula over
  measured probes; the search's own answer, as in its ``result`` row), ``None`` when none did. A
  screening probe (fewer samples beyond the percentile: ``screening`` in its ``result_json``) is drawn
  but never makes the answer.
"""

from __future__ import annotations

import json
import math
from typing import Any

GRID_FIELDS = ("max_batch", "workers", "threads", "backend", "dtype", "gpu_threshold")
LATENCY_COLUMN = {50.0: "p50_s", 95.0: "p95_s", 99.0: "p99_s", 99.9: "p999_s"}


def _plain(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v.item() if hasattr(v, "item") else v


def _label(r: dict[str, Any], search: str | None) -> str:
    parts = [str(r.get("model")), f"B {r.get('max_batch')}", f"{r.get('workers')} workers",
             f"{r.get('threads')} threads", str(r.get("backend")), str(r.get("dtype"))]
    if r.get("gpu_threshold") is not None:
        parts.append(f"GPU above {r['gpu_threshold']}")
    if search:
        parts.append(f"search {search[:8]}")
    return " · ".join(parts)


def _screening(r: dict[str, Any]) -> bool:
    """Whether a probe row was a screening probe (``screening`` in its stored result; older rows: no)."""
    raw = r.get("result_json")
    if not raw:
        return False
    try:
        res = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return False
    return bool(isinstance(res, dict) and res.get("screening"))


def serving_figures(serving: Any) -> dict[str, Any] | None:
    """Latency vs load and QPS at the target per configuration; ``None`` when the table has no probes."""
    rows = [{k: _plain(v) for k, v in r.items()} for r in serving.to_dict("records")]
    probes = [r for r in rows if r.get("kind") == "probe" and r.get("qps")]
    if not probes:
        return None
    several = len({r["search_id"] for r in probes}) > 1
    configs: dict[tuple, dict[str, Any]] = {}
    for r in sorted(probes, key=lambda r: (str(r["search_id"]), int(r.get("probe") or 0))):
        key = (r["search_id"], r.get("config_key"), *[r.get(f) for f in GRID_FIELDS])
        pct = float(r.get("target_pct") or 99.0)
        c = configs.setdefault(key, {
            "label": _label(r, r["search_id"] if several else None), "search_id": r["search_id"],
            "model": r.get("model"), **{f: r.get(f) for f in GRID_FIELDS},
            "target_pct": pct, "target_s": r.get("target_s"), "points": [],
        })
        c["points"].append({
            "qps": r["qps"], "achieved_qps": r.get("achieved_qps"),
            "latency_s": r.get(LATENCY_COLUMN.get(pct, "p99_s")), "meets_target": bool(r.get("meets_target")),
            "contended": bool(r.get("contended")), "screening": _screening(r),
        })
    out = []
    for c in configs.values():
        c["points"].sort(key=lambda p: p["qps"])
        met = [p["qps"] for p in c["points"] if p["meets_target"] and not p["screening"]]
        c["qps_at_target"] = max(met) if met else None
        c["probes"] = len(c["points"])
        out.append(c)
    return {
        "configurations": out,
        "targets": sorted({(c["target_pct"], c["target_s"]) for c in out if c["target_s"] is not None}),
        "formulas": {
            "latency": "latency at the target percentile of each probe, from the scheduled arrival (measured)",
            "qps_at_target": "highest scheduled QPS among the configuration's full (not screening) probes "
                             "that met the target (formula over measured probes)",
        },
    }


__all__ = ["serving_figures"]
