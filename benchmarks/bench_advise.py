"""Issue 32's goal table: does ``recstack advise``'s top recommendation hold when applied and re-measured?

For each model (the 13 zoo models in inference; ``--mode train``: the eight 2020 models), ``recstack.advise``
runs under ``--budget`` and its winner is written with ``--apply-to``; then the baseline and the winner's
RunConfig are each profiled in fresh processes (``recstack profile --config``), alternating, ``--pairs``
times, and the measured speedup (time per sample, medians) is set beside the claimed one and its interval.
Columns: claimed speedup [interval], re-measured speedup, reproduced (inside the interval), slower (the
re-measured winner slower than the baseline beyond the noise rule), combination beats the best single.
Run it on a quiet host; prints a markdown table and writes the rows as JSON (``-o``).

    python benchmarks/bench_advise.py --budget 5 -o advise_inference.json                  # the table
    python benchmarks/bench_advise.py --mode train --budget 5 -o advise_train.json
    python benchmarks/bench_advise.py --models rmc1 --scale 0.0005 --batch-size 32 --budget 2 --levers batch_size --pairs 2 --iters 6  # tiny

``--vs-grid``: the goal against an exhaustive grid. Per model, the characterise preset's space for that model
and ``--workload`` (batch size 1-1024 x backend torch/tbe, the preset's base: 10 points) is swept into a store
and ranked by ``recstack best``; then ``recstack advise`` runs on the same model and workload (baseline
``--batch-size``, default 256) into the same store; the two winners' RunConfigs are re-measured in
alternating fresh processes. Columns: runs and wall time of each, the two winners, advisor / grid throughput
re-measured with its 95 % interval, whether that is >= 0.95 (within 5 % or better), whether advise measured at
most a fifth of the grid's configurations (:func:`advise_runs`), and where ``best`` (which now reads the
advice table) finds its winner afterwards.

    python benchmarks/bench_advise.py --vs-grid --budget 5 -o advise_vs_grid.json                    # the goal
    python benchmarks/bench_advise.py --vs-grid --models rmc1 --scale 0.0005 --grid-min-timed-s 0.05 --budget 1 \
        --levers batch_size,backend --advise-iters 20 --pairs 2 --iters 6 --include-contended          # tiny
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MODELS = ("rmc1", "rmc2", "rmc3", "ncf", "wnd", "mtwnd", "din", "dien", "dlrmv2", "deepfm", "twotower", "bst", "hstu")
MODELS_2020 = ("rmc1", "rmc2", "rmc3", "ncf", "wnd", "mtwnd", "din", "dien")


def per_sample(config: Path, out: Path, iters: int) -> float:
    """One fresh ``recstack profile`` process: the run's time per sample (s)."""
    subprocess.run([sys.executable, "-m", "recstack", "--quiet", "profile", "--config", str(config), "--iters",
                    str(iters), "-o", str(out), "--depth", "0"], check=True, capture_output=True, text=True)
    data = json.loads(out.read_text())
    return float(data["root"]["time_s"]) / int(data["run"]["batch_size"])


def config_yaml(cfg: dict[str, Any], path: Path) -> Path:
    """A RunConfig (as a dict) written as the YAML ``recstack profile --config`` reads."""
    import yaml

    from recstack.config.run import RunConfig

    path.write_text(yaml.safe_dump(RunConfig.model_validate(cfg).model_dump(mode="json", exclude_defaults=True)))
    return path


def alternate(base: Path, what: Path, work: Path, pairs: int, iters: int) -> dict[str, Any]:
    """``what`` against ``base`` in alternating fresh processes (the order swapped every other pair):
    :func:`recstack.advisor.measure.compare` of their times per sample (speedup: base / what)."""
    from recstack.advisor.measure import compare

    b, w = [], []
    for i in range(pairs):
        order = [(base, b), (what, w)] if i % 2 == 0 else [(what, w), (base, b)]
        for cfg, acc in order:
            acc.append(per_sample(cfg, work / "p.json", iters))
    return compare(b, w)


def remeasure(doc: dict[str, Any], winner: Path, work: Path, pairs: int, iters: int) -> dict[str, Any]:
    return alternate(config_yaml(doc["baseline"], work / "baseline.yaml"), winner, work, pairs, iters)


