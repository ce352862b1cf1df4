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
from recstack.noise import MACHINE_TOLERANCE, beyond
from recstack.units import binary

TOLERANCE = MACHINE_TOLERANCE


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
            groups[g] = {"figures": len(gs), "max_abs_change": max(gs), "beyond_tolerance": sum(beyond(x, TOLERANCE) for x in gs)}
        summary[stat] = {
            "figures": len(sel),
            "beyond_tolerance": sum(beyond(r["change"], TOLERANCE) for r in sel),
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


def figure_matches(row: dict[str, Any], keys: set[str]) -> bool:
    """Whether a compared figure belongs to one of these roofs (``gemm.fp32``, ``stream``, ...)."""
    if row["group"] == "gemm":
        return any(k.startswith("gemm.") and row["figure"].startswith(k.split(".", 1)[1] + " GEMM") for k in keys)
    return row["group"] in keys
