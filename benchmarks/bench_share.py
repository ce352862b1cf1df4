"""Request-side compute sharing: batched against shared execution, per model and candidates per request.

For each model (default DIN, DIEN, the two-tower model, RMC2) and each C (default 10, 100, 1000) this
runs ``recstack share`` (one request of C candidates, torch backend, uniform
workload) and prints one row: request-only share of the batched run (FLOPs,
bytes, op time), batched and shared end-to-end time, speedup, whether the
outputs agree (rtol 1e-5, atol 1e-6), and the stages that save most. ``--out``
writes every result as JSON and the sharing report page beside it.

    python benchmarks/bench_share.py [--models din,dien,twotower,rmc2] [--candidates 10,100,1000]
                                     [--scale 0.01] [--iters 5] [--warmup 2] [--out out/share]

Times are wall times on this host; beside other processes they are contended (give ``uptime``).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from recstack.config.run import RunConfig
from recstack.report.sharing import write_share_report
from recstack.sharing.run import share_config


def row(r: dict) -> str:
    s = r["request_only_share"]
    top = sorted(r["stages"].items(), key=lambda kv: -kv[1]["saved_s"])[:2]
    saved = ", ".join(f"{k} {v['saved_s'] * 1e3:.2f} ms" for k, v in top)
    return (f"| {r['model']} | {r['candidates']} | {s['flops']:.1%} | {s['bytes']:.1%} | {s['time']:.1%} | "
            f"{r['total']['batched_s'] * 1e3:.2f} | {r['total']['shared_s'] * 1e3:.2f} | {r['speedup']:.2f}x | "
            f"{r['speedup_without_dedupe']:.2f}x | "
            f"{'yes' if r['outputs_equal'] else 'NO'} | {saved} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="din,dien,twotower,rmc2")
    ap.add_argument("--candidates", default="10,100,1000")
    ap.add_argument("--scale", type=float, default=0.01)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="folder for the JSON results and the report page")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    print("| model | C | request-only FLOPs | bytes | op time | batched ms | shared ms | speedup | w/o dedupe "
          "| outputs agree | most saved |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for model in args.models.split(","):
        for c in (int(x) for x in args.candidates.split(",")):
            cfg = RunConfig.build({"model": model, "scale": args.scale, "iters": args.iters, "warmup": args.warmup,
                                   "threads": args.threads, "machine": None})
            r = share_config(cfg, requests=1, candidates=c)
            results.append(r)
            print(row(r), flush=True)
    print(f"load average after: {os.getloadavg()}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "share.json").write_text(json.dumps(results, indent=1) + "\n")
        page = write_share_report(results, out / "share.html")
        print(f"results written to {out / 'share.json'}, report to {page}")


if __name__ == "__main__":
    main()