def row(model: str, args: argparse.Namespace) -> dict[str, Any]:
    import recstack

    out: dict[str, Any] = {"model": model, "mode": args.mode}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        try:
            doc = recstack.advise(model, scale=args.scale, batch_size=args.batch_size, mode=args.mode,
                                  budget_min=args.budget, levers=args.levers.split(",") if args.levers else None)
        except Exception as exc:  # a model that cannot be advised here: say so in the table
            out["error"] = f"{type(exc).__name__}: {exc}"[:160]
            return out
        out.update(winner=doc["winner"], elapsed_s=doc["elapsed_s"], contended=doc["contended"],
                   arms=len(doc["ranking"]) + 1)
        top = next((r for r in doc["ranking"] if r["recommended"]), None)
        singles = [r for r in doc["ranking"] if r["kind"] != "combination" and r["recommended"]]
        combo = next((r for r in doc["ranking"] if r["kind"] == "combination"), None)
        out["combination_beats_best_single"] = bool(
            combo and singles and combo["recommended"]
            and combo["step"]["speedup"] > max(s["step"]["speedup"] for s in singles))
        if top is None:
            return out
        from recstack.advisor.advise import write_apply

        write_apply(doc, work / "winner.yaml")
        got = remeasure(doc, work / "winner.yaml", work, args.pairs, args.iters)
        lo, hi = top["step"]["interval"] or (None, None)
        out.update(claimed=top["step"]["speedup"], interval=[lo, hi], remeasured=got["speedup"],
                   reproduced=bool(lo is not None and got["speedup"] is not None and lo <= got["speedup"] <= hi),
                   slower=got["verdict"] == "regression")
    return out


PRESET = "characterise"


def grid_spec(model: str, workload: str, scale: float | None, min_timed_s: float | None) -> dict[str, Any]:
    """The characterise preset's space for one model and workload (batch size x backend), its base kept
    (``--scale``, ``--grid-min-timed-s`` only to make a tiny check)."""
    from recstack.sweeps.presets import preset

    spec = copy.deepcopy(preset(PRESET))
    spec["name"] = f"{PRESET}-{model}-{workload}"
    spec["grid"] = {**spec["grid"], "model": [model], "workload": [workload]}
    if scale is not None:
        spec["base"]["scale"] = scale
    if min_timed_s is not None:
        spec["min_timed_s"] = min_timed_s
    return spec


def advise_runs(doc: dict[str, Any]) -> int:
    """Configurations advise measured: its profile, the baseline and its noise-floor copy, every measured
    single (a compile lever counts once, though its own search runs several), and a combination with the
    fresh baseline it is measured against."""
    combos = sum(r["kind"] == "combination" for r in doc["ranking"])
    singles = sum(r["kind"] != "combination" and r["step"].get("verdict") != "unmeasured" for r in doc["ranking"])
    return 3 + singles + 2 * combos


def _cfg_text(c: dict[str, Any]) -> str:
    keys = ("batch_size", "backend", "threads", "table_dtype", "dtype")
    return ", ".join(f"{k}={c.get(k)}" for k in keys if c.get(k) is not None)


