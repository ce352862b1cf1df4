"""Terminal tables of a results store: the best configuration per model, and the points."""

from __future__ import annotations

from typing import Any

from recstack.units import count, ratio, seconds

POINT_COLUMNS = ("model", "scale", "batch_size", "backend", "workload", "threads", "table_dtype", "dtype", "mode",
                 "status", "step_p50_s", "step_p99_s", "throughput", "overhead", "contended")
SERVING_COLUMNS = ("search_id", "probe", "kind", "model", "max_batch", "workers", "threads", "backend", "dtype",
                   "qps", "achieved_qps", "p50_s", "p99_s", "target_s", "meets_target", "qps_at_target", "contended")
COMPILE_COLUMNS = ("search_id", "candidate", "kind", "model", "mode", "name", "eligible", "why", "run_speedup",
                   "eager_run_s", "compiled_run_s", "recompiles", "graph_breaks", "fallbacks", "numerics_ok")

ADVICE_COLUMNS = ("advice_id", "rank", "model", "mode", "goal", "name", "lever_kind", "stage", "recommended", "winner",
                  "step_speedup", "step_ci_low", "step_ci_high", "verdict", "deviation_max_rel", "contended")


def _config(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    parts = [f"batch {d['batch_size']}", str(d["backend"])]
    parts += [f"{d[f]}" for f in ("table_dtype", "dtype") if d.get(f) and d[f] != "fp32"]
    if d.get("threads"):
        parts.append(f"{d['threads']} threads")
    if d.get("mode") == "train":
        parts.append("train")
    parts.append(str(d.get("workload")))
    return ", ".join(parts)


def best_table(rows: list[dict[str, Any]]) -> None:
    """Print :func:`recstack.results.best`'s rows, one line per model."""
    from rich.console import Console
    from rich.table import Table

    target = next((r["p99_target_s"] for r in rows if r.get("p99_target_s")), None)
    t = Table(title=f"best configuration per model (by {rows[0]['by'] if rows else 'throughput'})", box=None,
              pad_edge=False)
    for col in ("model", "best", "samples/s", "p50", "p99", "vs worst", "vs default"):
        t.add_column(col, justify="right" if col not in ("model", "best") else "left")
    if target is not None:
        t.add_column(f"best with p99 <= {seconds(target)}")
    t.add_column("from")
    t.add_column("left out", justify="right")
    con = Console(highlight=False, soft_wrap=False, width=200)
    for r in rows:  # at the top: a model whose points mostly ran contended has no best to act on
        if r.get("warning"):
            con.print(f"WARNING: {r['warning']}", markup=False)
    for r in rows:
        b = r["best"] or {}
        none = "none presented: mostly contended" if r.get("mostly_contended") else "no usable point"
        cells = [r["model"], _config(r["best"]) if r["best"] else none,
                 count(b.get("throughput")), seconds(b.get("step_p50_s")), seconds(b.get("step_p99_s")),
                 ratio(r["speedup_vs_worst"]), ratio(r["speedup_vs_default"])]
        if target is not None:
            u = r["best_under_target"]
            cells.append(f"{_config(u)} ({count(u['throughput'])}/s)" if u else "none meets it")
        left = []
        if r["contended_left_out"]:
            left.append(f"{r['contended_left_out']} contended")
        if r["failed"]:
            left.append(f"{r['failed']} failed")
        left += [f"{n} advice: {why}" for why, n in (r.get("advice_left_out") or {}).items()]
        cells += [_source(r["best"]), ", ".join(left) or "-"]
        t.add_row(*cells)
    con.print(t)
    for r in rows:
        if (r["best"] or {}).get("source") == "advise":
            con.print(f"{r['model']}: the best is {r['best']['from']}; its samples/s is that run's measured "
                      "time per sample, ranked beside the sweep's points of the same host, scale and workload",
                      markup=False)
    con.print("samples/s = batch_size / p50 of the uninstrumented steps (measured); vs worst / vs default: ratio of "
              "that figure; 'vs default': the point with RunConfig's default deployment fields", markup=False)


def _source(b: dict[str, Any] | None) -> str:
    if not b:
        return "-"
    if b.get("source") == "advise":
        return f"advise {b.get('advice_id')}: {b.get('lever')}"
    return "sweep"


def points_table(df: Any, table: str = "points") -> str:
    """A plain-text table of a store's table (the main columns of ``points``, ``serving``, ``compile`` and ``advice``, every column
    of the others; CSV and Parquet give every column)."""
    main = {"points": POINT_COLUMNS, "serving": SERVING_COLUMNS, "compile": COMPILE_COLUMNS,
            "advice": ADVICE_COLUMNS}.get(table)
    cols = [c for c in main if c in df.columns] if main else list(df.columns)
    view = df[cols].copy()
    for c in ("step_p50_s", "step_p99_s", "time_s", "p50_s", "p99_s", "target_s", "eager_run_s", "compiled_run_s"):
        if c in view.columns:
            view[c] = view[c].map(lambda v: seconds(v) if v == v and v is not None else "-")
    for c in ("throughput", "qps", "achieved_qps", "qps_at_target"):
        if c in view.columns:
            view[c] = view[c].map(lambda v: count(v) if v == v and v is not None else "-")
    return view.to_string(index=False)


__all__ = ["best_table", "points_table"]
