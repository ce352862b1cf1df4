"""Stage shares and profiler overhead for zoo models (issue: hierarchical profiler).

For each model, build it once (at --scale), then profile it at each batch size
with the given workload, and print one markdown row per (model, batch): stage
shares, `other`, the stage-pass overhead ratio with its 95% CI, and the op-pass
ratio. With --vs-torch-profiler it also times torch.profiler alone (same
record_shapes setting, no recstack ranges) on the same batches, to compare the
op pass against it. A second table says what `other` is made of: the ops the
op pass saw outside every stage (share of the step, and the largest three by
name) and `[python/framework between ops]`. Target: `other` under 5% of the
step for every zoo model at batch 64 and 1024. Results are written as JSON to --out.

    python benchmarks/bench_profiler.py --models rmc1 rmc2 --batches 64 1024 --scale 0.1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import recstack
from recstack.profiling.runner import call_model
from recstack.profiling.stats import median
from recstack.workload import bind, load_workload
from recstack.zoo import build_model, builtin_names

STAGES = ("feature_processing", "embedding", "dense", "interaction", "sequence", "head", "other")


def other_breakdown(prof) -> dict:
    """`other` as shares of the step: ops seen outside every stage (with the top three), and framework time."""
    other = prof.stage("other")
    total = prof.root.time_s or 1.0
    callers = {st.name: c.time_s / total for st in prof.root.children
               if (c := st.child("[caller code]")) is not None}
    if other is None:
        return {"other": 0.0, "ops": 0.0, "framework": 0.0, "top_ops": [], "caller": callers}
    ops = [c for c in other.children if c.extra.get("kind") is None]
    framework = sum(c.time_s for c in other.children if c.extra.get("kind") == "framework")
    return {
        "caller": callers,  # stage -> share of the step run by the model's own code before that stage's root
        "other": other.time_s / total,
        "ops": sum(c.time_s for c in ops) / total,
        "framework": framework / total,
        "top_ops": [(c.name, c.time_s / total) for c in sorted(ops, key=lambda c: -c.time_s)[:3]],
    }


def print_other_table(results: list[dict]) -> None:
    print("\n| model | batch | other | ops outside stages | python/framework | largest ops | caller code in stages |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        o = r["other_breakdown"]
        top = ", ".join(f"{n} {100 * v:.1f}%" for n, v in o["top_ops"]) or "-"
        print(f"| {r['model']} | {r['batch']} | {100 * o['other']:.1f}% | {100 * o['ops']:.1f}% | "
              f"{100 * o['framework']:.1f}% | {top} | {caller_text(o['caller'])} |")


def caller_text(callers: dict[str, float]) -> str:
    """Total caller-code share and the stages holding the most of it."""
    if not callers:
        return "-"
    top = sorted(callers.items(), key=lambda kv: -kv[1])[:3]
    return f"{100 * sum(callers.values()):.1f}% (" + ", ".join(f"{k} {100 * v:.1f}%" for k, v in top) + ")"


def torch_profiler_alone(model, batches, iters: int) -> float:
    """Median step under plain torch.profiler (record_shapes) with no recstack ranges."""
    from torch.profiler import ProfilerActivity, profile

    steps = []
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], record_shapes=True):
        for i in range(iters):
            t0 = time.perf_counter_ns()
            call_model(model, batches[i % len(batches)])
            steps.append((time.perf_counter_ns() - t0) * 1e-9)
    return median(steps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=builtin_names())
    ap.add_argument("--batches", nargs="+", type=int, default=[64, 1024])
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--workload", default="uniform")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--op-iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--vs-torch-profiler", action="store_true")
    ap.add_argument("--out", default="out/bench_profiler.json")
    ap.add_argument("--save-profiles", default=None, help="folder to save each profile JSON ({model}_{backend}_{batch}.json)")
    args = ap.parse_args()

    results = []
    print(f"threads={torch.get_num_threads()} scale={args.scale} backend={args.backend} workload={args.workload}")
    print("| model | batch | step (ms) | " + " | ".join(STAGES) + " | stage pass (95% CI) | op pass | op pass / torch.profiler |")
    print("|---" * (len(STAGES) + 6) + "|")
    spec = load_workload(args.workload)
    for name in args.models:
        t0 = time.time()
        model = build_model(name, scale=args.scale, backend=args.backend)
        build_s = time.time() - t0
        bound = bind(spec, model.features(), model.num_dense, model.num_tasks)
        for bs in args.batches:
            prof = recstack.profile(
                model,
                bound,
                batch_size=bs,
                iters=args.iters,
                warmup=args.warmup,
                op_iters=args.op_iters,
                machine="auto",
                run_info={"model": name, "backend": args.backend, "scale": args.scale, "workload": args.workload,
                          "model_config": model.cfg.model_dump(), "workload_config": bound.describe()},
            )
            if args.save_profiles:
                prof.save(Path(args.save_profiles) / f"{name}_{args.backend}_{bs}.json")
            shares = prof.stage_shares()
            ov = prof.overhead
            vs = None
            if args.vs_torch_profiler:
                batches = [bound.batch(bs, i) for i in range(4)]
                alone = torch_profiler_alone(model, batches, max(args.op_iters, 5))
                vs = ov["op_pass_step_s"] / alone if alone > 0 else None
            row = {
                "model": name,
                "batch": bs,
                "build_s": build_s,
                "step_s": prof.root.time_s,
                "shares": {s: shares.get(s, 0.0) for s in STAGES},
                "stage_pass_ratio": ov["stage_pass_ratio"],
                "stage_pass_ratio_ci": ov["stage_pass_ratio_ci"],
                "op_pass_ratio": ov["op_pass_ratio"],
                "op_pass_vs_torch_profiler": vs,
                "other_breakdown": other_breakdown(prof),
            }
            results.append(row)
            ci = ov["stage_pass_ratio_ci"]
            print(
                f"| {name} | {bs} | {prof.root.time_s * 1e3:.2f} | "
                + " | ".join(f"{100 * shares.get(s, 0.0):.1f}%" for s in STAGES)
                + f" | {ov['stage_pass_ratio']:.3f} ({ci[0]:.3f}-{ci[1]:.3f}) | {ov['op_pass_ratio']:.2f}x | "
                + (f"{vs:.2f}x" if vs else "-")
                + " |",
                flush=True,
            )
        del model
    print_other_table(results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
