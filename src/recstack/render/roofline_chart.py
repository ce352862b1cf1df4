"""Roofline chart (PNG and SVG) of a classified Profile's stages and top ops.

Contract: the renderer computes no figures. It plots what the roofline
step of :mod:`recstack.analysis.pipeline` (:func:`recstack.analysis.roofline.classify`) stored: the roofs in
``profile.machine`` and each node's ``roofline``
(``intensity``, ``achieved_flops``) and ``bound``. Log-log axes;
x = arithmetic intensity (FLOP/byte), y = achieved FLOP/s; the compute roofs
(one per measured dtype, the profile's dtype solid), the streaming roof and
the gather roofs the stages were held to; points sized by time, coloured by
bound class, labelled. Nodes that cannot sit on log axes (zero FLOPs or
bytes, or unclassified) are listed in a note under the plot instead.
"""

from __future__ import annotations

from pathlib import Path

from recstack.errors import ConfigError, DataError
from recstack.outputs import atomic_output
from recstack.tree import Node, Profile
from recstack.units import si

BOUND_COLORS = {"memory": "#1f77b4", "compute": "#d62728", "overhead": "#7f7f7f", None: "#bcbd22"}
TOP_OPS = 10
MAX_NOTES = 6


def output_paths(path: str | Path) -> list[Path]:
    """``x.png`` -> [x.png, x.svg]; ``x.svg`` -> [x.svg]; anything else is an error naming the option."""
    p = Path(path)
    ext = p.suffix.lower()
    if ext == ".png":
        return [p, p.with_suffix(".svg")]
    if ext == ".svg":
        return [p]
    raise ConfigError(f"must end in .png (PNG and SVG alongside) or .svg (got {str(path)!r})", field="-o")


def _plottable(n: Node) -> bool:
    r = n.roofline or {}
    i, f = r.get("intensity"), r.get("achieved_flops")
    return isinstance(i, (int, float)) and isinstance(f, (int, float)) and i > 0 and f > 0


def chart_nodes(profile: Profile, top_ops: int = TOP_OPS) -> tuple[list[Node], list[Node]]:
    """(stages, top ops): stage nodes, and the ``top_ops`` longest classified ops that have no
    classified op above them (so an op and the op it dispatches to are not both shown)."""
    stages = [s for s in profile.root.children if s.roofline]
    ops: list[Node] = []

    def walk(n: Node, covered: bool) -> None:
        here = n.level == "op" and n.bound is not None
        if here and not covered:
            ops.append(n)
        for c in n.children:
            walk(c, covered or here)

    walk(profile.root, False)
    ops.sort(key=lambda n: -n.time_s)
    return stages, ops[:top_ops]


def _label(n: Node) -> str:
    """Stage name, or ``op (nearest module)`` for an op."""
    if n.level == "stage":
        return n.name
    segs = n.path.split("/")[:-1]
    module = next((s for s in reversed(segs) if "::" not in s), "")
    name = n.name.split("::")[-1]
    return f"{name} ({module})" if module and module != n.stage else name


def _near(a: tuple[float, float], b: tuple[float, float], decades: float = 0.3) -> bool:
    import math

    return abs(math.log10(a[0] / b[0])) < decades and abs(math.log10(a[1] / b[1])) < decades


