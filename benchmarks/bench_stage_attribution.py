"""Where the model's own code goes, and what the stage pass costs, on the stage reference set (issue 28).

For every model of tests/_reference_models.py (deepctr-torch, torch-rechub, pytorch-fm, TorchRec), at each
batch size, plus the 52-table deepctr DeepFM of tests/_public_models.py (the model with the most stage
boundaries per step), one profile (inference) and one overhead measurement, printed as one markdown row:

* **other + misplaced, before**: what the profile would show without dataflow attribution of the model's own
  code: ``other`` plus the caller code whose ops belong to another stage (the ``[model code]`` nodes, which
  were charged to the next stage's ``[caller code]`` or to ``other``), as a share of the run;
* **after**: ``other`` as the profile now shows it (every op of the model's own code with a stage is in it);
* **moved**: the ``[model code]`` nodes, per stage; **own caller code**: what stays caller code of the stage
  it prepares;
* **stage pass**: the timing pass's stage-pass step over the plain step, interleaved in this process (A B A
  B, the stage wrappers installed around each B step exactly as the timing pass's timed steps), each step timed in
  this process's CPU time (``time.process_time_ns``: a busy host's preemption is not in it); the median of
  ``--pairs`` per-pair ratios in each of ``--repeats`` repeats: the median of the repeats, and their range;
  **wall** is the profile's own ``overhead.stage_pass_ratio`` (wall clock, for comparison).

    python benchmarks/bench_stage_attribution.py                 # batches 64 and 1024, about 3 minutes quiet
    python benchmarks/bench_stage_attribution.py --batches 8 --pairs 40 --repeats 2 --models torchfm.DeepFM
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import _reference_models  # noqa: E402
from _public_models import MODELS  # noqa: E402

import recstack  # noqa: E402
from recstack.calls import call_model  # noqa: E402
from recstack.profiling.modelcode import MODEL_CODE  # noqa: E402
from recstack.profiling.passes import warm_up_and_discover  # noqa: E402
from recstack.profiling.runner import ProfileOptions, Step  # noqa: E402
from recstack.profiling.timing import CALLER, StageTimer, install_stage_hooks  # noqa: E402

LIBS = {"deepctr": "deepctr_torch", "rechub": "torch_rechub", "torchfm": "torchfm", "torchrec": "torchrec"}
MANY_TABLES = "public.deepctr-deepfm-52"


def build(name: str, batch: int) -> tuple[torch.nn.Module, Any]:
    """The model and one batch (the reference builders read the module's batch size ``B``)."""
    if name == MANY_TABLES:
        model, make = MODELS["deepctr-deepfm"][1](batch=batch, tables=52)
        return model, make(0)
    _reference_models.B = batch
    return _reference_models.BUILDERS[name]()


def attribution(prof: Any) -> dict[str, Any]:
    run = prof.root.time_s
    other = next((s.time_s for s in prof.root.children if s.name == "other"), 0.0)
    moved = {s.name: c.time_s for s in prof.root.children for c in s.children if c.name == MODEL_CODE}
    caller = sum(c.time_s for s in prof.root.children for c in s.children if c.name == CALLER)
    return {"run_s": run, "other": other / run, "before": (other + sum(moved.values())) / run,
            "moved": {k: v / run for k, v in moved.items()}, "own_caller": caller / run}


def overhead(model: torch.nn.Module, batch: Any, pairs: int, repeats: int) -> dict[str, Any]:
    """Interleaved plain / stage-pass steps in CPU time: per repeat the median per-pair ratio."""
    step = Step(model, ProfileOptions(mode="inference"), None)
    found = warm_up_and_discover(model, step, [batch], 3, None, forward=lambda b: call_model(model, b))
    roots, regions = found.roots, found.regions(None)
    timer, clock = StageTimer(None, rusage=False), time.process_time_ns  # as in the timed steps
    medians = []
    for _ in range(repeats):
        ratios = []
        for _ in range(pairs):
            t0 = clock()
            step.run(batch)
            plain = clock() - t0
            undo = regions.install(model, timer.enter_unmarked, timer.exit_unmarked) if regions else None
            wrappers = install_stage_hooks(model, roots, timer)
            timer.reset()
            timer.start()
            t0 = clock()  # the timing pass's step: from start() to stop(), as there
            step.run(batch)
            timed = clock() - t0
            timer.stop()
            wrappers.remove()
            if undo is not None:
                undo()
            if plain > 0:
                ratios.append(timed / plain)
        medians.append(statistics.median(ratios))
    return {"ratio": statistics.median(medians), "range": [min(medians), max(medians)], "roots": len(roots)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=[*_reference_models.BUILDERS, MANY_TABLES])
    ap.add_argument("--batches", nargs="+", type=int, default=[64, 1024])
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--op-iters", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="out/bench_stage_attribution.json")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(args.threads)
    print(f"threads={args.threads} pairs={args.pairs} repeats={args.repeats}")
    print("| model | batch | step (ms) | other + misplaced, before | after (other) | moved to [model code] | "
          "own caller code | stage roots | stage pass, CPU (range) | wall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in args.models:
        lib = "deepctr_torch" if name == MANY_TABLES else LIBS[name.split(".")[0]]
        if importlib.util.find_spec(lib) is None:
            print(f"| {name} | - | {lib} is not installed |")
            continue
        for bs in args.batches:
            model, batch = build(name, bs)
            prof = recstack.profile(model, lambda _i, b=batch: b, mode="inference", iters=args.iters, warmup=2,
                                    op_iters=args.op_iters, num_batches=1, counters=False, cost_model=False,
                                    threads=args.threads)
            att = attribution(prof)
            ov = overhead(model, batch, args.pairs, args.repeats)
            rows.append({"model": name, "batch": bs, **att, "overhead": ov,
                         "wall_ratio": prof.overhead["stage_pass_ratio"]})
            moved = ", ".join(f"{k} {100 * v:.1f}%" for k, v in att["moved"].items()) or "-"
            print(f"| {name} | {bs} | {att['run_s'] * 1e3:.2f} | {100 * att['before']:.1f}% | {100 * att['other']:.1f}% "
                  f"| {moved} | {100 * att['own_caller']:.1f}% | {ov['roots']} | {ov['ratio']:.3f} "
                  f"({ov['range'][0]:.3f}-{ov['range'][1]:.3f}) | {prof.overhead['stage_pass_ratio']:.3f} |",
                  flush=True)
    worst = max(rows, key=lambda r: r["other"], default=None)
    if worst is not None:
        print(f"\nafter: other <= {100 * worst['other']:.1f}% ({worst['model']} at {worst['batch']}); before: up to "
              f"{100 * max(r['before'] for r in rows):.1f}%; stage pass (CPU) <= "
              f"{max(r['overhead']['ratio'] for r in rows):.3f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
