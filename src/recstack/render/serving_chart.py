"""The search chart (``--chart-out FILE.png``): p99 latency against offered load per configuration, with the
target line, and the latency-bounded QPS per configuration. Draws the verdict's figures; computes none."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _label(c: dict[str, Any]) -> str:
    gpu = "" if c.get("gpu_threshold") is None else f" gpu>{c['gpu_threshold']}"
    return f"B={c['max_batch']} w={c['workers']} t={c['threads']} {c['backend']}/{c['dtype']}{gpu}"


def render_search_chart(verdict: dict[str, Any], path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from recstack.outputs import atomic_output

    confs = verdict["configurations"]
    target = verdict["target"]["latency_s"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for c in confs:
        pts = [p for p in c.get("curve") or [] if p["p99_s"] is not None]
        if pts:  # filled markers: full probes; hollow: screening probes (fewer samples, wider interval)
            (line,) = ax1.plot([p["qps"] for p in pts], [p["p99_s"] * 1e3 for p in pts], label=_label(c))
            for screening in (False, True):
                sel = [p for p in pts if bool(p.get("screening")) == screening]
                ax1.scatter([p["qps"] for p in sel], [p["p99_s"] * 1e3 for p in sel], color=line.get_color(),
                            facecolors="none" if screening else line.get_color(), zorder=3)
    ax1.axhline(target * 1e3, color="red", linestyle="--", label=f"target p99 {target * 1e3:g} ms")
    ax1.set_xlabel("offered load (QPS, scheduled; hollow: screening probe)")
    ax1.set_ylabel("p99 latency from scheduled arrival (ms, measured)")
    ax1.set_yscale("log")
    ax1.legend(fontsize=7)
    ax1.set_title(f"{verdict.get('model')}: latency vs load")
    names = [_label(c) for c in confs]
    ax2.barh(names, [c["qps_at_target"] or 0 for c in confs], color=["tab:green" if c["meets_target"] else "tab:gray"
                                                                    for c in confs])
    ax2.set_xlabel(f"QPS at p99 <= {target * 1e3:g} ms (measured, full probe; 0: not met)")
    ax2.tick_params(axis="y", labelsize=7)
    ax2.set_title("latency-bounded QPS per configuration")
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return Path(path)
