"""The load generator's own cost: release lateness at a high rate, and its CPU use at 1,000 QPS.

1. 20,000 requests/s (Poisson) on spin workers (0.02 ms per request): the
   dispatcher's release lateness (release time - scheduled arrival) p50/p99/max,
   from its HDR histogram. Open loop: requests are released on schedule even
   when the workers fall behind (their backlog shows as queueing, not lateness).
2. 1,000 QPS on one spin worker of 0.1 ms per request (a trivial model): the
   dispatcher's CPU time (``time.process_time``) over the run's wall time, in cores.

    PYTHONPATH=src python benchmarks/bench_loadgen.py [--duration 5]
"""

from __future__ import annotations

import argparse
import os
import sys

from recstack.config.run import RunConfig
from recstack.serving.service import ServeOptions, build_plan, plan_sizes, pool_for, probe


def measure(qps: float, duration: float, service_ms: float, workers: int, depth: int) -> dict:
    cfg = RunConfig(model="spin")
    opts = ServeOptions(qps=qps, duration_s=duration, workers=workers, query_size=1, max_batch=1,
                        service_ms=service_ms, depth=depth, grace_s=2.0)
    plan = build_plan(cfg, opts)
    with pool_for(cfg, opts, plan_sizes(plan)) as pool:
        pool.start()
        return probe(pool, plan, opts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=20_000.0)
    args = ap.parse_args()
    print(f"# load before: {os.getloadavg()}", file=sys.stderr)
    print("| run | offered QPS | achieved QPS | release lateness p50 / p99 / max | load generator CPU |")
    print("|---|---|---|---|---|")
    for name, qps, svc, workers, depth in (("schedule", args.rate, 0.02, 1, 64), ("1000 QPS trivial", 1000.0, 0.1, 1, 1)):
        r = measure(qps, args.duration, svc, workers, depth)
        lat = r["loadgen"]["dispatch_lateness_s"]
        print(f"| {name} | {r['offered_qps']:.0f} | {r['achieved_qps']:.0f} | {lat['p50'] * 1e3:.3f} / "
              f"{lat['p99'] * 1e3:.3f} / {lat['max'] * 1e3:.3f} ms | {r['loadgen']['cpu_cores']:.1%} of a core |",
              flush=True)
    print(f"# load after: {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
