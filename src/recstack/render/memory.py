"""``recstack memory``'s text: the predicted peaks, consumers, and what fits."""

from __future__ import annotations

from typing import Any

from recstack.units import binary as _size


def render(doc: dict[str, Any]) -> str:
    """The memory document as the terminal view."""
    measured = doc.get("provenance") == "predicted and measured"
    lines = [
        f"recstack memory: {doc['model']} ({doc['backend']} backend, {doc['mode']}, optimizer {doc['optimizer']}, "
        f"tables {doc['table_dtype']}), batch {doc['batch_size']}, scale {doc['scale']:g}"
        + (" (predicted; measured: the per-step part, one step built for real)" if measured
           else " (predicted, nothing allocated)"),
        f"{'stage':20s} {'peak':>12s} {'of it per step':>15s}" + (f" {'measured':>12s}" if measured else ""),
    ]
    for st in doc["stages"]:
        got = st.get("measured_dynamic_bytes")
        lines.append(f"{st['stage']:20s} {_size(st['peak_bytes']):>12s} {_size(st['dynamic_bytes']):>15s}"
                     + ((f" {'-' if got is None else _size(got):>12s}") if measured else ""))
    verdict = "fits" if doc["fits"] else "does NOT fit"
    lines += [
        f"peak {_size(doc['peak_bytes'])} in {doc['peak_stage']}: {verdict} in {_size(doc['limit_bytes'])}",
        "resident: " + ", ".join(f"{k} {_size(v)}" for k, v in doc["resident"].items() if v)
        + f"; input batches {_size(doc['inputs_bytes'])}",
        "top consumers: " + "; ".join(f"{c['what']}{' ' + c['detail'] if c['detail'] else ''} ({c['stage']}) "
                                      f"{_size(c['bytes'])}" for c in doc["top_consumers"][:5]),
    ]
    if doc["ranks"]:
        lines.append("per rank: " + "; ".join(f"rank {r['rank']} {_size(r['peak_bytes'])} (all-to-all "
                                              f"{_size(r['all_to_all_bytes'])})" for r in doc["ranks"]))
    else:
        scale = doc["largest_scale"]
        lines.append(f"largest batch that fits: {doc['largest_batch_size'] or 'none'}; largest --scale at batch "
                     f"{doc['batch_size']}: {'none' if scale is None else f'{scale:g}'}")
    if doc.get("cache"):
        c = doc["cache"]
        lines.append(f"cache for a {c['target_hit_rate']:.0%} hit rate ({c['ways']}-way sets, {c['batches']} batches "
                     f"of {c['batch_size']}): table, lookups, distinct rows, LRU rows, LFU rows")
        for t in c["tables"]:
            best = t["best_hit_rate"]
            miss = f"none (at most {best:.0%})" if best is not None else "none"
            lines.append(f"  {t['table']:24s} {t['lookups']:>10} {t['distinct_rows']:>10} "
                         f"{t['lru_rows'] or miss:>10} {t['lfu_rows'] or miss:>10}")
    lines += [f"note: {n}" for n in doc["notes"]]
    lines.append(f"(analysis took {doc['elapsed_s'] * 1e3:.0f} ms; what is and is not counted: docs/memory.md)")
    return "\n".join(lines)


__all__ = ["render"]