def render_roofline(profile: Profile, path: str | Path, *, top_ops: int = TOP_OPS) -> list[Path]:
    """Draw the chart to ``path`` (``.png`` also writes the ``.svg`` beside it); return the files written."""
    mach = profile.machine
    if not isinstance(mach, dict) or "peak_flops" not in mach:
        raise DataError(
            "profile has no roofline figures: classify it first "
            "(`recstack analyse PROFILE --machine FILE -o OUT`, or recstack.analysis.pipeline.analyse)"
        )
    outs = output_paths(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages, ops = chart_nodes(profile, top_ops)
    shown = [n for n in stages + ops if _plottable(n)]
    hidden = [n for n in stages + ops if not _plottable(n)]
    intensities = [n.roofline["intensity"] for n in shown]
    ridge = mach.get("ridge_intensity") or 1.0
    x_lo = min([ridge / 1e3] + [i / 4 for i in intensities])
    x_hi = max([ridge * 50] + [i * 4 for i in intensities])
    peak = float(mach["peak_flops"])

    fig, ax = plt.subplots(figsize=(10, 6.5))
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [x_lo * (x_hi / x_lo) ** (k / 200) for k in range(201)]
    bw_roofs = [(mach.get("stream_label") or "stream", float(mach["stream_bandwidth"]), "-", "#2ca02c")]
    for g in mach.get("gather_roofs") or []:
        bw_roofs.append((g["label"], float(g["bytes_per_s"]), "--", "#9467bd"))
    if not mach.get("gather_roofs") and mach.get("gather_bandwidth_range"):
        lo, hi = mach["gather_bandwidth_range"]
        bw_roofs.append(("gather (slowest measured)", float(lo), ":", "#9467bd"))
        bw_roofs.append(("gather (fastest measured)", float(hi), "--", "#9467bd"))
    for label, bw, style, color in bw_roofs:
        ax.plot(
            xs,
            [min(peak, x * bw) for x in xs],
            style,
            color=color,
            lw=1.6,
            label=f"{label}: {si(bw, 'B/s')}",
        )
    for r in mach.get("compute_roofs") or []:
        f = float(r["flops"])
        ax.plot(
            [x_lo, x_hi],
            [f, f],
            "-" if r.get("main") else ":",
            color="#d62728" if r.get("main") else "#ff9896",
            lw=2 if r.get("main") else 1.2,
            label=f"{r['label']}: {si(f, 'FLOP/s')}",
        )
    tmax = max([n.time_s for n in shown] or [1.0]) or 1.0
    labelled: list[tuple[float, float]] = []
    crowded = 0
    for n in sorted(shown, key=lambda n: (n.level != "stage", -n.time_s)):
        r = n.roofline
        size = 30 + 900 * (n.time_s / tmax)
        marker = "o" if n.level == "stage" else "^"
        ax.scatter(
            [r["intensity"]],
            [r["achieved_flops"]],
            s=size,
            marker=marker,
            color=BOUND_COLORS.get(n.bound, "#bcbd22"),
            alpha=0.75,
            edgecolors="black",
            linewidths=0.6,
            zorder=3,
        )
        xy = (r["intensity"], r["achieved_flops"])
        if n.level != "stage" and any(_near(xy, q) for q in labelled):
            crowded += 1
            continue
        labelled.append(xy)
        frac = r.get("ceiling_fraction")
        basis = " (unique bytes)" if n.bound_basis == "unique bytes" else ""
        text = _label(n) + (
            f"\n{frac:.0%}{'?' if r.get('roof_suspect') else ''} of roof{basis}, {n.bound}" if frac is not None else ""
        )
        ax.annotate(text, xy, xytext=(6, 6), textcoords="offset points", fontsize=7)
    for bound, color in BOUND_COLORS.items():
        if bound is not None:
            ax.scatter([], [], color=color, label=f"{bound}-bound", s=40)
    ax.scatter([], [], marker="o", color="white", edgecolors="black", label="stage (size: time)")
    ax.scatter([], [], marker="^", color="white", edgecolors="black", label="op")
    ax.set_xlim(x_lo, x_hi)
    ys = [n.roofline["achieved_flops"] for n in shown]
    ax.set_ylim(min([peak / 1e5] + [y / 3 for y in ys]), peak * 3)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved FLOP/s")
    model = (profile.run or {}).get("model") or profile.root.name
    ax.set_title(
        f"{model}: roofline ({mach.get('device')}, {mach.get('threads')} thread(s), {mach.get('dtype')}) "
        f"on {mach.get('host')} [{mach.get('mode')}]",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    notes = []
    if crowded:
        notes.append(f"{crowded} op label(s) omitted where points overlap")
    no_cost = [
        _label(n) for n in hidden if (n.roofline or {}).get("achieved_bytes_per_s") is None
    ]
    if no_cost:
        notes.append("no cost figures: " + ", ".join(no_cost))
    zero_flop = [
        n for n in hidden if (n.roofline or {}).get("memory_fraction_requested") is not None
    ]
    for n in zero_flop[:MAX_NOTES]:
        r = n.roofline
        bw, frac = r.get("achieved_bytes_per_s"), r["memory_fraction_requested"]
        if bw is not None:
            notes.append(
                f"{_label(n)} (0 FLOP): {si(bw, 'B/s')}, {frac:.0%}{'?' if r.get('roof_suspect') else ''} of {r.get('roof')} roof, {n.bound}"
            )
    if len(zero_flop) > MAX_NOTES:
        notes.append(f"{len(zero_flop) - MAX_NOTES} more with 0 FLOP")
    if notes:
        fig.text(0.01, 0.01, "not on the chart: " + "; ".join(notes), fontsize=7, wrap=True)
        fig.subplots_adjust(bottom=0.14)
    written = []
    for out in outs:
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(out) as tmp:  # same suffix as out, so savefig picks the same format
            fig.savefig(tmp, dpi=120 if out.suffix.lower() == ".png" else None)
        written.append(out)
    plt.close(fig)
    return written
