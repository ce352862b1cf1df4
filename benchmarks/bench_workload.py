"""Batch-generation speed of the workload generator for the DLRM-RMC2 input shape.

RMC2 (MODELS.md): 32 pooled features, id_range 500,000, 120 lookups each per sample,
plus 256 dense features. At batch 1024 that is 3,932,160 IDs per batch. For each
preset (default: uniform and production) this binds the shape, generates a few
warm-up batches, then times ``--batches`` batches (each a new index: fresh random
streams and fresh output tensors) and prints ms per batch (median, min) and IDs/s.
A later step compares these figures with the model's forward pass.

    python benchmarks/bench_workload.py [--batch-size 1024] [--batches 20] [--presets uniform,production]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from recstack.workload import FeatureRequest, bind, load_workload

RMC2_FEATURES = 32
RMC2_ROWS = 500_000
RMC2_POOLING = 120
RMC2_DENSE = 256


def rmc2_features() -> list[FeatureRequest]:
    return [
        FeatureRequest(f"sparse_{i}", id_range=RMC2_ROWS, pooling=float(RMC2_POOLING))
        for i in range(RMC2_FEATURES)
    ]


def bench(preset: str, batch_size: int, batches: int, warmup: int) -> dict[str, float | str | int]:
    bound = bind(load_workload(preset), rmc2_features(), num_dense=RMC2_DENSE)
    for i in range(warmup):
        bound.batch(batch_size, index=10_000 + i)
    times, cpu, ids = [], [], 0
    for i in range(batches):
        t0, c0 = time.perf_counter(), time.process_time()
        b = bound.batch(batch_size, index=i)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        ids = b.num_ids()
        del b
    med = statistics.median(times)
    return {
        "preset": preset,
        "batch_size": batch_size,
        "ids_per_batch": ids,
        "ms_median": round(med * 1e3, 2),
        "ms_min": round(min(times) * 1e3, 2),
        "cpu_ms_median": round(statistics.median(cpu) * 1e3, 2),
        "ids_per_s": round(ids / med),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--presets", default="uniform,production")
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    args = ap.parse_args(argv)
    rows = [bench(p, args.batch_size, args.batches, args.warmup) for p in args.presets.split(",") if p]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"RMC2 shape: {RMC2_FEATURES} features x {RMC2_POOLING} lookups, id_range {RMC2_ROWS:,}, {RMC2_DENSE} dense"
    )
    print(
        f"{'preset':<12} {'batch':>6} {'IDs/batch':>11} {'ms/batch (median)':>18} {'min':>8} {'cpu ms':>8} {'IDs/s':>14}"
    )
    for r in rows:
        print(
            f"{r['preset']:<12} {r['batch_size']:>6} {r['ids_per_batch']:>11,} {r['ms_median']:>18.1f} "
            f"{r['ms_min']:>8.1f} {r['cpu_ms_median']:>8.1f} {r['ids_per_s']:>14,}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
