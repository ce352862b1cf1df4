"""``recstack share``'s text: the share result as a terminal view."""

from __future__ import annotations

from typing import Any

from recstack.units import count, seconds


def _short(paths: list[str], limit: int = 6) -> list[str]:
    return paths if len(paths) <= limit else [*paths[:limit], f"... ({len(paths)} in all)"]


def render_text(r: dict[str, Any]) -> str:
    """The terminal view of a share result (figures as computed by the analysis)."""
    tol = r["tolerance"]
    share = r["request_only_share"]
    lines = [
        f"recstack share: {r['model']} ({r.get('backend', '?')} backend), {r['requests']} request(s) x "
        f"{r['candidates']:g} candidates = {r['rows']} rows",
        f"sharing: {r['sharing']['status']}" + (f" ({r['sharing']['reason']})" if r["sharing"]["reason"] else "")
        + ("" if r["sharing"]["status"] == "shared" else "; no shared execution: its figures below are the batched run's"),
        f"outputs agree within rtol {tol['rtol']:g}, atol {tol['atol']:g}: {'yes' if r['outputs_equal'] else 'NO'}"
        f" (largest difference {r['max_abs_diff'] if r['max_abs_diff'] is not None else 'n/a: shapes differ'})",
        f"request-only share of the batched run: FLOPs {share['flops']:.1%}, bytes {share['bytes']:.1%}, "
        f"op time {share['time']:.1%} (cost model; {share['time_basis']})",
        "request-only modules: " + (", ".join(_short(r["request_only_modules"])) or "none"),
        "expanded at the entry of: " + (", ".join(r["expansions"]) or "none")
        + ("; request-only but inside them (run per candidate): " + ", ".join(r["unshared_request_modules"])
           if r["unshared_request_modules"] else ""),
        "",
        f"{'stage':20s} {'batched':>11s} {'shared':>11s} {'saved':>11s} {'FLOPs saved/req':>16s} {'bytes saved/req':>16s}",
    ]
    for st, v in r["stages"].items():
        lines.append(
            f"{st:20s} {seconds(v['batched_s'], digits=3):>11s} {seconds(v['shared_s'], digits=3):>11s} {seconds(v['saved_s'], digits=3):>11s} "
            f"{count(v['flops_saved_per_request']):>16s} {count(v['bytes_saved_per_request']):>16s}"
        )
    t = r["total"]
    lines += [
        f"{'end to end':20s} {seconds(t['batched_s'], digits=3):>11s} {seconds(t['shared_s'], digits=3):>11s} {seconds(t['saved_s'], digits=3):>11s}",
        "",
        f"speedup (batched / shared, measured, {r['timing']['statistic']}, {r['timing']['iters']} iterations, "
        f"{r['timing']['threads']} threads): {r['speedup']:.2f}x; without the deduplication "
        f"(request features received once): {r['speedup_without_dedupe']:.2f}x",
        "saving as C grows (formula (1 - 1/C) x request-only share of op time): "
        + ", ".join(f"C={p['candidates']}: {p['time_saved_share']:.0%}" for p in r["curve"] if p["candidates"] in (1, 10, 100, 1000)),
        "times are measured on this host; beside other processes they are contended",
    ]
    return "\n".join(lines)


__all__ = ["render_text"]
