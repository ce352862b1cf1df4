"""A sweep's charts as PNG or SVG (matplotlib): throughput and latency vs batch size, stage shares
(stacked) vs batch size, and the speedup heat map. Draws :func:`recstack.results.sweep_figures.sweep_figures`'s
figures; computes none."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from recstack.outputs import atomic_output

CHARTS = ("throughput", "latency", "stages", "heatmap")
STAGE_COLORS = {"feature_processing": "#9c755f", "embedding": "#4e79a7", "dense": "#f28e2b", "interaction": "#59a14f",
                "sequence": "#b07aa1", "head": "#e15759", "other": "#bab0ac"}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out: Path) -> Path:
    with atomic_output(out) as tmp:  # same suffix as out, so savefig picks the same format
        fig.savefig(tmp, dpi=120 if out.suffix == ".png" else None, bbox_inches="tight")
    _plt().close(fig)
    return out


def _lines(figs: dict[str, Any], out: Path, *, latency: bool) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5))
    for s in figs["series"]:
        pts = [p for p in s["points"] if p["step_p50_s" if latency else "throughput"]]
        xs = [p["batch_size"] for p in pts]
        if latency:
            (line,) = ax.plot(xs, [p["step_p50_s"] * 1e3 for p in pts], marker="o", label=f"{s['label']} p50")
            ax.plot(xs, [p["step_p99_s"] * 1e3 for p in pts], linestyle="--", color=line.get_color(),
                    label=f"{s['label']} p99")
        else:
            ax.plot(xs, [p["throughput"] for p in pts], marker="o", label=s["label"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("step latency (ms, measured)" if latency else "throughput (samples/s)")
    ax.set_title("step latency vs batch size (uninstrumented steps; p99 dashed)" if latency
                 else "throughput vs batch size (" + figs["formulas"]["throughput"] + ")", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    if figs["series"]:
        ax.legend(fontsize=7, loc="best", ncol=1 + len(figs["series"]) // 12)
    return _save(fig, out)


def _stages(figs: dict[str, Any], out: Path) -> Path:
    plt = _plt()
    series = figs["series"] or [{"label": "no points", "points": []}]
    cols = min(4, len(series))
    rows = math.ceil(len(series) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    names = [st for st in STAGE_COLORS if any(st in p["stage_shares"] for s in series for p in s["points"])]
    names += sorted({st for s in series for p in s["points"] for st in p["stage_shares"]} - set(names))
    for ax, s in zip(axes.flat, series, strict=False):
        labels = [str(p["batch_size"]) for p in s["points"]]
        bottom = [0.0] * len(labels)
        for st in names:
            vals = [p["stage_shares"].get(st, 0.0) for p in s["points"]]
            ax.bar(labels, vals, bottom=bottom, color=STAGE_COLORS.get(st), label=st)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_title(s["label"], fontsize=8)
        ax.set_ylim(0, 1)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(series):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(names) or 1, fontsize=7)
    fig.suptitle("stage share of the step vs batch size (" + figs["formulas"]["stage_share"] + ")", fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    return _save(fig, out)


def _heatmap(figs: dict[str, Any], out: Path) -> Path:
    plt = _plt()
    maps = figs["heatmaps"] or [{"model": "no points", "x": "", "y": "", "x_values": [], "y_values": [],
                                 "speedup": []}]
    cols = min(4, len(maps))
    rows = math.ceil(len(maps) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False)
    for ax, m in zip(axes.flat, maps, strict=False):
        grid = [[v if v is not None else float("nan") for v in row] for row in m["speedup"]]
        if grid and grid[0]:
            ax.imshow(grid, cmap="viridis", aspect="auto")
            for i, row in enumerate(m["speedup"]):
                for j, v in enumerate(row):
                    if v is not None:
                        ax.text(j, i, f"{v:.1f}x", ha="center", va="center", fontsize=7, color="white")
        ax.set_xticks(range(len(m["x_values"])), [str(v) for v in m["x_values"]], fontsize=7)
        ax.set_yticks(range(len(m["y_values"])), [str(v) for v in m["y_values"]], fontsize=7)
        ax.set_xlabel(m["x"], fontsize=8)
        ax.set_ylabel(m["y"], fontsize=8)
        ax.set_title(m["model"], fontsize=8)
    for ax in list(axes.flat)[len(maps):]:
        ax.axis("off")
    fig.suptitle("speedup: " + figs["formulas"]["heatmap"], fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return _save(fig, out)


def write_charts(figs: dict[str, Any], folder: str | Path, charts: list[str], fmt: str = "png") -> list[Path]:
    """Write the named charts (of :data:`CHARTS`) as ``folder/<chart>.<fmt>``; returns the paths."""
    d = Path(folder)
    out = []
    for c in charts:
        path = d / f"{c}.{fmt}"
        if c == "throughput":
            out.append(_lines(figs, path, latency=False))
        elif c == "latency":
            out.append(_lines(figs, path, latency=True))
        elif c == "stages":
            out.append(_stages(figs, path))
        else:
            out.append(_heatmap(figs, path))
    return out


__all__ = ["CHARTS", "write_charts"]
