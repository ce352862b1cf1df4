"""The figures a sweep's charts and report show, computed from a store's tables (draws nothing).

* ``series``: one line per group of points that differ only in batch size
  (the group names every other field that varies in the store), with
  ``throughput`` (samples/s: batch_size / p50 step, measured p50),
  ``step_p50_s`` and ``step_p99_s`` (measured, uninstrumented steps) per batch size.
* ``stage_shares``: per group and batch size, each stage's share of the step
  (stage time over the run's time; measured in the stage pass).
* ``heatmaps``: per model, over two RunConfig fields ``x`` and ``y``: the best
  throughput in each cell (over the other fields) divided by the model's
  lowest cell (formula: a speedup, 1.0 = the slowest cell).
* ``best``: :func:`recstack.results.best`'s rows (contended points left out and counted; no best for a
  model whose points mostly ran contended; with ``advice``, the comparable what-ifs of ``recstack advise``
  ranked beside the points).
* ``warnings``: the best rows' warnings (a model whose points mostly ran contended), for the top of the page.
"""

from __future__ import annotations

from typing import Any

from recstack.config.run import RunConfig
from recstack.errors import ConfigError
from recstack.results.best import best
from recstack.results.cells import num as _num
from recstack.results.cells import plain as _plain

_IDENTITY = ("model", "batch_size")
_IGNORED = ("iters", "warmup", "op_iters", "seed", "machine", "stage_rules")


def group_fields(rows: list[dict[str, Any]]) -> list[str]:
    """RunConfig fields other than model and batch size whose values vary between the rows."""
    out = []
    for f in RunConfig.model_fields:
        if f in _IDENTITY or f in _IGNORED:
            continue
        if len({str(_plain(r.get(f))) for r in rows}) > 1:
            out.append(f)
    return out


def sweep_figures(points: Any, stages: Any, *, x: str = "batch_size", y: str = "backend",
                  advice: Any = None) -> dict[str, Any]:
    for name, axis in (("--x", x), ("--y", y)):
        if axis not in RunConfig.model_fields:
            raise ConfigError(f"{axis!r} is not a RunConfig field; the fields are {', '.join(RunConfig.model_fields)}",
                              field=name)
    if x == y:
        raise ConfigError("the heat map needs two different fields", field="--y")
    rows = [{k: _plain(v) for k, v in r.items()} for r in points.to_dict("records")]
    ok = [r for r in rows if r["status"] == "ok" and _num(r.get("throughput"))]
    gfields = group_fields(ok)
    shares: dict[str, dict[str, float]] = {}
    for s in stages.to_dict("records"):
        share = _num(s.get("share"))
        if share is not None:
            shares.setdefault(s["point_id"], {})[s["stage"]] = share
    groups: dict[tuple, dict[str, Any]] = {}
    for r in sorted(ok, key=lambda r: (r["model"], *[str(r.get(f)) for f in gfields], r["batch_size"])):
        key = (r["model"], *[str(r.get(f)) for f in gfields])
        g = groups.setdefault(key, {
            "model": r["model"], "fields": {f: r.get(f) for f in gfields},
            "label": " · ".join([r["model"], *[f"{r.get(f)}" for f in gfields]]), "points": [],
        })
        g["points"].append({
            "batch_size": r["batch_size"], "throughput": _num(r["throughput"]), "step_p50_s": _num(r["step_p50_s"]),
            "step_p99_s": _num(r["step_p99_s"]), "contended": bool(r.get("contended")),
            "stage_shares": shares.get(r["point_id"], {}),
        })
    best_rows = best(points, advice=advice) if rows else []
    return {
        "group_fields": gfields,
        "series": list(groups.values()),
        "heatmaps": _heatmaps(ok, x, y),
        "best": best_rows,
        "warnings": [r["warning"] for r in best_rows if r.get("warning")],  # shown at the top of the report
        "counts": {"points": len(rows), "ok": len(ok), "failed": sum(r["status"] != "ok" for r in rows),
                   "contended": sum(bool(r.get("contended")) for r in ok)},
        "formulas": {
            "throughput": "batch_size / p50 of the uninstrumented steps (measured p50)",
            "stage_share": "stage time / run time per step (measured, stage pass)",
            "heatmap": f"best throughput in the ({x}, {y}) cell / the model's slowest cell (formula)",
        },
    }


def _heatmaps(ok: list[dict[str, Any]], x: str, y: str) -> list[dict[str, Any]]:
    out = []
    for model in sorted({r["model"] for r in ok}):
        rows = [r for r in ok if r["model"] == model]
        xs = sorted({r.get(x) for r in rows}, key=_sort_key)
        ys = sorted({r.get(y) for r in rows}, key=_sort_key)
        cell: dict[tuple, float] = {}
        for r in rows:
            k = (r.get(x), r.get(y))
            cell[k] = max(cell.get(k, 0.0), float(r["throughput"]))
        low = min(cell.values())
        out.append({
            "model": model, "x": x, "y": y, "x_values": xs, "y_values": ys,
            "speedup": [[(cell[(xv, yv)] / low) if (xv, yv) in cell else None for xv in xs] for yv in ys],
            "throughput": [[cell.get((xv, yv)) for xv in xs] for yv in ys],
        })
    return out


def _sort_key(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


__all__ = ["group_fields", "sweep_figures"]
