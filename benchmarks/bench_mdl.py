"""The serving simulator against queueing theory: M/D/1 and M/D/2 mean waiting times.

The spin model (every batch busy-waits D) with fixed query size 1 and Poisson
arrivals is an M/D/c queue with c = workers. The measured mean queueing time
(first batch start - scheduled arrival) is compared with

* M/D/1 (Pollaczek-Khinchine, exact): Wq = rho / (2 mu (1 - rho)), mu = 1 / D;
* M/D/c, c > 1: Cosmetatos' approximation (1975),
  Wq(M/D/c) ~= 1/2 Wq(M/M/c) [1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c)],
  Wq(M/M/c) from Erlang C (exact for M/M/c; the approximation is within ~1-2%
  of the exact M/D/c for these loads).

rho = lambda D / c. The measured queueing time includes the dispatcher's
release lateness and hand-off (a batch's service starts when it is handed over
to a free worker; the spin worker's wake-up and messages are inside its D, see
recstack.serving.worker). With one worker the default depth 2 lets the next
batch wait in the worker's pipe: still one FIFO queue served in order, so the
exact M/D/1 system, without a completion + hand-off round trip per queued
batch; c > 1 runs depth 1 (one central queue: M/D/c), where that round trip
lengthens every queued batch's effective service. Two diagnostics per row:
S mean, the measured mean service time per batch, and two replays (c = 1
only): the mean wait of an ideal FIFO single server given the same arrivals
(Lindley: start_k = max(arrival_k, end_{k-1})), with service D ("ideal D":
the sample path's own M/D/1 wait: measured against it, the result is free of
the sampling noise that short runs have against the formula) and with the measured
service times S_k ("ideal S"). Measured Wq minus ideal S is the dispatcher's
own bias (release lateness, hand-off gaps), whatever the host did to the
service times; ideal S against ideal D shows service times stretched by a
busy host.

    PYTHONPATH=src python benchmarks/bench_mdl.py [--service-ms 1] [--requests-at-09 100000] [--depth 2]
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

from recstack.config.run import RunConfig
from recstack.serving.service import ServeOptions, build_plan, plan_sizes, pool_for, probe

# Requests per rho as a share of --requests-at-09: one Poisson sample path's mean wait is itself noisy
# (its spread per rho and size is in docs/benchmarks.md), so the lower loads get half and 60% of them.
SHARE_OF_REQUESTS = {0.5: 0.5, 0.7: 0.6, 0.9: 1.0}


def erlang_c(c: int, a: float) -> float:
    """P(wait) in M/M/c with offered load a = lambda / mu (Erlang C)."""
    rho = a / c
    top = a**c / math.factorial(c) / (1 - rho)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def wq_theory(c: int, rho: float, mu: float) -> tuple[float, str]:
    if c == 1:
        return rho / (2 * mu * (1 - rho)), "M/D/1 exact"
    a = rho * c
    wq_mmc = erlang_c(c, a) / (c * mu - a * mu)
    corr = 1 + (1 - rho) * (c - 1) * (math.sqrt(4 + 5 * c) - 2) / (16 * rho * c)
    return 0.5 * wq_mmc * corr, "M/D/c Cosmetatos"


def lindley_wait(arrivals: np.ndarray, service: np.ndarray) -> float:
    """Mean wait of a FIFO single server with these arrivals and service times (Lindley's recursion)."""
    free, total = -math.inf, 0.0
    for a, d in zip(arrivals.tolist(), service.tolist(), strict=True):
        start = max(a, free)
        total += start - a
        free = start + d
    return total / max(len(arrivals), 1)


def run(c: int, rho: float, service_ms: float, requests: int, depth: int, seed: int) -> dict:
    mu = 1e3 / service_ms
    qps = rho * c * mu
    cfg = RunConfig(model="spin", seed=seed)
    opts = ServeOptions(qps=qps, duration_s=requests / qps, workers=c, query_size=1, max_batch=1,
                        service_ms=service_ms, depth=depth, grace_s=5.0)
    plan = build_plan(cfg, opts)
    runs = []
    with pool_for(cfg, opts, plan_sizes(plan)) as pool:
        pool.start()
        out = probe(pool, plan, opts, on_run=runs.append)
    theory, how = wq_theory(c, rho, mu)
    rec = runs[0]
    s = rec.t_end - rec.t_start
    done = np.isfinite(s)
    replay = lindley_wait(plan.arrivals[done], s[done]) if c == 1 else math.nan
    ideal = lindley_wait(plan.arrivals[done], np.full(int(done.sum()), 1 / mu)) if c == 1 else math.nan
    s = s[done]
    return {"c": c, "rho": rho, "qps": qps, "requests": out["requests"], "wq": out["queue_s_mean"],
            "theory": theory, "how": how, "util": out["utilisation"], "handoff": out["handoff_s_mean"],
            "s_mean": float(s.mean()), "replay": replay, "ideal": ideal, "depth": depth,
            "late": out["late"], "contended": bool((out.get("contention") or {}).get("detected"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--service-ms", type=float, default=1.0)
    ap.add_argument("--requests-at-09", type=int, default=100_000, help="requests at rho 0.9 (fewer at lower rho)")
    ap.add_argument("--depth", type=int, default=2, help="c = 1 only (c > 1 runs depth 1)")
    ap.add_argument("--workers", default="1,2", help="c values, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"# M/D/c, D = {args.service_ms} ms, depth {args.depth}, load {os.getloadavg()}", file=sys.stderr)
    print("| c | depth | rho | QPS | requests | Wq measured | Wq theory | error | Wq ideal D | S mean | Wq ideal S | "
          "bias (measured - ideal S) | utilisation | hand-off | theory |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in (int(x) for x in args.workers.split(",")):
        for rho in (0.5, 0.7, 0.9):
            n = int(args.requests_at_09 * SHARE_OF_REQUESTS[rho])
            r = run(c, rho, args.service_ms, n, args.depth if c == 1 else 1, args.seed)
            err = (r["wq"] - r["theory"]) / r["theory"]
            ideal, replay = ("-" if math.isnan(r[k]) else f"{r[k] * 1e3:.3f} ms" for k in ("ideal", "replay"))
            bias = "-" if math.isnan(r["replay"]) else f"{(r['wq'] - r['replay']) * 1e6:+.0f} us"
            print(f"| {c} | {r['depth']} | {rho} | {r['qps']:.0f} | {r['requests']} | {r['wq'] * 1e3:.3f} ms | "
                  f"{r['theory'] * 1e3:.3f} ms | {err:+.1%} | {ideal} | {r['s_mean'] * 1e3:.4f} ms | {replay} | {bias} | "
                  f"{r['util']:.3f} | {r['handoff'] * 1e6:.0f} us | "
                  f"{r['how']}{' (contended)' if r['contended'] else ''} |", flush=True)
    print(f"# load after: {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
