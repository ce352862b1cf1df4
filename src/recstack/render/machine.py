"""``recstack machine``'s text: a machine file's figures, and old vs new roofs of a re-measurement."""

from __future__ import annotations

from typing import Any

from recstack.noise import MACHINE_TOLERANCE as TOLERANCE
from recstack.noise import beyond
from recstack.units import binary, si


def _stat(st: dict[str, Any], unit: str) -> str:
    med, lo, hi = (si(st[k], unit, digits=4, missing="n/a") for k in ("median", "min", "max"))
    return f"{med} [{lo} .. {hi}, n={st['repeats']}]"


def format_machine(m: dict[str, Any], counters: dict[str, Any] | None = None) -> str:
    """Human-readable summary of a machine dict (medians with [min .. max, repeats])."""
    out = [
        f"machine: {m['host']}  {m['cpu_model']}  ({m.get('cpus', '?')} CPUs)",
        f"measured {m['measured_at']}  mode {m.get('mode', 'quick' if m['quick'] else 'full')}"
        f"  in {m.get('duration_s', 0):.0f} s  load avg before/after {m.get('load_avg', {}).get('before')}"
        f" / {m.get('load_avg', {}).get('after')}",
    ]
    out += [f"note: {n}" for n in m.get("notes", [])]
    out.append(
        "caches: "
        + ", ".join(
            f"L{c['level']} {c['type']} {binary(c['size_bytes'])} x{c['instances']}" for c in m["caches"]
        )
    )
    out.append("GEMM FLOP/s  median [min .. max, repeats]:")
    for dt, entry in m["gemm_flops"].items():
        if not isinstance(entry, dict) or "by_threads" not in entry:
            continue
        tag = " (emulated)" if entry.get("emulated") else ""
        for t, st in sorted(entry["by_threads"].items(), key=lambda kv: int(kv[0])):
            out.append(f"  {dt}{tag:11s} {int(t):3d} thread(s): {_stat(st, 'FLOP/s')}  n={st.get('n')}")
    sb = m["stream_bandwidth"]
    out.append(f"stream bandwidth ({binary(sb.get('array_bytes', 0))} arrays):")
    for t, kinds in sorted(sb["by_threads"].items(), key=lambda kv: int(kv[0])):
        out.append(
            f"  {int(t):3d} thread(s): copy {_stat(kinds['copy'], 'B/s')}  triad {_stat(kinds['triad'], 'B/s')}"
        )
    gb = m["gather_bandwidth"]
    out.append(f"gather bandwidth ({gb.get('kernel', 'index_select')}), median bytes/s [min .. max]:")
    for c in gb["grid"]:
        turn = int(c.get("tables_in_turn", 1))
        what = f"{binary(c['table_bytes']):>9s} table" + (f" x {turn} in turn" if turn > 1 else "")
        out.append(
            f"  {c['threads']:3d} thr {c['dist']:7s} {c['row_bytes']:4d} B rows  {what}: "
            f"{_stat(c['bandwidth'], 'B/s')}  unique {c.get('unique_fraction', 0):.0%}"
        )
    lat = m["latency_ns"]
    how = lat.get("method") if lat.get("method") in ("native", "python-fallback") else "Python loop (older file)"
    trust = "" if lat.get("trusted") else "; not trusted, not used for classification"
    out.append(
        f"latency (ns per dependent load, {how}{trust}): "
        + ", ".join(
            f"{s.get('level', '')} {binary(s['bytes'])}: {s['ns']['median']:.1f} [{s['ns']['min']:.1f} .. {s['ns']['max']:.1f}]".strip()
            for s in lat.get("by_size", [])
        )
    )
    stops = [
        (name, st)
        for name, st in (
            ("fp32 GEMM", m["gemm_flops"].get("fp32", {}).get("stopping")),
            ("bf16 GEMM", (m["gemm_flops"].get("bf16") or {}).get("stopping")),
            ("stream", sb.get("stopping")),
            ("gather", gb.get("stopping")),
        )
        if st
    ]
    if stops:
        out.append(
            "repeats: " + ", ".join(f"{name} {st['rounds']} rounds ({st['stopped_by']})" for name, st in stops)
        )
    gpu = m.get("gpu")
    if gpu:
        out.append(f"gpu: {gpu['name']}  HBM copy {_stat(gpu['hbm_bandwidth']['copy'], 'B/s')}")
        for dt, st in gpu["gemm_flops"].items():
            out.append(f"  {dt} GEMM: {_stat(st, 'FLOP/s')}")
    if counters is not None:
        if counters.get("available"):
            out.append(
                f"hardware counters: available ({', '.join(counters.get('events', []))}; top-down {counters.get('topdown')})"
            )
        else:
            out.append(f"hardware counters: unavailable: {counters.get('reason')}")
    return "\n".join(out)


def format_old_vs_new(cmp: dict[str, Any], keys: set[str], old_file: str) -> str:
    """Old vs new value of every re-measured roof figure at the roof statistic."""
    rows = [r for r in cmp["figures"] if r["stat"] == cmp["roof_statistic"]]  # the caller keeps the rows of those roofs
    units = {"gemm": "FLOP/s", "stream": "B/s", "gather": "B/s"}
    out = [f"re-measured the roofs the profile used ({', '.join(sorted(keys))}); old = {old_file}, best repeat:"]
    width = max((len(r["figure"]) for r in rows), default=10)
    for r in rows:
        u = units.get(r["group"], "")
        old, new = (si(r[k], u, digits=4, missing="n/a") for k in ("before", "now"))
        out.append(f"  {r['figure']:{width}s}  old {old:>12s}  new {new:>12s}  {r['change']:+.1%}")
    if not rows:
        out.append("  (no figure of these roofs in common)")
    return "\n".join(out)


def format_spread(spread: dict[str, Any]) -> str:
    """One line: the within-run p10-p90 spread per group, and a warning when it exceeds the tolerance."""
    parts = ", ".join(f"{g} {v['median_spread']:.0%} (max {v['max_spread']:.0%})" for g, v in spread.items())
    noisy = [g for g, v in spread.items() if beyond(v["median_spread"], TOLERANCE)]
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
        (r for r in cmp["figures"] if r["stat"] == cmp["roof_statistic"] and beyond(r["change"], cmp["tolerance"])),
        key=lambda r: -abs(r["change"]),
    )
    for r in moved[:top]:
        out.append(f"    {r['figure']}: {r['change']:+.1%}")
    if len(moved) > top:
        out.append(f"    ... and {len(moved) - top} more")
    return "\n".join(out)


__all__ = ["format_comparison", "format_machine", "format_old_vs_new", "format_spread"]
