"""Predicted against measured memory: 13 zoo models x inference/training x three embedding backends.

For each cell the prediction (:mod:`recstack.zoo.footprint.predict`, from the config alone) is set beside one real
step of the model built at ``--scale`` (:mod:`recstack.memory.measure`: exact resident bytes, the CPU
allocator's events for the step's peak). Resident bytes (parameters, buffers, optimizer state, the batch)
must match exactly; the step's peak (activations, indices, gradients, temporaries) and the total peak are
compared in percent. Memory figures do not depend on the host's load, so the table can be made on a busy
machine. Prints a markdown table and writes the rows as JSON (``-o``).

    python benchmarks/bench_memory.py                                  # the table (13 x 2 x 3 cells)
    python benchmarks/bench_memory.py --models rmc1,ncf --optimizer adagrad --batch-size 128
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

MODELS = ("rmc1", "rmc2", "rmc3", "ncf", "wnd", "mtwnd", "din", "dien", "dlrmv2", "deepfm", "twotower", "bst", "hstu")
BACKENDS = ("torch", "torchrec", "tbe")
MODES = ("inference", "train")
GOAL_PCT = 10.0


def cell(model: str, backend: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    from recstack.memory.measure import measure
    from recstack.workload.presets import load_workload
    from recstack.zoo.footprint.predict import predict_config

    row: dict[str, Any] = {"model": model, "backend": backend, "mode": mode}
    try:
        m = measure(model, backend=backend, mode=mode, optimizer=args.optimizer, batch_size=args.batch_size,
                    scale=args.scale, workload=args.workload)
    except Exception as exc:  # a backend that cannot build this model: say so in the table
        row["error"] = f"{type(exc).__name__}: {exc}"[:160]
        return row
    p = predict_config(model, scale=args.scale, batch_size=args.batch_size, backend=backend, mode=mode,
                       optimizer=args.optimizer, workload=load_workload(args.workload), num_batches=1)
    r = p.resident
    row.update(
        params_pred=r["tables"] + r["dense_parameters"], params_meas=m.parameters_bytes,
        buffers_pred=r["table_metadata"] + r["dense_buffers"], buffers_meas=m.buffers_bytes,
        state_pred=r["optimizer_state"], state_meas=m.optimizer_state_bytes,
        batch_pred=p.inputs, batch_meas=m.batch_bytes,
        step_pred=p.step_peak, step_meas=m.step_peak_bytes,
        peak_pred=p.peak, peak_meas=m.peak_bytes,
        stages={s: {"pred": p.stage_dynamic.get(s), "meas": v} for s, v in m.stage_peak_bytes.items()},
    )
    row["step_err_pct"] = 100.0 * (p.step_peak / max(1, m.step_peak_bytes) - 1.0)
    row["peak_err_pct"] = 100.0 * (p.peak / max(1, m.peak_bytes) - 1.0)
    row["resident_exact"] = all(row[f"{k}_pred"] == row[f"{k}_meas"] for k in ("params", "state", "batch"))
    return row


def _kib(n: float) -> str:
    return f"{n / 1024:,.0f}"


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| model | mode | backend | params+state exact | buffers pred/meas (B) | step peak pred / meas (KiB) | "
           "step err | total peak pred / meas (KiB) | total err |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | {r['mode']} | {r['backend']} | not built: {r['error']} |||||||")
            continue
        out.append(
            f"| {r['model']} | {r['mode']} | {r['backend']} | {'yes' if r['resident_exact'] else 'NO'} | "
            f"{r['buffers_pred']} / {r['buffers_meas']} | {_kib(r['step_pred'])} / {_kib(r['step_meas'])} | "
            f"{r['step_err_pct']:+.1f}% | {_kib(r['peak_pred'])} / {_kib(r['peak_meas'])} | {r['peak_err_pct']:+.1f}% |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adagrad"))
    ap.add_argument("--scale", type=float, default=1e-3, help="table scale (small: the step's figures dominate)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workload", default="uniform")
    ap.add_argument("-o", "--output", default=None, help="write the rows as JSON")
    args = ap.parse_args(argv)
    rows = []
    start = time.perf_counter()
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            for backend in args.backends.split(","):
                rows.append(cell(model, backend, mode, args))
                print(f"{model} {mode} {backend}: " + (rows[-1].get("error") or
                      f"step {rows[-1]['step_err_pct']:+.1f}%, total {rows[-1]['peak_err_pct']:+.1f}%"),
                      file=sys.stderr, flush=True)
    print(table(rows))
    done = [r for r in rows if "error" not in r]
    within = [r for r in done if abs(r["step_err_pct"]) <= GOAL_PCT]
    within_total = [r for r in done if abs(r["peak_err_pct"]) <= GOAL_PCT]
    exact = [r for r in done if r["resident_exact"]]
    print(f"\n{len(done)} cells measured ({len(rows) - len(done)} not built) in {time.perf_counter() - start:.0f} s; "
          f"parameters, optimizer state and batch exact in {len(exact)}; step peak within {GOAL_PCT:g}% in "
          f"{len(within)}; total peak within {GOAL_PCT:g}% in {len(within_total)}")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
