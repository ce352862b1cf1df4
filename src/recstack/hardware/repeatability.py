"""How much did the machine's figures move between two measurements of the same host?

A roofline is only as good as its roofs. On a shared or virtualised host the
best repeat of a benchmark can move by more than the differences a user is
looking for, so recstack compares every fresh measurement with the previous
one of the same host and CPU (``get_machine(refresh=True)``) and keeps the
comparison in the machine file under ``repeatability``; ``recstack machine
--compare FILE`` compares the current figures with any machine file.

Compared figures: every roof figure at the statistic the roofs use
(:data:`recstack.hardware.bench.ROOF_STATISTIC`, the best repeat) and its
median: fp32/bf16 GEMM per thread count, stream copy and triad per thread
count, every gather grid cell, and the DRAM latency (median only; latency is
not a roof). Change = ``(now - before) / before``; a figure *repeats* when
``|change| <= TOLERANCE``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from recstack.hardware.bench import ROOF_STATISTIC
from recstack.units import binary

TOLERANCE = 0.10


def roof_figures(m: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(group, name, stat) for every comparable figure of a machine dict."""
    for dt, entry in m["gemm_flops"].items():
        if isinstance(entry, dict) and "by_threads" in entry:
            for t, st in entry["by_threads"].items():
                yield "gemm", f"{dt} GEMM {t} thread(s)", st
    for t, kinds in m["stream_bandwidth"]["by_threads"].items():
        for k in ("copy", "triad"):
            yield "stream", f"stream {k} {t} thread(s)", kinds[k]
    for c in m["gather_bandwidth"]["grid"]:
        turn = int(c.get("tables_in_turn", 1))
        tables = binary(c["table_bytes"]) + (f" x {turn} tables in turn" if turn > 1 else "")
        name = f"gather {c['dist']} {c['row_bytes']} B rows {tables} {c['threads']} thread(s)"
        yield "gather", name, c["bandwidth"]
    yield "latency", "DRAM latency", m["latency_ns"]["dram"]


def within_run_spread(m: dict[str, Any]) -> dict[str, Any]:
    """How noisy the host was during one measurement: per group, the median over its figures of
    ``(p90 - p10) / median`` of the repeats (0 on a perfectly quiet host), and the noisiest figure."""
    groups: dict[str, list[tuple[float, str]]] = {}
    for group, name, st in roof_figures(m):
        med = float(st.get("median") or 0.0)
        if med > 0 and "p90" in st and "p10" in st:
            groups.setdefault(group, []).append(((float(st["p90"]) - float(st["p10"])) / med, name))
    out: dict[str, Any] = {}
    for g, vals in groups.items():
        spreads = sorted(v for v, _ in vals)
        worst = max(vals)
        out[g] = {
            "median_spread": spreads[len(spreads) // 2],
            "max_spread": worst[0],
            "noisiest": worst[1],
            "figures": len(vals),
        }
    return out


def compare_machines(now: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """Per-figure relative change from ``before`` to ``now`` and a summary per group and statistic."""
    old = {name: st for _g, name, st in roof_figures(before)}
    rows = []
    for group, name, st in roof_figures(now):
        if name not in old:
            continue
        for stat in (ROOF_STATISTIC, "median"):
            if group == "latency" and stat != "median":
                continue
            b, n = float(old[name][stat]), float(st[stat])
            if b <= 0:
                continue
            rows.append({"group": group, "figure": name, "stat": stat, "before": b, "now": n, "change": (n - b) / b})
    summary: dict[str, Any] = {}
    for stat in (ROOF_STATISTIC, "median"):
        sel = [r for r in rows if r["stat"] == stat]
        if not sel:
            continue
        worst = max(sel, key=lambda r: abs(r["change"]))
        groups = {}
        for g in sorted({r["group"] for r in sel}):
            gs = [abs(r["change"]) for r in sel if r["group"] == g]
            groups[g] = {"figures": len(gs), "max_abs_change": max(gs), "beyond_tolerance": sum(x > TOLERANCE for x in gs)}
        summary[stat] = {
            "figures": len(sel),
            "beyond_tolerance": sum(abs(r["change"]) > TOLERANCE for r in sel),
            "max_abs_change": abs(worst["change"]),
            "worst": worst["figure"],
            "by_group": groups,
        }
    return {
        "before_measured_at": before.get("measured_at"),
        "before_mode": before.get("mode"),
        "now_measured_at": now.get("measured_at"),
        "tolerance": TOLERANCE,
        "roof_statistic": ROOF_STATISTIC,
        "summary": summary,
        "figures": rows,
    }


def format_spread(spread: dict[str, Any]) -> str:
    """One line: the within-run p10-p90 spread per group, and a warning when it exceeds the tolerance."""
    parts = ", ".join(f"{g} {v['median_spread']:.0%} (max {v['max_spread']:.0%})" for g, v in spread.items())
    noisy = [g for g, v in spread.items() if v["median_spread"] > TOLERANCE]
    line = f"within-run spread (p10-p90 / median, median over figures): {parts}"
    if noisy:
        line += (
            f"\nwarning: noisy host ({', '.join(noisy)} repeats spread more than {TOLERANCE:.0%}); roofs may move "
            "more than that run to run (re-measure with --remeasure to see how much)"
        )
    return line


def format_comparison(cmp: dict[str, Any], top: int = 8) -> str:
    """A few lines: per statistic, how many figures moved beyond the tolerance, per group, and the worst."""
    out = [
        f"repeatability vs the measurement of {cmp['before_measured_at']} ({cmp['before_mode']}); "
        f"tolerance {cmp['tolerance']:.0%}:"
    ]
    for stat, s in cmp["summary"].items():
        label = "best repeat (roofs)" if stat == cmp["roof_statistic"] else stat
        groups = ", ".join(
            f"{g} {v['beyond_tolerance']}/{v['figures']} (max {v['max_abs_change']:.0%})" for g, v in s["by_group"].items()
        )
        out.append(
            f"  {label}: {s['beyond_tolerance']} of {s['figures']} figures moved more than {cmp['tolerance']:.0%}"
            f" [{groups}]; worst {s['max_abs_change']:.1%} ({s['worst']})"
        )
    moved = sorted(
        (r for r in cmp["figures"] if r["stat"] == cmp["roof_statistic"] and abs(r["change"]) > cmp["tolerance"]),
        key=lambda r: -abs(r["change"]),
    )
    for r in moved[:top]:
        out.append(f"    {r['figure']}: {r['change']:+.1%}")
    if len(moved) > top:
        out.append(f"    ... and {len(moved) - top} more")
    return "\n".join(out)
