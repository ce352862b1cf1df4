"""How close do the embedding and dense stages get to this machine's measured roofs?

Given profiles of RMC1 and RMC2 (their *embedding* stage) and RMC3 (its
*dense* stage), prints the fraction of the measured random-gather bandwidth
the embedding stages reach and the fraction of peak GEMM FLOP/s RMC3's
dense stage reaches. All figures come from
:func:`recstack.analysis.roofline.classify`; this script only selects and
prints them.

    # from saved profiles (recstack profile rmc1 ... -o rmc1.json)
    python benchmarks/bench_roofline.py --rmc1 rmc1.json --rmc2 rmc2.json --rmc3 rmc3.json [--machine m.json]
    # or profile the three models now, at a scale that fits this host
    python benchmarks/bench_roofline.py --scale 0.05 --batch-size 1024 [--save-dir out/]

The machine figures are this host's cache (measured ``--quick`` when absent)
unless ``--machine`` names a file.

``--same-data`` also builds RMC1 and RMC2 (torch backend, the profiles'
scale, workload, batch size and seed) and times, in interleaved rounds,
recstack's gather kernel and ``aten::embedding_bag`` on the stage's own
tables and indices, table by table as the stage calls them: the bandwidth
recstack's kernel reaches on exactly this access pattern (no footprint
modelling), the ratio of the two in one run, and the profiled stage's
fraction of the kernel's figure. Stage fractions need the cost model's
``flops``/``bytes`` on the stage nodes; where they are null the line says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from recstack.analysis.pipeline import analyse
from recstack.errors import RecstackError
from recstack.tree import Node, Profile
from recstack.units import binary

MODELS = {"rmc1": "embedding", "rmc2": "embedding", "rmc3": "dense"}


def _gb(v: float) -> str:
    return f"{v / 1e9:.2f} GB/s"


def stage_line(model: str, stage: Node | None, kind: str) -> str:
    """One result line for a classified stage node (``kind``: embedding or dense)."""
    if stage is None:
        return f"{model.upper()} {kind} stage: not in the profile"
    r = stage.extra.get("roofline") or {}
    bound = stage.extra.get("bound")
    if r.get("achieved_bytes_per_s") is None:
        return f"{model.upper()} {kind} stage: n/a ({stage.extra.get('bound_reason')})"
    if kind == "embedding":
        g = r.get("gather") or {}
        frac = (
            r["memory_fraction_unique"]
            if stage.extra.get("bound_basis") == "unique bytes"
            else r["memory_fraction_requested"]
        )
        uniq = r.get("memory_fraction_unique")
        roof = f"{_gb(r['roof_bytes_per_s'])} {r['roof']} roof"
        if g:
            roof += f" at {g['row_bytes']:.0f} B rows, {binary(g['table_bytes'])} tables (rows: {g['row_source']}; tables: {g['table_source']})"
            if g.get("footprint_bytes", g["table_bytes"]) > g["table_bytes"]:
                roof += (
                    f", {binary(g['footprint_bytes'])} read in turn (one-table roof "
                    f"{_gb(g.get('one_table_bytes_per_s') or 0.0)})"
                )
        return (
            f"{model.upper()} embedding stage: {_gb(r['achieved_bytes_per_s'])} requested = {frac:.1%} of measured "
            f"gather bandwidth on {stage.extra.get('bound_basis')} "
            f"[requested {r['memory_fraction_requested']:.1%}"
            + (f", unique {uniq:.1%}" if uniq is not None else "")
            + f"]; {roof}; bound: {bound}"
        )
    return (
        f"{model.upper()} dense stage: {r['achieved_flops'] / 1e9:.2f} GFLOP/s = {r['compute_fraction']:.1%} of "
        f"GEMM peak ({r['peak_flops'] / 1e9:.1f} GFLOP/s); intensity {r['intensity']:.1f} FLOP/B; bound: {bound}"
    )


def report(profiles: dict[str, Profile], machine: dict[str, Any]) -> list[str]:
    """Classify each profile against ``machine`` and return the result lines."""
    lines = []
    for model, prof in profiles.items():
        analyse(prof, machine, steps=["roofline"])
        m = prof.extra["machine"]
        lines.append(
            f"# {model}: {m['device']}, {m['threads']} thread(s), {m['dtype']}; machine {m['host']} ({m['mode']}, "
            f"measured {m['measured_at']})"
        )
        lines.append(stage_line(model, prof.stage(MODELS[model]), MODELS[model]))
    return lines


def same_data(model: str, prof: Profile, rounds: int = 7) -> list[str]:
    """Time recstack's kernel and embedding_bag on ``model``'s own tables and a profile-like batch."""
    import time

    import numpy as np
    import torch

    from recstack.hardware import gather_kernel
    from recstack.workload import bind, load_workload
    from recstack.zoo import BuildOptions, build_model

    run = prof.run or {}
    batch_size = int(run.get("batch_size") or 1024)
    seed = int(run.get("seed") or 0)
    net = build_model(
        model, scale=float(run.get("scale") or 1.0), options=BuildOptions(batch_size=batch_size, seed=seed)
    )
    bound = bind(load_workload(str(run.get("workload") or "uniform")), net.features(), net.num_dense, net.num_tasks)
    processed = net.feature_processing(bound.batch(batch_size, 0))
    weights = net.sparse_arch.table_weights()
    calls = []
    for name, (ids, offsets) in processed.inputs.items():
        w = weights[name]
        full = torch.cat([offsets, torch.tensor([ids.numel()], dtype=offsets.dtype)]).to(torch.int64)
        out = torch.empty(offsets.numel(), w.shape[1])
        calls.append((w, ids.to(torch.int64), offsets, full, out))
    nbytes = sum(ids.numel() * w.shape[1] * w.elementbinary() for w, ids, *_ in calls)
    threads = int(run.get("threads") or torch.get_num_threads())
    torch.set_num_threads(threads)

    def native() -> None:
        for w, ids, _off, full, out in calls:
            gather_kernel.gather_sum(w, ids, full, out, threads=threads)

    def aten() -> None:
        for w, ids, off, _full, _out in calls:
            torch.nn.functional.embedding_bag(ids, w, off, mode="sum")

    rates: dict[str, list[float]] = {"native": [], "embedding_bag": []}
    for fn in (native, aten):
        fn()  # warm
    for _ in range(rounds):
        for key, fn in (("native", native), ("embedding_bag", aten)):
            t0 = time.perf_counter()
            fn()
            rates[key].append(nbytes / (time.perf_counter() - t0))
    calls.clear()
    del net, weights
    best = {k: max(v) for k, v in rates.items()}
    stage = prof.stage("embedding")
    r = (stage.extra.get("roofline") or {}) if stage is not None else {}
    line = (
        f"{model.upper()} same data ({len(processed.inputs)} tables, {nbytes / 1e6:.1f} MB requested per step, "
        f"{threads} thread(s), {rounds} rounds): recstack kernel {best['native'] / 1e9:.2f} GB/s "
        f"(median {float(np.median(rates['native'])) / 1e9:.2f}), embedding_bag {best['embedding_bag'] / 1e9:.2f} GB/s "
        f"(median {float(np.median(rates['embedding_bag'])) / 1e9:.2f}); embedding_bag / kernel {best['embedding_bag'] / best['native']:.2f}"
    )
    if r.get("achieved_bytes_per_s"):
        line += f"; profiled stage = {r['achieved_bytes_per_s'] / best['native']:.1%} of the kernel on its own data"
    return [line]


def _profile_now(model: str, args: argparse.Namespace) -> Profile:
    """Profile a zoo model on a workload preset now; attach the cost model's figures if the profiler did not."""
    import torch

    import recstack
    from recstack.profiling.runner import call_model
    from recstack.workload import bind, load_workload
    from recstack.zoo import BuildOptions, build_model

    net = build_model(model, scale=args.scale, options=BuildOptions(batch_size=args.batch_size, seed=0))
    bound = bind(load_workload(args.workload), net.features(), net.num_dense, net.num_tasks)
    info = {
        "model": net.cfg.name,
        "scale": net.cfg.scale,
        "workload": args.workload,
        "table_dtype": "fp32",
        "model_config": net.cfg.model_dump(),
    }
    prof = recstack.profile(
        net,
        bound,
        batch_size=args.batch_size,
        iters=args.iters,
        warmup=args.warmup,
        threads=args.threads,
        run_info=info,
    )
    if prof.stage(MODELS[model]) is not None and prof.stage(MODELS[model]).flops is None:
        from recstack.costmodel import CostCounter, attach_costs

        batch = bound.batch(args.batch_size, 0)
        net.eval()
        with torch.inference_mode(), CostCounter(net) as counter:
            call_model(net, batch)
        attach_costs(prof.root, counter.counts, steps=1)
    return prof


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for m in MODELS:
        ap.add_argument(f"--{m}", type=Path, default=None, help=f"saved {m.upper()} profile JSON")
    ap.add_argument("--machine", type=Path, default=None, help="machine JSON (default: this host's cache)")
    ap.add_argument("--scale", type=float, default=0.01, help="table scale when profiling now (default 0.01)")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--workload", default="uniform")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--save-dir", type=Path, default=None, help="write the classified profiles here")
    ap.add_argument(
        "--same-data",
        action="store_true",
        help="also time recstack's kernel and embedding_bag on RMC1/RMC2's own tables and indices",
    )
    args = ap.parse_args(argv)
    try:
        from recstack.hardware.machine import get_machine, load_machine

        machine = load_machine(args.machine) if args.machine else get_machine(quick=True)
        profiles = {}
        for m in MODELS:
            path = getattr(args, m)
            profiles[m] = Profile.load(path) if path else _profile_now(m, args)
        for line in report(profiles, machine):
            print(line)
        if args.same_data:
            for m in ("rmc1", "rmc2"):
                for line in same_data(m, profiles[m]):
                    print(line, flush=True)
        if args.save_dir:
            for m, prof in profiles.items():
                prof.save(args.save_dir / f"{m}.roofline.json")
    except RecstackError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
