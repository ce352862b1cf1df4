"""Stage shares of models from public recommendation libraries (issue: any model's layout).

Builds each model of tests/_public_models.py (deepctr-torch DeepFM and DIN,
torch-rechub DIN, TorchRec DLRM) at the given batch size, profiles it, and
prints one markdown row per model: stage shares, `other` split into ops seen
after the last stage root and Python/framework time, the caller code the
stages hold (the model's own code before each stage's root), and the stage roots that were
handed down from containers that never ran. Target: `other` under 10%. Run it
on a quiet host; results go to --out as JSON.

    python benchmarks/bench_public_models.py --batches 64 1024
    python benchmarks/bench_public_models.py --batches 8 --iters 3 --warmup 1   # a smoke run
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _public_models import MODELS  # noqa: E402
from bench_profiler import caller_text, other_breakdown  # noqa: E402

import recstack  # noqa: E402

STAGES = ("embedding", "dense", "interaction", "sequence", "head", "other")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=sorted(MODELS))
    ap.add_argument("--batches", nargs="+", type=int, default=[64, 1024])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--op-iters", type=int, default=3)
    ap.add_argument("--out", default="out/bench_public_models.json")
    args = ap.parse_args()

    print(f"threads={torch.get_num_threads()}")
    print("| model | batch | step (ms) | " + " | ".join(STAGES) + " | other: ops | other: framework | caller code in stages | stage pass (95% CI) | handed down |")
    print("|---" * (len(STAGES) + 8) + "|")
    results = []
    for name in args.models:
        module, build, _ = MODELS[name]
        if importlib.util.find_spec(module) is None:
            print(f"| {name} | - | {module} is not installed |")
            continue
        for bs in args.batches:
            model, batch = build(batch=bs)
            prof = recstack.profile(model, batch, iters=args.iters, warmup=args.warmup, op_iters=args.op_iters,
                                    counters=False, run_info={"model": name})
            shares = prof.stage_shares()
            other = other_breakdown(prof)
            ov = prof.overhead
            handed = {k: len(v["handed_to"]) for k, v in prof.run["never_ran_roots"].items()}
            results.append({"model": name, "batch": bs, "step_s": prof.root.time_s, "shares": shares,
                            "other_breakdown": other, "never_ran_roots": prof.run["never_ran_roots"]})
            print(f"| {name} | {bs} | {prof.root.time_s * 1e3:.2f} | "
                  + " | ".join(f"{100 * shares.get(s, 0.0):.1f}%" for s in STAGES)
                  + f" | {100 * other['ops']:.1f}% | {100 * other['framework']:.1f}% | {caller_text(other['caller'])} | "
                  + f"{ov['stage_pass_ratio']:.3f} ({ov['stage_pass_ratio_ci'][0]:.3f}-{ov['stage_pass_ratio_ci'][1]:.3f}) | "
                  + (", ".join(f"{k} -> {n}" for k, n in handed.items()) or "-") + " |", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
