"""Calibrate the ``production`` workload preset against Meta's published 2022 locality statistics.

Method (see docs/workloads.md, "Calibration of the production preset"):

1. The population is parametrised by 9 numbers: row counts lognormal(median, sigma);
   mean pooling lognormal(sigma) with its mean solved so that the clamped
   population mean is the published 13.6; Zipf exponent s normal(mean, std); Zipf
   offset q lognormal(median, sigma); share of lookups on the hottest row
   lognormal(median, sigma). Clamps are fixed (rows [2, 4e7], pooling [0.05, 500],
   s [0.05, 3], q [0, 1e5], hot mass [0, 0.9]).
2. For a parameter vector, the *expected* locality statistics at batch 131,072 are
   computed analytically for stratified table draws: each table's rows get Poisson
   counts with mean ``lookups * P(rank)`` using the generator's own rank law (hot row,
   exact head, grouped continuous tail), and the expected numbers of rows and
   lookups per re-use bucket are sums of Poisson bucket probabilities (tabulated
   once over lambda with torch.special.gammainc). On the same tables this matches
   generated batches to about 0.001 per bucket.
3. Nelder-Mead (3 starts, 2 stages each) minimises the mean, over two table designs
   (256 stratified tables for the population, and the 32 tables that
   ``workload_stats(..., tables=32, seed=0)`` draws), of the squared errors of both
   published histograms plus 0.05 x the squared log-error of the average re-use.
4. The fitted preset is then *verified by generation*: ``workload_stats`` draws the
   tables, generates a real batch of 131,072 for each and counts, for each seed in
   ``--seeds``, and the same population at other batch sizes.

Run: ``python benchmarks/calibrate_production.py`` (search + verification, ~5-10 min
on 2 cores). ``--write`` stores the fitted parameters in
src/recstack/workload/presets/production.yaml. ``--verify-only`` skips the search and
verifies the preset as shipped (e.g. ``--verify-only --verify-tables 128 --seeds 2``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from recstack.workload.distributions import LogNormal
from recstack.workload.presets import PRESET_DIR, load_workload
from recstack.workload.spec import PopulationZipfIds, TablePopulation, WorkloadSpec
from recstack.workload.stats import (
    BUCKET_BOUNDS,
    NUM_BUCKETS,
    PUBLISHED_2022,
    population_draws,
    workload_stats,
)

BATCH = int(PUBLISHED_2022["batch_size"])
TARGET_POOLING = float(PUBLISHED_2022["avg_pooling"])
ROWS_CLAMP = (2.0, 4.0e7)
POOL_CLAMP = (0.05, 500.0)
S_CLAMP = (0.05, 3.0)
Q_CLAMP = (0.0, 1.0e5)
HOT_CLAMP = (0.0, 0.9)
PARAM_NAMES = [
    "rows_median",
    "rows_sigma",
    "pooling_sigma",
    "s_mean",
    "s_std",
    "q_median",
    "q_sigma",
    "hot_median",
    "hot_sigma",
]


# ---------------------------------------------------------------------------------------------------------
# Parameters <-> population
# ---------------------------------------------------------------------------------------------------------
def decode(theta: np.ndarray) -> dict[str, float]:
    """Unconstrained vector -> named parameters (logs for positive ones)."""
    t = np.asarray(theta, dtype=np.float64)
    return {
        "rows_median": float(math.exp(t[0])),
        "rows_sigma": float(abs(t[1])),
        "pooling_sigma": float(abs(t[2])),
        "s_mean": float(t[3]),
        "s_std": float(abs(t[4])),
        "q_median": float(math.exp(t[5])),
        "q_sigma": float(abs(t[6])),
        "hot_median": float(math.exp(t[7])),
        "hot_sigma": float(abs(t[8])),
    }


def encode(p: dict[str, float]) -> np.ndarray:
    return np.array(
        [
            math.log(p["rows_median"]),
            p["rows_sigma"],
            p["pooling_sigma"],
            p["s_mean"],
            p["s_std"],
            math.log(p["q_median"]),
            p["q_sigma"],
            math.log(p["hot_median"]),
            p["hot_sigma"],
        ]
    )


def clamped_lognormal_mean(mu: float, sigma: float, lo: float, hi: float) -> float:
    """E[clip(X, lo, hi)] for X = exp(Normal(mu, sigma)) (closed form)."""
    if sigma == 0:
        return min(max(math.exp(mu), lo), hi)

    def phi(x: float) -> float:
        return 0.5 * math.erfc(-x / math.sqrt(2))

    a, b = (math.log(lo) - mu) / sigma, (math.log(hi) - mu) / sigma
    inner = math.exp(mu + sigma**2 / 2) * (phi(b - sigma) - phi(a - sigma))
    return lo * phi(a) + hi * (1 - phi(b)) + inner


def pooling_dist(sigma: float) -> LogNormal:
    """Lognormal mean pooling, clamped, whose clamped mean is the published average (bisection on mean)."""
    lo, hi = 0.01, 1e4
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        m = clamped_lognormal_mean(math.log(mid) - sigma**2 / 2, sigma, *POOL_CLAMP)
        lo, hi = (mid, hi) if m < TARGET_POOLING else (lo, mid)
    return LogNormal(
        kind="lognormal", mean=round(math.sqrt(lo * hi), 4), sigma=sigma, min=POOL_CLAMP[0], max=POOL_CLAMP[1]
    )


def population(p: dict[str, float], length_sigma: float) -> TablePopulation:
    def r(x: float) -> float:
        return float(f"{x:.5g}")

    return TablePopulation(
        tables=int(PUBLISHED_2022["tables"]),
        rows={
            "kind": "lognormal",
            "median": r(p["rows_median"]),
            "sigma": r(p["rows_sigma"]),
            "min": ROWS_CLAMP[0],
            "max": ROWS_CLAMP[1],
        },
        pooling=pooling_dist(r(p["pooling_sigma"])),
        length_sigma=length_sigma,
        ids={
            "kind": "zipf",
            "s": {
                "kind": "normal",
                "mean": r(p["s_mean"]),
                "std": r(p["s_std"]),
                "min": S_CLAMP[0],
                "max": S_CLAMP[1],
            },
            "q": {
                "kind": "lognormal",
                "median": r(p["q_median"]),
                "sigma": r(p["q_sigma"]),
                "min": Q_CLAMP[0],
                "max": Q_CLAMP[1],
            },
            "hot_mass": {
                "kind": "lognormal",
                "median": r(p["hot_median"]),
                "sigma": r(p["hot_sigma"]),
                "min": HOT_CLAMP[0],
                "max": HOT_CLAMP[1],
            },
            "hot_rows": 1,
        },
        scatter=True,
    )


# ---------------------------------------------------------------------------------------------------------
# Analytic expected statistics
# ---------------------------------------------------------------------------------------------------------
class PoissonBuckets:
    """Tabulated expected rows / lookups per re-use bucket for a row with Poisson(lambda) hits."""

    def __init__(self, lo: float = -12.0, hi: float = 11.0, per_decade: int = 400) -> None:
        self.log_lam = np.linspace(lo * math.log(10), hi * math.log(10), int((hi - lo) * per_decade) + 1)
        lam = torch.from_numpy(np.exp(self.log_lam))
        edges = [0] + [b for b in BUCKET_BOUNDS if b is not None]  # bucket j = (edges[j], edges[j+1]]

        def p_greater(e: int) -> torch.Tensor:  # P(X > e)
            if e < 0:
                return torch.ones_like(lam)
            return torch.special.gammainc(torch.full_like(lam, e + 1.0), lam)

        rows, looks = [], []
        for j in range(NUM_BUCKETS):
            lo_e = edges[j]
            hi_e = edges[j + 1] if j + 1 < len(edges) else None
            upper = p_greater(hi_e) if hi_e is not None else torch.zeros_like(lam)
            rows.append(p_greater(lo_e) - upper)
            # lookups on rows with count c in (lo, hi]: lambda * P(lo-1 < Y <= hi-1)
            upper_y = p_greater(hi_e - 1) if hi_e is not None else torch.zeros_like(lam)
            looks.append(lam * (p_greater(lo_e - 1) - upper_y))
        self.rows = torch.stack(rows).clamp_min(0).numpy()
        self.looks = torch.stack(looks).clamp_min(0).numpy()

    def expected(self, lam: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Expected (rows, lookups) per bucket for groups of ``weight`` rows with mean count ``lam``."""
        x = np.log(np.maximum(lam, 1e-300))
        x0, dx = self.log_lam[0], self.log_lam[1] - self.log_lam[0]
        pos = np.clip((x - x0) / dx, 0.0, self.log_lam.size - 1.000001)
        i = pos.astype(np.int64)
        f = pos - i
        w0, w1 = weight * (1 - f), weight * f
        rows = self.rows[:, i] @ w0 + self.rows[:, i + 1] @ w1
        looks = self.looks[:, i] @ w0 + self.looks[:, i + 1] @ w1
        small = x < x0  # below the grid: P(X = 1) ~ lambda, all in the first bucket
        if small.any():
            rows[0] += np.dot(weight[small], lam[small]) - self.rows[0, 0] * weight[small].sum()
            looks[0] += np.dot(weight[small], lam[small]) - self.looks[0, 0] * weight[small].sum()
        return rows, looks