def vs_grid_row(model: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The grid (a sweep of the preset's space) and its ``best``, then advise on the same model and workload
    into the same store, then both winners re-measured in alternating fresh processes."""
    import recstack
    from recstack.advisor.store import write_advice
    from recstack.results import best, load

    store = work / "results.duckdb"
    spec = grid_spec(model, args.workload, args.scale, args.grid_min_timed_s)
    res = recstack.sweep(spec, work / "sweep", store=store)
    (grid,) = best(load(store), model=model, include_contended=args.include_contended)
    pts = load(store)
    out: dict[str, Any] = {"model": model, "workload": args.workload, "grid_runs": res.total, "grid_failed": res.failed,
                           "grid_wall_s": round(float(pts["wall_s"].sum()), 1),  # the points' own, a resumed sweep too
                           "grid_contended_left_out": grid["contended_left_out"]}
    if grid["best"] is None:
        return out | {"error": "the grid has no best (points failed or mostly contended)"}
    grid_cfg = json.loads(pts[pts["config_hash"] == grid["best"]["config_hash"]].iloc[0]["config_json"])
    base = {**spec["base"], "workload": args.workload, "batch_size": args.batch_size}
    more = {"advise_iters": args.advise_iters} if args.advise_iters else {}
    doc = recstack.advise(model, budget_min=args.budget, levers=args.levers.split(",") if args.levers else None,
                          **more, **base)
    write_advice(doc, store)
    adv_cfg = doc["winner_config"] or doc["baseline"]
    (after,) = best(load(store), model=model, advice=load(store, "advice"), include_contended=args.include_contended)
    got = alternate(config_yaml(grid_cfg, work / "grid_best.yaml"), config_yaml(adv_cfg, work / "advisor_best.yaml"),
                    work, args.pairs, args.iters)
    runs = advise_runs(doc)
    ratio = got["speedup"]
    return out | {
        "grid_best": _cfg_text(grid_cfg), "grid_best_throughput": grid["best"]["throughput"],
        "advise_runs": runs, "advise_wall_s": doc["elapsed_s"], "advise_contended": doc["contended"],
        "advisor_best": (doc["winner"] or "the baseline") + f" ({_cfg_text(adv_cfg)})",
        "best_after_advise": after["best"]["from"], "advisor_over_grid": ratio, "interval": got["interval"],
        "verdict": got["verdict"], "within_5pct_or_better": ratio is not None and ratio >= 0.95,
        "at_most_a_fifth_of_the_runs": 5 * runs <= res.total,
    }


def vs_grid_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | workload | grid: runs, wall | grid best | advise: runs, wall | advisor best | "
             "advisor / grid throughput, re-measured (95% interval) | within 5% or better | <= 1/5 of the runs | "
             "`best` after advise |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['workload']} | {r['grid_runs']}, {r['grid_wall_s']} s | "
                         f"error: {r['error']} | | | | | | |")
            continue
        lo, hi = r["interval"] or (float("nan"), float("nan"))
        lines.append(f"| {r['model']} | {r['workload']} | {r['grid_runs']}, {r['grid_wall_s']:.0f} s | {r['grid_best']} | "
                     f"{r['advise_runs']}, {r['advise_wall_s']:.0f} s | {r['advisor_best']} | "
                     f"{r['advisor_over_grid']:.3f}x ({lo:.3f}-{hi:.3f}) | "
                     f"{'yes' if r['within_5pct_or_better'] else 'NO'} | "
                     f"{'yes' if r['at_most_a_fifth_of_the_runs'] else 'NO'} | {r['best_after_advise']} |")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | winner | claimed (95% interval) | re-measured | reproduced | slower | combination > best single |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} | | | | | |")
            continue
        if r.get("claimed") is None:
            lines.append(f"| {r['model']} | none beat noise | | | | | |")
            continue
        lo, hi = r["interval"]
        lines.append(f"| {r['model']} | {r['winner']} | {r['claimed']:.2f}x ({lo:.2f}-{hi:.2f}) | "
                     f"{r['remeasured']:.2f}x | {'yes' if r['reproduced'] else 'NO'} | "
                     f"{'YES' if r['slower'] else 'no'} | {'yes' if r['combination_beats_best_single'] else 'no'} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=None, help="comma-separated zoo ids (default: all 13; train: the 2020 eight)")
    ap.add_argument("--mode", choices=("inference", "train"), default="inference")
    ap.add_argument("--scale", type=float, default=None,
                    help="model scale (default 0.01; --vs-grid: the characterise preset's, 0.05)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--budget", type=float, default=5.0, help="advise --budget per model (minutes)")
    ap.add_argument("--levers", default=None, help="only these lever kinds (advise --levers)")
    ap.add_argument("--pairs", type=int, default=5, help="fresh-process baseline/winner pairs in the re-measure")
    ap.add_argument("--iters", type=int, default=20, help="timed steps per re-measure profile")
    ap.add_argument("-o", "--output", default=None, help="write the rows as JSON")
    ap.add_argument("--vs-grid", action="store_true",
                    help="against the exhaustive grid: the characterise preset's space per model and --workload, "
                         "its `best`, then advise into the same store; both winners re-measured alternating")
    ap.add_argument("--workload", default="uniform", help="--vs-grid: the workload of grid and advise")
    ap.add_argument("--grid-min-timed-s", type=float, default=None,
                    help="--vs-grid: the grid's time-targeted timing passes (default the preset's 3 s)")
    ap.add_argument("--advise-iters", type=int, default=None, help="advise's timed steps per arm (default its own)")
    ap.add_argument("--include-contended", action="store_true",
                    help="--vs-grid: rank contended points and what-ifs too (to check the benchmark on a busy host "
                         "only; the goal needs a quiet one)")
    ap.add_argument("--work", default=None, help="--vs-grid: keep each model's store and configs under this folder")
    args = ap.parse_args()
    models = args.models.split(",") if args.models else (MODELS if args.mode == "inference" else MODELS_2020)
    if args.vs_grid:
        return vs_grid_main(models, args)
    if args.scale is None:
        args.scale = 0.01
    rows = []
    for m in models:
        rows.append(row(m, args))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(table(rows))
    done = [r for r in rows if r.get("claimed") is not None]
    print(f"\nreproduced {sum(r['reproduced'] for r in done)} of {len(done)}; slower {sum(r['slower'] for r in done)}; "
          f"combination beat the best single on {sum(bool(r.get('combination_beats_best_single')) for r in rows)}")
    if args.output:
        Path(args.output).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def vs_grid_main(models: list[str], args: argparse.Namespace) -> int:
    rows = []
    for m in models:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(args.work) / m if args.work else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            rows.append(vs_grid_row(m, args, work))
        print(json.dumps(rows[-1], default=str), file=sys.stderr, flush=True)
    print(vs_grid_table(rows))
    done = [r for r in rows if "error" not in r]
    print(f"\nwithin 5% of the grid's best or better: {sum(r['within_5pct_or_better'] for r in done)} of {len(done)}; "
          f"at most a fifth of the grid's runs: {sum(r['at_most_a_fifth_of_the_runs'] for r in done)} of {len(done)}")
    if args.output:
        Path(args.output).write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
