"""Per-model compile table (issue 15's goal): eager vs the recommended config per stage, compile time
cold/warm, graphs, graph breaks, recompiles over the production query-size distribution.

For each model and mode: ``recommend`` (``recstack compile --recommend``) within ``--budget`` minutes
searches per-stage and whole-model configs over the dynamic-shape policies; the chosen config is then
run by ``run_session`` (``recstack compile``) over the workload's batch sizes, and its cold and warm
compile time measured in fresh processes. Prints a markdown table and writes everything as JSON.

    python benchmarks/bench_compile.py --scale 0.01 --batch-size 256 --budget 20          # the goal's table
    python benchmarks/bench_compile.py --models rmc3 ncf --scale 0.001 --batch-size 64 \\
        --budget 1 --backend aot_eager --iters 4 --no-compile-time                       # smoke test
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch

from recstack.compilation.coldwarm import compile_times
from recstack.compilation.config import CompileConfig
from recstack.compilation.recommend import recommend
from recstack.compilation.session import run_session
from recstack.config.run import RunConfig
from recstack.outputs import atomic_write_text

MODELS = ("rmc1", "rmc2", "rmc3", "ncf", "wnd", "mtwnd", "din", "dien")
STAGES = ("embedding", "dense", "interaction", "sequence", "head")


def _one(model: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    cfg = RunConfig(model=model, scale=args.scale, batch_size=args.batch_size, mode=mode, workload="production",
                    iters=args.iters, warmup=args.warmup, machine=None,
                    compile={"defaults": {"backend": args.backend}})
    t0 = time.perf_counter()
    rec = recommend(cfg, budget_s=args.budget * 60)
    chosen = CompileConfig.model_validate(rec["config"])
    torch._dynamo.reset()  # as a fresh process would start (the search's last candidate is still cached)
    report = run_session(cfg, chosen)
    times = compile_times(cfg, chosen) if args.compile_time else {"cold": None, "warm": None}
    return {"model": model, "mode": mode, "chosen": rec["chosen"], "config": rec["config"],
            "candidates": rec["candidates"], "report": report, "compile_time_s": times,
            "elapsed_s": time.perf_counter() - t0}


def _fmt(v: Any, unit: str = "x") -> str:
    return "-" if v is None else f"{v:.2f}{unit}"


def table(rows: list[dict[str, Any]]) -> str:
    head = ["model", "mode", "chosen", "best candidate (run)"] + list(STAGES) + ["run", "cold (s)", "warm (s)", "graphs", "breaks",
                                                           "recompiles", "fallbacks"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        st = r["report"]["stages"]
        best = max(r["candidates"], key=lambda c: c.get("speedup") or 0, default=None)
        cells = [r["model"], r["mode"], r["chosen"],
                 f"{best['name']} {_fmt(best.get('speedup'))}{'' if best['eligible'] else ' (rejected)'}"
                 if best else "-"]
        cells += [_fmt((st.get(s) or {}).get("speedup")) for s in STAGES]
        cells += [_fmt(st["run"]["speedup"]), _fmt(r["compile_time_s"]["cold"], ""),
                  _fmt(r["compile_time_s"]["warm"], ""), str(len(r["report"]["graphs"])),
                  str(len(r["report"]["graph_breaks"])), str(len(r["report"]["recompiles"])),
                  str(len(r["report"]["fallbacks"]))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def goal(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Never slower than eager (run speedup >= 0.98, a 2% noise margin), and >= 1.3x on the dense and
    sequence stages (those a model has) of at least half the models in training."""
    slower = [f"{r['model']}/{r['mode']}" for r in rows if (r["report"]["stages"]["run"]["speedup"] or 1) < 0.98]
    train = [r for r in rows if r["mode"] == "train"]

    def fast(r: dict) -> bool:
        sps = [(r["report"]["stages"].get(s) or {}).get("speedup") for s in ("dense", "sequence")]
        sps = [s for s in sps if s is not None]
        return bool(sps) and all(s >= 1.3 for s in sps)

    return {"slower_than_eager": slower, "train_models_at_1_3x": sum(fast(r) for r in train),
            "train_models": len(train)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--modes", nargs="+", default=["inference", "train"], choices=["inference", "train"])
    ap.add_argument("--scale", type=float, default=0.01)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=float, default=20.0, help="minutes of --recommend per model and mode")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--compile-time", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--out", default="out/bench_compile.json")
    args = ap.parse_args()
    rows = []
    for m in args.models:
        for mode in args.modes:
            rows.append(_one(m, mode, args))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
            for c in rows[-1]["candidates"]:
                print(f"  {c['name']}: run {_fmt(c.get('speedup'))}, {c['recompiles']} recompiles, "
                      f"{c['graph_breaks']} breaks, {c['why'] or 'eligible'}", flush=True)
    print(table(rows))
    g = goal(rows)
    print(json.dumps(g))
    atomic_write_text(args.out, json.dumps({"args": vars(args), "rows": rows, "goal": g}, indent=1, default=str))


if __name__ == "__main__":
    main()
