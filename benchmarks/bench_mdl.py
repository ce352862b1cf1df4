"""The serving simulator against queueing theory: M/D/1 and M/D/2 mean waiting times.

The spin model (every batch busy-waits D) with fixed query size 1 and Poisson
arrivals is an M/D/c queue with c = workers. The measured mean queueing time
(first batch start - scheduled arrival) is compared with

* M/D/1 (Pollaczek-Khinchine, exact): Wq = rho / (2 mu (1 - rho)), mu = 1 / D;
* M/D/c, c > 1: Cosmetatos' approximation (1975),
  Wq(M/D/c) ~= 1/2 Wq(M/M/c) [1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c)],
  Wq(M/M/c) from Erlang C (exact for M/M/c; the approximation is within ~1-2%
  of the exact M/D/c for these loads).

rho = lambda D / c. Every run (one per rho and seed) draws its arrivals from
its own seed, taken from ``numpy.random.SeedSequence(--seed)``: with one seed
for all rows, Poisson arrivals at any rate are the same unit-rate sequence
scaled by 1 / lambda, so the rows shared one sample path's luck (all +3-5%
above theory in the 10^5 quiet run) instead of showing independent errors.

The measured queueing time includes the release lateness and hand-off. With
one worker the dispatcher hands every batch to the worker's pipe up to the
lookahead (20 ms) before it is due (the pipe is the one FIFO queue, whatever
the depth: the exact M/D/1 system), and the worker starts it at its arrival
(an idle worker sleeps, then spins, to it) or at its predecessor's end, so
neither a late dispatcher nor a completion round trip enters the wait; what
does is the idle worker's wake-up lateness ("idle start delay" below). c > 1
runs depth 1 (one central queue: M/D/c): a batch not yet due goes early only
to an idle worker, a due one waits for a completion + hand-off round trip,
which lengthens every queued batch's effective service.

Per run, the same arrivals are replayed through an ideal FIFO c-server queue
(each arrival in order to the earliest free server; Lindley's recursion for
c = 1) with service D ("ideal D": the sample path's own wait) and, for c = 1,
with the measured service times S_k ("ideal S"). Estimates of Wq:

* raw: the measured mean wait W;
* control variate: W_cv = W - (W_idealD - Wq_theory). W and W_idealD share the
  arrival sequence, so their sampling errors are strongly correlated; W_cv
  removes the path's luck (a control variate with known mean Wq_theory and
  coefficient 1) and leaves the dispatcher's and host's own effect on top of
  theory. For c > 1 it carries Cosmetatos' approximation error too.

The mechanism columns (c = 1): "bias" = W - W_idealS (what the dispatcher adds,
whatever the host did to the service times), split into "idle" = the mean delay
between the scheduled arrival and the service start of batches that found the
worker idle (the worker's wake-up lateness, or the dispatcher's where a batch
was handed over late) and "busy gaps" = the share of batches queued behind a
busy worker that did not start at their predecessor's end (their hand-over
came after it), with the total of those gaps.

    PYTHONPATH=src python benchmarks/bench_mdl.py [--service-ms 2] [--requests-at-09 60000] [--seeds 2] [--workers 1] [--depth 64]
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import sys

import numpy as np

from recstack.config.run import RunConfig
from recstack.serving.service import ServeOptions, build_plan, plan_sizes, pool_for, probe

# Requests per rho as a share of --requests-at-09: one Poisson sample path's mean wait is itself noisy
# (its spread per rho and size is in benchmarks/LOG.md), so the lower loads get half and 60% of them.
SHARE_OF_REQUESTS = {0.5: 0.5, 0.7: 0.6, 0.9: 1.0}
RHOS = tuple(SHARE_OF_REQUESTS)


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


def fifo_wait(arrivals: np.ndarray, service: np.ndarray, c: int = 1) -> float:
    """Mean wait of a FIFO queue with ``c`` servers, these arrivals and service times (each arrival, in order,
    to the earliest free server; Lindley's recursion for c = 1)."""
    free = [-math.inf] * c
    total = 0.0
    for a, d in zip(arrivals.tolist(), service.tolist(), strict=True):
        start = max(a, free[0])
        total += start - a
        heapq.heapreplace(free, start + d)
    return total / max(len(arrivals), 1)


def mechanism(arrivals: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict:
    """c = 1: delay of batches that found the worker idle, and gaps inside busy periods (see the docstring)."""
    prev_end = np.concatenate([[-math.inf], end[:-1]])
    idle = arrivals >= prev_end
    gap = start - np.maximum(arrivals, prev_end)
    busy_gap = gap[~idle]
    return {"idle_delay": float(gap[idle].mean()) if idle.any() else math.nan,
            "busy_gap_share": float(np.mean(busy_gap > 1e-6)) if busy_gap.size else 0.0,
            "busy_gap_sum": float(busy_gap[busy_gap > 1e-6].sum())}


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
    arr = plan.arrivals[done]
    ideal = fifo_wait(arr, np.full(arr.size, 1 / mu), c)
    replay = fifo_wait(arr, s[done]) if c == 1 else math.nan
    mech = mechanism(arr, rec.t_start[done], rec.t_end[done]) if c == 1 else {}
    wq = out["queue_s_mean"]
    return {"c": c, "rho": rho, "qps": qps, "seed": seed, "requests": out["requests"], "wq": wq,
            "cv": wq - (ideal - theory), "theory": theory, "how": how, "util": out["utilisation"],
            "s_mean": float(s[done].mean()), "replay": replay, "ideal": ideal, "depth": depth, **mech,
            "late": out["late"], "contended": bool((out.get("contention") or {}).get("detected"))}


def _ms(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 1e3:.3f} ms"


def row(r: dict) -> str:
    th = r["theory"]
    bias = "-" if math.isnan(r["replay"]) else f"{(r['wq'] - r['replay']) * 1e6:+.0f} us"
    idle = f"{r['idle_delay'] * 1e6:.1f} us" if "idle_delay" in r else "-"
    gaps = (f"{r['busy_gap_share']:.2%}, {r['busy_gap_sum'] * 1e3:.1f} ms" if "busy_gap_share" in r else "-")
    return (f"| {r['c']} | {r['depth']} | {r['rho']} | {r['seed']} | {r['requests']} | {_ms(r['wq'])} | {_ms(th)} | "
            f"{(r['wq'] - th) / th:+.1%} | {_ms(r['ideal'])} ({(r['ideal'] - th) / th:+.1%}) | {_ms(r['cv'])} | "
            f"{(r['cv'] - th) / th:+.1%} | {r['s_mean'] * 1e3:.4f} ms | {_ms(r['replay'])} | {bias} | {idle} | {gaps} | "
            f"{r['util']:.3f} | {r['how']}{' (contended)' if r['contended'] else ''} |")


def summary_row(rs: list[dict]) -> str:
    """Per (c, rho): the mean over seeds of each estimate's error, and the seeds' spread (sd) of it."""
    th = rs[0]["theory"]
    raw = np.array([(r["wq"] - th) / th for r in rs])
    cv = np.array([(r["cv"] - th) / th for r in rs])
    sd = (lambda x: f" (sd {x.std(ddof=1):.1%})") if len(rs) > 1 else (lambda _x: "")
    return (f"| {rs[0]['c']} | {rs[0]['rho']} | {len(rs)} | {sum(r['requests'] for r in rs)} | "
            f"{raw.mean():+.1%}{sd(raw)} | {cv.mean():+.1%}{sd(cv)} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--service-ms", type=float, default=2.0)
    ap.add_argument("--requests-at-09", type=int, default=60_000, help="requests per run at rho 0.9 (fewer at lower rho)")
    ap.add_argument("--seeds", type=int, default=2, help="independent runs (arrival seeds) per rho")
    ap.add_argument("--depth", type=int, default=64, help="c = 1 only (c > 1 runs depth 1)")
    ap.add_argument("--workers", default="1", help="c values, comma-separated (c = 2 needs more than 2 cores)")
    ap.add_argument("--seed", type=int, default=0, help="root of the per-run seeds (numpy SeedSequence)")
    args = ap.parse_args()
    cs = [int(x) for x in args.workers.split(",")]
    seeds = iter(np.random.SeedSequence(args.seed).generate_state(len(cs) * len(RHOS) * args.seeds).tolist())
    print(f"# M/D/c, D = {args.service_ms} ms, depth {args.depth}, {args.seeds} seeds per rho, "
          f"load {os.getloadavg()}", file=sys.stderr)
    print("| c | depth | rho | seed | requests | Wq measured | Wq theory | error | Wq ideal D | Wq control variate | "
          "error (cv) | S mean | Wq ideal S | bias (measured - ideal S) | idle start delay | busy gaps | "
          "utilisation | theory |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results: list[list[dict]] = []
    for c in cs:
        for rho in RHOS:
            n = int(args.requests_at_09 * SHARE_OF_REQUESTS[rho])
            rs = [run(c, rho, args.service_ms, n, args.depth if c == 1 else 1, next(seeds)) for _ in range(args.seeds)]
            for r in rs:
                print(row(r), flush=True)
            results.append(rs)
    print("\n| c | rho | seeds | requests | error, raw (mean of seeds) | error, control variate |")
    print("|---|---|---|---|---|---|")
    for rs in results:
        print(summary_row(rs))
    print(f"# load after: {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
