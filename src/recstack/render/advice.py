"""``recstack advise``'s text: the ranked levers, the winner, what was not tried."""

from __future__ import annotations

from typing import Any

from recstack.units import ratio


def render(doc: dict[str, Any]) -> str:
    """The advice document as the terminal table."""
    lines = [f"recstack advise: {doc['model']} (goal {doc['goal']}, batch {doc['baseline']['batch_size']}, "
             f"{doc['rounds']} alternating rounds, {doc['iters']} timed steps per arm)"]
    if doc["contended"]:
        lines.append("WARNING: contended run: " + ("; ".join(doc["contention_evidence"]) or "see the profile"))
    lines.append(f"{'':2s}{'lever':34s} {'stage':18s} {'stage x':>8s} {'step x':>8s} {'95% interval':>15s} "
                 f"{'cost':32s} change")
    for r in doc["ranking"]:
        iv = r["step"]["interval"]
        ivs = f"[{iv[0]:.2f}, {iv[1]:.2f}]" if iv else "-"
        cost = f"build {r['build_s']:.1f}s"
        if r["deviation"]:
            cost += f", dev {r['deviation']['max_rel']:.1e}"
        if r.get("loss"):
            cost += f", loss dev {r['loss']['rel_dev'] if r['loss']['rel_dev'] is not None else float('inf'):.1e}"
        mem = r["resident"]
        if mem["baseline_bytes"] and mem["what_if_bytes"] != mem["baseline_bytes"]:
            cost += f", mem {mem['what_if_bytes'] / mem['baseline_bytes']:.2f}x"
        mark = "* " if r["recommended"] else "  "
        lines.append(f"{mark}{r['name'][:34]:34s} {r['stage'][:18]:18s} {ratio(r['stage_result']['speedup']):>8s} "
                     f"{ratio(r['step']['speedup']):>8s} {ivs:>15s} {cost:32s} {r['exact_change']}  ({r['reason']})")
    lines.append(f"winner: {doc['winner']}" if doc["winner"] else "no lever beat noise: keep the baseline")
    for s in doc["not_tried"]:
        lines.append(f"not tried: {s['name']} ({s['stage']}): {s['reason']}")
    lines += [f"note: {n}" for n in doc["notes"]]
    lines.append(f"(* {doc['noise_rule']}; tolerance {doc['tolerance']:g}; took {doc['elapsed_s']:.0f} s;"
                 " docs/advise.md)")
    return "\n".join(lines)


__all__ = ["render"]
