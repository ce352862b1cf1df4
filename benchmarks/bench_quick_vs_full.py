"""Do quick roofs hold? Quick and full machine measurements of this host, alternated, figure by figure.

Runs ``measure_machine`` in quick and full mode alternately (quick, full,
quick, full, ... ``--pairs`` times; alternated because a host's capacity
drifts, see issue 10 item 4) and prints one row per figure common to both
modes: the quick and full figure at the statistic the roofs use (the best
repeat; latency: the median), each the median over its runs, and their ratio
quick / full. Rows outside ``1 +- --tolerance`` are marked ``!``. Then the
wall time of every run (quick must stay under 60 s).

    python benchmarks/bench_quick_vs_full.py [--pairs 2] [--tolerance 0.15] [--out table.json]
    python benchmarks/bench_quick_vs_full.py --smoke   # tiny settings for both sides: proves it runs

Run it on a quiet host: other processes lower whichever run they overlap.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from statistics import median
from typing import Any

from recstack.hardware.bench import ROOF_STATISTIC
from recstack.hardware.machine import measure_machine
from recstack.hardware.repeatability import roof_figures
from recstack.outputs import atomic_write_text


def figures(machine: dict[str, Any]) -> dict[str, float]:
    """Figure name -> the value the roofline would use (latency: the median, it is not a roof)."""
    return {
        name: float(st["median" if group == "latency" else ROOF_STATISTIC])
        for group, name, st in roof_figures(machine)
    }


def run(pairs: int, smoke: bool) -> tuple[dict[str, list[dict[str, float]]], dict[str, list[float]]]:
    values: dict[str, list[dict[str, float]]] = {"quick": [], "full": []}
    seconds: dict[str, list[float]] = {"quick": [], "full": []}
    for i in range(pairs):
        for mode in ("quick", "full"):
            print(f"run {i + 1}/{pairs}: {mode}{' (smoke: tiny settings)' if smoke else ''}", file=sys.stderr)
            t0 = time.perf_counter()
            m = measure_machine(quick=mode == "quick", tiny=smoke)
            seconds[mode].append(time.perf_counter() - t0)
            values[mode].append(figures(m))
    return values, seconds


def table(values: dict[str, list[dict[str, float]]], tolerance: float) -> list[dict[str, Any]]:
    common = set.intersection(*(set(v) for runs in values.values() for v in runs))
    rows = []
    for name in sorted(common):
        q = median(v[name] for v in values["quick"])
        f = median(v[name] for v in values["full"])
        ratio = q / f if f > 0 else float("nan")
        fulls = [v[name] for v in values["full"]]
        # How far the host itself moved between full runs: a quick/full gap inside it is not quick's fault.
        drift = max(fulls) / min(fulls) - 1 if min(fulls) > 0 else float("nan")
        rows.append(
            {
                "figure": name,
                "quick": q,
                "full": f,
                "ratio": ratio,
                "outside": not abs(ratio - 1) <= tolerance,
                "quick_runs": [v[name] for v in values["quick"]],
                "full_runs": fulls,
                "full_drift": drift,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2, help="quick+full pairs, alternated (default 2)")
    ap.add_argument("--tolerance", type=float, default=0.15, help="mark ratios outside 1 +- this (default 0.15)")
    ap.add_argument("--smoke", action="store_true", help="tiny settings for both sides (proves the script runs)")
    ap.add_argument("--out", default=None, help="also write the rows and run times as JSON here")
    args = ap.parse_args(argv)
    values, seconds = run(max(1, args.pairs), args.smoke)
    rows = table(values, args.tolerance)
    width = max(len(r["figure"]) for r in rows)
    print(f"| {'figure':{width}s} | {'quick':>10s} | {'full':>10s} | quick/full | full drift |")
    print(f"|{'-' * (width + 2)}|{'-' * 12}|{'-' * 12}|------------|------------|")
    for r in rows:
        mark = " !" if r["outside"] else ""
        print(
            f"| {r['figure']:{width}s} | {r['quick']:10.4g} | {r['full']:10.4g} | {r['ratio']:8.3f}{mark:2s} "
            f"| {r['full_drift']:10.1%} |"
        )
    outside = sum(r["outside"] for r in rows)
    print(f"\n{len(rows) - outside} of {len(rows)} figures within {args.tolerance:.0%} (best repeat; latency: median)")
    inside_drift = sum(r["outside"] and abs(r["ratio"] - 1) <= r["full_drift"] for r in rows)
    print(f"of the {outside} outside: {inside_drift} within the host's own full-to-full drift (max/min of full runs)")
    for mode, secs in seconds.items():
        print(f"{mode} runs: " + ", ".join(f"{s:.1f} s" for s in secs))
    if args.out:
        atomic_write_text(args.out, json.dumps({"rows": rows, "seconds": seconds, "smoke": args.smoke}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
