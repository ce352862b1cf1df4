"""Issue 32's goal table: does ``recstack advise``'s top recommendation hold when applied and re-measured?

For each model (the 13 zoo models in inference; ``--mode train``: the eight 2020 models), ``recstack.advise``
runs under ``--budget`` and its winner is written with ``--apply-to``; then the baseline and the winner's
RunConfig are each profiled in fresh processes (``recstack profile --config``), alternating, ``--pairs``
times, and the measured speedup (time per sample, medians) is set beside the claimed one and its interval.
Columns: claimed speedup [interval], re-measured speedup, reproduced (inside the interval), slower (the
re-measured winner slower than the baseline beyond the noise rule), combination beats the best single.
Run it on a quiet host; prints a markdown table and writes the rows as JSON (``-o``).

    python benchmarks/bench_advise.py --budget 5 -o advise_inference.json                  # the table
    python benchmarks/bench_advise.py --mode train --budget 5 -o advise_train.json
    python benchmarks/bench_advise.py --models rmc1 --scale 0.0005 --batch-size 32 --budget 2 --levers batch_size --pairs 2 --iters 6  # tiny
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MODELS = ("rmc1", "rmc2", "rmc3", "ncf", "wnd", "mtwnd", "din", "dien", "dlrmv2", "deepfm", "twotower", "bst", "hstu")
MODELS_2020 = ("rmc1", "rmc2", "rmc3", "ncf", "wnd", "mtwnd", "din", "dien")


def per_sample(config: Path, out: Path, iters: int) -> float:
    """One fresh ``recstack profile`` process: the run's time per sample (s)."""
    subprocess.run([sys.executable, "-m", "recstack", "--quiet", "profile", "--config", str(config), "--iters",
                    str(iters), "-o", str(out), "--depth", "0"], check=True, capture_output=True, text=True)
    data = json.loads(out.read_text())
    return float(data["root"]["time_s"]) / int(data["run"]["batch_size"])


def remeasure(doc: dict[str, Any], winner: Path, work: Path, pairs: int, iters: int) -> dict[str, Any]:
    import yaml

    from recstack.advisor.measure import compare
    from recstack.config.run import RunConfig

    base = work / "baseline.yaml"
    base.write_text(yaml.safe_dump(RunConfig.model_validate(doc["baseline"]).model_dump(mode="json",
                                                                                         exclude_defaults=True)))
    b, w = [], []
    for i in range(pairs):  # alternating fresh processes, the order swapped every other pair
        order = [(base, b), (winner, w)] if i % 2 == 0 else [(winner, w), (base, b)]
        for cfg, acc in order:
            acc.append(per_sample(cfg, work / "p.json", iters))
    return compare(b, w)


def row(model: str, args: argparse.Namespace) -> dict[str, Any]:
    import recstack

    out: dict[str, Any] = {"model": model, "mode": args.mode}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        try:
            doc = recstack.advise(model, scale=args.scale, batch_size=args.batch_size, mode=args.mode,
                                  budget_min=args.budget, levers=args.levers.split(",") if args.levers else None)
        except Exception as exc:  # a model that cannot be advised here: say so in the table
            out["error"] = f"{type(exc).__name__}: {exc}"[:160]
            return out
        out.update(winner=doc["winner"], elapsed_s=doc["elapsed_s"], contended=doc["contended"],
                   arms=len(doc["ranking"]) + 1)
        top = next((r for r in doc["ranking"] if r["recommended"]), None)
        singles = [r for r in doc["ranking"] if r["kind"] != "combination" and r["recommended"]]
        combo = next((r for r in doc["ranking"] if r["kind"] == "combination"), None)
        out["combination_beats_best_single"] = bool(
            combo and singles and combo["recommended"]
            and combo["step"]["speedup"] > max(s["step"]["speedup"] for s in singles))
        if top is None:
            return out
        from recstack.advisor.advise import write_apply

        write_apply(doc, work / "winner.yaml")
        got = remeasure(doc, work / "winner.yaml", work, args.pairs, args.iters)
        lo, hi = top["step"]["interval"] or (None, None)
        out.update(claimed=top["step"]["speedup"], interval=[lo, hi], remeasured=got["speedup"],
                   reproduced=bool(lo is not None and got["speedup"] is not None and lo <= got["speedup"] <= hi),
                   slower=got["verdict"] == "regression")
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | winner | claimed (95% interval) | re-measured | reproduced | slower | combination > best single |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} | | | | | |")
            continue
        if r.get("claimed") is None:
            lines.append(f"| {r['model']} | none beat noise | | | | | |")
            continue
        lo, hi = r["interval"]
        lines.append(f"| {r['model']} | {r['winner']} | {r['claimed']:.2f}x ({lo:.2f}-{hi:.2f}) | "
                     f"{r['remeasured']:.2f}x | {'yes' if r['reproduced'] else 'NO'} | "
                     f"{'YES' if r['slower'] else 'no'} | {'yes' if r['combination_beats_best_single'] else 'no'} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=None, help="comma-separated zoo ids (default: all 13; train: the 2020 eight)")
    ap.add_argument("--mode", choices=("inference", "train"), default="inference")
    ap.add_argument("--scale", type=float, default=0.01)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--budget", type=float, default=5.0, help="advise --budget per model (minutes)")
    ap.add_argument("--levers", default=None, help="only these lever kinds (advise --levers)")
    ap.add_argument("--pairs", type=int, default=5, help="fresh-process baseline/winner pairs in the re-measure")
    ap.add_argument("--iters", type=int, default=20, help="timed steps per re-measure profile")
    ap.add_argument("-o", "--output", default=None, help="write the rows as JSON")
    args = ap.parse_args()
    models = args.models.split(",") if args.models else (MODELS if args.mode == "inference" else MODELS_2020)
    rows = []
    for m in models:
        rows.append(row(m, args))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(table(rows))
    done = [r for r in rows if r.get("claimed") is not None]
    print(f"\nreproduced {sum(r['reproduced'] for r in done)} of {len(done)}; slower {sum(r['slower'] for r in done)}; "
          f"combination beat the best single on {sum(bool(r.get('combination_beats_best_single')) for r in rows)}")
    if args.output:
        Path(args.output).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