def zipf_groups(
    support: np.ndarray, s: np.ndarray, q: np.ndarray, offset: int, head: int = 64, groups: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row probabilities (within the Zipf part) and row counts of K tables, shape (K, head + groups).

    Ranks ``offset+1 .. support`` follow (k + q) ** -s: the first ``head`` exactly, the rest as
    log-spaced groups of the continuous tail density (x + 0.5 + q) ** -s used by the generator.
    """
    support = support.astype(np.float64)
    k = np.arange(offset + 1, offset + head + 1, dtype=np.float64)
    pw = (k[None, :] + q[:, None]) ** (-s[:, None])
    head_w = (k[None, :] <= support[:, None]).astype(np.float64)
    pw *= head_w
    hs = np.clip(support, offset + 1, offset + head)
    frac = np.linspace(0.0, 1.0, groups + 1)
    edges = hs[:, None] * (np.maximum(support, hs) / hs)[:, None] ** frac[None, :]
    y = edges + 0.5 + q[:, None]
    t = (1.0 - s)[:, None]
    log_ratio = np.log(y / y[:, :1])
    with np.errstate(divide="ignore", invalid="ignore"):
        integral = np.where(
            np.abs(t) < 1e-12, y[:, :1] ** t * log_ratio, y[:, :1] ** t * np.expm1(t * log_ratio) / t
        )
    z = pw.sum(axis=1) + integral[:, -1]
    counts = np.diff(edges, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tail_p = np.where(counts > 0, np.diff(integral, axis=1) / np.where(counts > 0, counts, 1.0), 0.0)
    probs = np.concatenate([pw, tail_p], axis=1) / z[:, None]
    weights = np.concatenate([head_w, counts], axis=1)
    return probs, weights


def table_skew(
    pop: TablePopulation, draws: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, q, hot mass) of drawn tables, from their stratum probabilities."""
    ids = pop.ids
    assert isinstance(ids, PopulationZipfIds)
    hot = ids.hot_mass.quantile(draws["u_hot"]) if ids.hot_mass is not None else np.zeros(draws["u_s"].size)
    return ids.s.quantile(draws["u_s"]), ids.q.quantile(draws["u_q"]), np.clip(hot, 0.0, 1.0)


def design_stats(
    pop: TablePopulation, k: int, seed: int, batch: int, buckets: PoissonBuckets
) -> dict[str, object]:
    """Expected statistics of the ``k`` tables that ``workload_stats(..., tables=k, seed=seed)`` draws."""
    draws = population_draws(pop, k, seed)
    s, q, hot = table_skew(pop, draws)
    assert isinstance(pop.ids, PopulationZipfIds)
    return expected_for_tables(draws["rows"], draws["pooling"], s, q, hot, pop.ids.hot_rows, batch, buckets)


def expected_for_tables(
    rows: np.ndarray,
    pooling: np.ndarray,
    s: np.ndarray,
    q: np.ndarray,
    hot: np.ndarray,
    hot_rows: int,
    batch: int,
    buckets: PoissonBuckets,
) -> dict[str, object]:
    """Expected aggregated statistics of explicit tables (rows, mean pooling, s, q, hot mass per table)."""
    probs, weights = zipf_groups(rows, s, q, hot_rows)
    n = batch * pooling
    lam = (n * (1.0 - hot))[:, None] * probs
    lam_hot = np.repeat((n * hot / hot_rows)[:, None], hot_rows, axis=1)
    lam = np.concatenate([lam_hot, lam], axis=1)
    weights = np.concatenate([np.ones((rows.size, hot_rows)), weights], axis=1)
    mask = (weights > 0) & (lam > 0)
    rows_hist, looks_hist = buckets.expected(lam[mask], weights[mask])
    lookups = batch * pooling.sum()
    return {
        "avg_pooling": float(pooling.mean()),
        "avg_reuse": float(lookups / rows_hist.sum()),
        "rows_share": (rows_hist / rows_hist.sum()).tolist(),
        "lookups_share": (looks_hist / looks_hist.sum()).tolist(),
    }


def loss(stats: dict[str, object]) -> float:
    r = np.asarray(stats["rows_share"]) - np.asarray(PUBLISHED_2022["rows_share"])
    lk = np.asarray(stats["lookups_share"]) - np.asarray(PUBLISHED_2022["lookups_share"])
    reuse = math.log(float(stats["avg_reuse"]) / float(PUBLISHED_2022["avg_reuse"]))  # type: ignore[arg-type]
    return float(np.sum(r**2) + np.sum(lk**2) + 0.05 * reuse**2)


# ---------------------------------------------------------------------------------------------------------
# Search
# ---------------------------------------------------------------------------------------------------------
def nelder_mead(
    f, x0: np.ndarray, step: np.ndarray, iters: int, tol: float = 1e-7
) -> tuple[np.ndarray, float]:
    """Plain Nelder-Mead minimisation (no SciPy dependency)."""
    n = x0.size
    simplex = [x0] + [x0 + np.eye(n)[i] * step[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) < tol:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        xr = centroid + (centroid - worst)
        fr = f(xr)
        if fr < values[0]:
            xe = centroid + 2 * (centroid - worst)
            fe = f(xe)
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (worst - centroid) if fr >= values[-1] else centroid + 0.5 * (xr - centroid)
            fc = f(xc)
            if fc < min(fr, values[-1]):
                simplex[-1], values[-1] = xc, fc
            else:
                best = simplex[0]
                simplex = [best] + [best + 0.5 * (x - best) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    i = int(np.argmin(values))
    return simplex[i], values[i]


def search(
    iters: int, starts: list[dict[str, float]], length_sigma: float, designs: list[tuple[int, int]]
) -> dict[str, float]:
    """Nelder-Mead from each start; the objective averages the loss over table designs (k, seed)."""
    buckets = PoissonBuckets()
    cache: dict[bytes, float] = {}

    def f(theta: np.ndarray) -> float:
        key = np.round(theta, 6).tobytes()
        if key not in cache:
            try:
                p = decode(theta)
                if (
                    not (0.3 <= p["s_mean"] <= 2.5)
                    or not (10 <= p["rows_median"] <= 3e7)
                    or p["hot_median"] > 0.9
                ):
                    cache[key] = 10.0
                else:
                    pop = population(p, length_sigma)
                    cache[key] = float(
                        np.mean([loss(design_stats(pop, k, sd, BATCH, buckets)) for k, sd in designs])
                    )
            except ValueError:
                cache[key] = 10.0
        return cache[key]

    best, best_val = None, math.inf
    for i, start in enumerate(starts):
        t0 = time.time()
        x, val = nelder_mead(
            f, encode(start), np.array([1.0, 0.4, 0.4, 0.15, 0.1, 1.0, 0.5, 0.7, 0.4]), iters
        )
        x, val = nelder_mead(f, x, np.array([0.3, 0.1, 0.1, 0.05, 0.03, 0.3, 0.2, 0.2, 0.1]), iters)
        print(
            f"  start {i + 1}/{len(starts)}: loss {val:.6f} ({time.time() - t0:.0f} s) {fmt(decode(x))}",
            flush=True,
        )
        if val < best_val:
            best, best_val = x, val
    assert best is not None
    return decode(best)


def fmt(p: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.4g}" for k, v in p.items())


# ---------------------------------------------------------------------------------------------------------
# Reporting / writing
# ---------------------------------------------------------------------------------------------------------
def bucket_label(j: int) -> str:
    if j == 0:
        return "(0, 1]"
    hi = BUCKET_BOUNDS[j]
    lo = BUCKET_BOUNDS[j - 1]
    return f"({lo}, {hi}]" if hi is not None else f"({lo}, inf)"


def print_match(title: str, columns: list[tuple[str, dict[str, object]]]) -> None:
    print(f"\n{title}")
    head = f"{'bucket':>16} " + " ".join(f"{'rows ' + n:>14} " for n, _ in columns)
    head += " ".join(f"{'lookups ' + n:>17}" for n, _ in columns)
    print(head)
    for j in range(NUM_BUCKETS):
        line = f"{bucket_label(j):>16} "
        line += " ".join(f"{float(s['rows_share'][j]):14.3f} " for _, s in columns)  # type: ignore[index]
        line += " ".join(f"{float(s['lookups_share'][j]):17.3f}" for _, s in columns)  # type: ignore[index]
        print(line)
    for key in ("avg_pooling", "avg_reuse"):
        print(f"{key:>16} " + " ".join(f"{float(s[key]):14.2f} " for _, s in columns))  # type: ignore[arg-type]


def production_spec(p: dict[str, float], length_sigma: float) -> WorkloadSpec:
    base = load_workload("production") if (PRESET_DIR / "production.yaml").exists() else None
    pop = population(p, length_sigma)
    data = {
        "version": 1,
        "name": "production",
        "description": (
            "Production-like traffic: a population of embedding tables calibrated to Meta's published 2022 "
            "locality statistics (788 tables, batch 131,072) by benchmarks/calibrate_production.py. Bound to a "
            "model, each feature keeps its id_range and mean pooling (lognormal per-sample lengths with "
            "length_sigma) and draws its skew (Zipf s and q, hot-row mass) from the population (seeded per "
            "feature name)."
        ),
        "seed": 0,
        "population": pop.model_dump(mode="json", exclude_none=True, by_alias=True),
    }
    if base is not None:
        for key in ("dense", "labels", "query_sizes", "arrivals"):
            data[key] = getattr(base, key).model_dump(mode="json", exclude_none=True, by_alias=True)
    return WorkloadSpec.model_validate(data)


def write_preset(spec: WorkloadSpec, params: dict[str, float], match: dict[str, object]) -> Path:
    path = PRESET_DIR / "production.yaml"
    header = [
        "# Production-like workload preset, written by benchmarks/calibrate_production.py --write.",
        "# Fitted parameters: " + fmt(params),
        f"# Verified by generation at batch {BATCH} ({match['tables']} stratified tables): "
        f"avg pooling {float(match['avg_pooling']):.2f}, avg re-use {float(match['avg_reuse']):.2f} "
        f"(published {PUBLISHED_2022['avg_pooling']:.2f}, {PUBLISHED_2022['avg_reuse']}).",
        "# See docs/workloads.md (Calibration) for the method and the per-bucket match.",
    ]
    body = yaml.safe_dump(spec.to_dict(), sort_keys=False, width=100)
    path.write_text("\n".join(header) + "\n" + body, encoding="utf-8")
    return path


def verify(spec: WorkloadSpec, tables: int, seeds: list[int], batches: list[int]) -> dict[str, object]:
    published = {k: PUBLISHED_2022[k] for k in ("rows_share", "lookups_share", "avg_pooling", "avg_reuse")}
    main = None
    for seed in seeds:
        t0 = time.time()
        st = workload_stats(spec, BATCH, tables=tables, seed=seed)
        print(
            f"\ngenerated {st['lookups']:,} IDs in {tables} tables (seed {seed}) in {time.time() - t0:.1f} s"
        )
        print_match(
            f"batch {BATCH}, seed {seed}: published vs ours (generated)", [("pub", published), ("ours", st)]
        )
        main = main or st
    for b in batches:
        st = workload_stats(spec, b, tables=tables, seed=seeds[0])
        print_match(f"batch {b} (seed {seeds[0]}): the same population at another batch size", [("ours", st)])
    assert main is not None
    return main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--analytic-tables", type=int, default=256, help="stratified tables in the analytic search"
    )
    ap.add_argument("--starts", type=int, default=3, help="Nelder-Mead starting points (1-3)")
    ap.add_argument("--iterations", type=int, default=400, help="Nelder-Mead iterations per stage")
    ap.add_argument("--verify-tables", type=int, default=32, help="tables generated for the verification")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds for the verification")
    ap.add_argument("--other-batches", default="16384,65536", help="batch sizes shown besides 131072")
    ap.add_argument(
        "--length-sigma", type=float, default=0.5, help="per-sample length dispersion (lognormal sigma)"
    )
    ap.add_argument("--verify-only", action="store_true", help="skip the search; verify the shipped preset")
    ap.add_argument(
        "--write", action="store_true", help="store the fitted parameters in presets/production.yaml"
    )
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    batches = [int(b) for b in args.other_batches.split(",") if b]
    if args.verify_only:
        spec = load_workload("production")
        verify(spec, args.verify_tables, seeds, batches)
        return 0
    starts = [
        {
            "rows_median": 2e5,
            "rows_sigma": 1.5,
            "pooling_sigma": 1.5,
            "s_mean": 1.0,
            "s_std": 0.25,
            "q_median": 5.0,
            "q_sigma": 1.0,
            "hot_median": 0.02,
            "hot_sigma": 1.5,
        },
        {
            "rows_median": 5e4,
            "rows_sigma": 2.5,
            "pooling_sigma": 1.0,
            "s_mean": 0.9,
            "s_std": 0.15,
            "q_median": 20.0,
            "q_sigma": 1.0,
            "hot_median": 0.05,
            "hot_sigma": 1.0,
        },
        {
            "rows_median": 1e6,
            "rows_sigma": 1.0,
            "pooling_sigma": 2.0,
            "s_mean": 1.1,
            "s_std": 0.3,
            "q_median": 50.0,
            "q_sigma": 0.5,
            "hot_median": 0.01,
            "hot_sigma": 2.0,
        },
    ][: args.starts]
    designs = [(args.analytic_tables, 1), (args.verify_tables, seeds[0])]
    print(
        f"searching {len(PARAM_NAMES)} population parameters; objective: mean loss of the expected statistics of "
        f"{args.analytic_tables} stratified tables and of the {args.verify_tables} tables verified below",
        flush=True,
    )
    params = search(args.iterations, starts, args.length_sigma, designs)
    print("best:", fmt(params))
    buckets = PoissonBuckets()
    spec = production_spec(params, args.length_sigma)
    assert spec.population is not None
    published = {k: PUBLISHED_2022[k] for k in ("rows_share", "lookups_share", "avg_pooling", "avg_reuse")}
    for k, sd in designs:
        an = design_stats(spec.population, k, sd, BATCH, buckets)
        print_match(f"analytic expectation, {k} tables (seed {sd})", [("pub", published), ("ours", an)])
    match = verify(spec, args.verify_tables, seeds, batches)
    if args.write:
        print("\nwrote", write_preset(spec, params, match))
    return 0


if __name__ == "__main__":
    sys.exit(main())
