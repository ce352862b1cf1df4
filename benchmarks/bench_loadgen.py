"""The load generator's own cost: release lateness at a high rate, and its CPU use at 1,000 QPS.

1. 20,000 requests/s (Poisson) on one spin worker (0.02 ms per request): the
   release lateness (release time - scheduled arrival) p50/p99/max, from the
   run's HDR histogram. Open loop: requests arrive on schedule even when the
   worker falls behind (its backlog shows as queueing, not lateness).
2. 1,000 QPS on one spin worker of 0.1 ms per request (a trivial model): the
   dispatcher's CPU time (``time.process_time``) over the run's wall time, in
   cores; with the default lookahead and with ``--lookahead-ms 0`` (each batch
   handed over at its arrival).

Per run also the worker's side: its CPU time (``/proc/PID/stat`` utime + stime,
clock ticks) over the wall time, what of it was the spin model's own service
(busy time), and the spin before arrivals of batches it held early (the
workers report it per batch). A worker's CPU besides its service is what the
hand-off costs it: reading the batch, waking for its arrival, answering.

    PYTHONPATH=src python benchmarks/bench_loadgen.py [--duration 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from recstack.config.run import RunConfig
from recstack.serving.service import ServeOptions, build_plan, plan_sizes, pool_for, probe

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_of(pids: list[int]) -> float:
    """utime + stime of these processes, seconds (clock-tick resolution)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    return total * TICK_S


def measure(qps: float, duration: float, service_ms: float, workers: int, depth: int,
            lookahead_ms: float | None = None) -> dict:
    cfg = RunConfig(model="spin")
    extra = {} if lookahead_ms is None else {"lookahead_s": lookahead_ms / 1e3}
    opts = ServeOptions(qps=qps, duration_s=duration, workers=workers, query_size=1, max_batch=1,
                        service_ms=service_ms, depth=depth, grace_s=2.0, **extra)
    plan = build_plan(cfg, opts)
    with pool_for(cfg, opts, plan_sizes(plan)) as pool:
        pool.start()
        pids = pool.pids()
        c0, t0 = cpu_of(pids), time.perf_counter()
        out = probe(pool, plan, opts)
        out["worker_cpu_cores"] = (cpu_of(pids) - c0) / (time.perf_counter() - t0)
    return out


RUNS = (("schedule", None, 0.02, 64, None), ("1000 QPS trivial", 1000.0, 0.1, 2, None),
        ("1000 QPS trivial, lookahead 0", 1000.0, 0.1, 2, 0.0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=20_000.0)
    args = ap.parse_args()
    print(f"# load before: {os.getloadavg()}", file=sys.stderr)
    print("| run | offered QPS | achieved QPS | release lateness p50 / p99 / max | dispatcher CPU | "
          "worker CPU | of it service | of it spin to arrivals |")
    print("|---|---|---|---|---|---|---|---|")
    for name, qps, svc, depth, ahead in RUNS:
        r = measure(qps or args.rate, args.duration, svc, 1, depth, ahead)
        lat, lg = r["loadgen"]["dispatch_lateness_s"], r["loadgen"]
        print(f"| {name} | {r['offered_qps']:.0f} | {r['achieved_qps']:.0f} | {lat['p50'] * 1e3:.3f} / "
              f"{lat['p99'] * 1e3:.3f} / {lat['max'] * 1e3:.3f} ms | {lg['cpu_cores']:.1%} of a core | "
              f"{r['worker_cpu_cores']:.1%} | {r['utilisation']:.1%} | {lg['worker_spin_cores']:.1%} |", flush=True)
    print(f"# load after: {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
