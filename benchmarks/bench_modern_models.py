"""Stage shares of zoo models at batch 64 and 1024, inference and training (issue 18), and their profiles.

Profiles each model (torch backend, --scale, the uniform workload) against a machine file measured once
(quick mode) so that every stage has its bound class and fraction of roof; writes each profile to
--out/<model>-<mode>-<batch>.json (the input of `recstack correlate`) and prints one markdown row per
profile: the share of the step of each stage. A run the memory preflight refuses (RECSTACK_MEMORY_LIMIT,
default 4 GiB here: this host is shared) is printed as refused with the preflight's reason.

    python benchmarks/bench_modern_models.py --models dlrmv2 deepfm twotower bst hstu --out /tmp/sweep
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import recstack
from recstack.errors import MemoryPreflightError

STAGES = ("feature_processing", "embedding", "dense", "interaction", "sequence", "head", "loss", "backward",
          "optimizer", "other")


def machine_file(out: Path) -> Path:
    from recstack.hardware.machine import measure_machine

    path = out / "machine.json"
    if not path.exists():
        path.write_text(json.dumps(measure_machine(quick=True)))
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["dlrmv2", "deepfm", "twotower", "bst", "hstu"])
    ap.add_argument("--batches", nargs="+", type=int, default=[64, 1024])
    ap.add_argument("--modes", nargs="+", default=["inference", "train"])
    ap.add_argument("--scale", type=float, default=0.01)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("out/modern"))
    args = ap.parse_args()
    os.environ.setdefault("RECSTACK_MEMORY_LIMIT", str(4 * 2**30))
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_file(args.out)
    print(f"load: {os.getloadavg()}")
    print("| model | mode | batch | " + " | ".join(STAGES) + " | samples/s |")
    print("|---|---|---|" + "---|" * (len(STAGES) + 1))
    for model in args.models:
        for mode in args.modes:
            for batch in args.batches:
                t0 = time.perf_counter()
                try:
                    p = recstack.profile_zoo(model, scale=args.scale, batch_size=batch, mode=mode, iters=args.iters,
                                             warmup=2, op_iters=1, machine=str(machine), counters=False)
                except MemoryPreflightError as exc:
                    print(f"| {model} | {mode} | {batch} | refused by the preflight: {exc} |", flush=True)
                    continue
                p.save(args.out / f"{model}-{mode}-{batch}.json")
                sh = p.stage_shares()
                cells = " | ".join(f"{100 * sh[s]:.1f}%" if s in sh else "-" for s in STAGES)
                tput = p.root.extra.get("throughput_samples_per_s") or 0.0
                print(f"| {model} | {mode} | {batch} | {cells} | {tput:,.0f} |  <!-- {time.perf_counter() - t0:.0f} s -->",
                      flush=True)
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
