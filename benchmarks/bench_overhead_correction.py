"""The import's profiler-overhead correction against the truth: one CPU run, timed without and with torch.profiler.

    PYTHONPATH=src python benchmarks/bench_overhead_correction.py [--models rmc1,rmc3,din] [--scale 0.01]
        [--batch 64] [--iters 40] [--json OUT.json]

One command, under 3 minutes on an idle 2-vCPU host (run it with nothing else running: the times are this
host's as it was). Per zoo model, one live profile (``recstack.profile_zoo``, inference, no machine file):

* the **truth**: its timing pass, without torch.profiler: the plain step (no hooks at all; median) and the
  stage times (recstack's stage hooks, a few perf_counter reads per stage; the interquartile steps' mean),
  with their p90/p10 (the truth's own noise: a ratio within it is no error);
* its op pass under torch.profiler (``record_shapes``, module ranges), the same model, batches and process,
  written as a Chrome trace (``trace=``), then imported as a user's trace is: ``import_trace(...,
  correct_overhead=False)`` (``recstack import --raw-times``: the **raw** traced times) and
  ``import_trace(...)`` (the **corrected** times), its steps the op pass's own ranges (``recstack.step::*``).

Printed per stage: truth, raw, corrected (ms per step), raw/truth and corrected/truth, what the correction
removed, the events per step it removed them for, and the per-event estimate; per model, the step likewise
and the geometric mean of |log ratio| over the stages for raw and corrected (0 = exact). ``--json``
writes every figure. The test of what the code guarantees is tests/test_import.py
(``test_the_overhead_correction_stays_within_its_bounds_on_a_recorded_trace``); whether the corrected
time is closer to the truth is a measurement, and this is it (docs/import.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODELS = ("rmc1", "rmc3", "din")


def _stage_times(prof: Any) -> dict[str, float]:
    return {c.name: c.time_s for c in prof.root.children}


def _spread(node: Any) -> float | None:
    """p90 / p10 of a node's per-step times (the truth's own noise)."""
    lo, hi = node.extra.get("time_s_p10"), node.extra.get("time_s_p90")
    return hi / lo if lo and hi else None


def measure(model: str, scale: float, batch: int, iters: int, folder: Path) -> dict[str, Any]:
    """One live profile (truth + its op pass's trace) and the trace imported raw and corrected."""
    import recstack
    from recstack.profiling.oppass import STEP
    from recstack.traceimport import import_trace

    trace = folder / f"{model}.trace.json"
    t0 = time.perf_counter()
    live = recstack.profile_zoo(model, scale=scale, batch_size=batch, iters=iters, warmup=5, op_iters=iters,
                                num_batches=4, counters=False, cost_model=False, machine=None, trace=trace)
    live_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    steps = f"{STEP}*"  # the op pass's own step ranges
    raw, cor = import_trace(trace, step_range=steps, correct_overhead=False), import_trace(trace, step_range=steps)
    import_s = time.perf_counter() - t0
    truth, rawt, cort = _stage_times(live), _stage_times(raw), _stage_times(cor)
    stages = []
    for name in truth:
        node = cor.stage(name) if name in cort else None
        extra = node.extra if node is not None else {}
        stages.append({"stage": name, "truth_s": truth[name], "truth_spread": _spread(live.stage(name)),
                       "raw_s": rawt.get(name), "corrected_s": cort.get(name),
                       "removed_s": extra.get("overhead_removed_s"),
                       "events_per_step": extra.get("overhead_events_per_step")})
    plain = live.overhead["uninstrumented_step_s"]
    spread = live.overhead["uninstrumented_step_s_p90"] / plain if plain else None
    return {"model": model, "scale": scale, "batch": batch, "iters": iters,
            "step": {"truth_s": plain, "truth_spread": spread, "raw_s": raw.root.time_s, "corrected_s": cor.root.time_s},
            "stage_timed_step_s": live.root.time_s, "op_pass_step_s": live.overhead.get("op_pass_step_s"),
            "per_event_s": cor.overhead.get("per_event_s"), "overhead_method": cor.overhead.get("method"),
            "events_per_step": cor.overhead.get("events_per_step"), "stages": stages,
            "only_in_trace": sorted(set(rawt) - set(truth)), "trace_mb": trace.stat().st_size / 1e6,
            "live_profile_s": live_s, "import_s": import_s}


def _ratio(x: float | None, truth: float) -> float | None:
    return x / truth if x is not None and truth > 0 else None


def _gm_abs_log(ratios: list[float | None]) -> float | None:
    """exp(mean |ln r|) - 1: the typical relative error, either way (0 = exact)."""
    logs = [abs(math.log(r)) for r in ratios if r is not None and r > 0]
    return math.exp(sum(logs) / len(logs)) - 1 if logs else None


def _fmt(x: float | None, scale: float = 1e3, digits: int = 3) -> str:
    return "-" if x is None else f"{x * scale:.{digits}f}"


def report(res: dict[str, Any]) -> list[str]:
    per = res["per_event_s"]
    lines = [f"\n{res['model']} (scale {res['scale']}, batch {res['batch']}, {res['iters']} steps each way; "
             f"per-event estimate {_fmt(per, 1e6, 2)} us; trace {res['trace_mb']:.1f} MB)",
             f"{'stage':<24}{'truth ms':>10}{'p90/p10':>8}{'raw ms':>10}{'corr ms':>10}{'raw/truth':>10}"
             f"{'corr/truth':>11}{'removed ms':>11}{'events':>8}"]
    raw_r, cor_r = [], []
    for s in [*res["stages"], {"stage": "STEP (run)", **res["step"], "removed_s": None, "events_per_step":
                              res["events_per_step"]}]:
        rr, cr = _ratio(s["raw_s"], s["truth_s"]), _ratio(s["corrected_s"], s["truth_s"])
        if s["stage"] != "STEP (run)":
            raw_r.append(rr)
            cor_r.append(cr)
        lines.append(f"{s['stage'][:23]:<24}{_fmt(s['truth_s']):>10}{_fmt(s['truth_spread'], 1, 2):>8}"
                     f"{_fmt(s['raw_s']):>10}{_fmt(s['corrected_s']):>10}{_fmt(rr, 1, 2):>10}{_fmt(cr, 1, 2):>11}"
                     f"{_fmt(s['removed_s']):>11}{_fmt(s['events_per_step'], 1, 0):>8}")
    lines.append(f"{'':<24}(step truth: the plain step, no hooks; with stage hooks {_fmt(res['stage_timed_step_s'])} ms;"
                 f" the op pass's own step timer {_fmt(res['op_pass_step_s'])} ms)")
    res["typical_error"] = {"raw": _gm_abs_log(raw_r), "corrected": _gm_abs_log(cor_r)}
    closer = sum(1 for r, c in zip(raw_r, cor_r, strict=True) if r and c and abs(math.log(c)) < abs(math.log(r)))
    lines.append(f"typical stage error (exp mean |ln ratio| - 1): raw {_fmt(res['typical_error']['raw'], 100, 1)}%, "
                 f"corrected {_fmt(res['typical_error']['corrected'], 100, 1)}%; corrected closer on {closer} of "
                 f"{len(raw_r)} stages" + (f"; stages only in the trace: {res['only_in_trace']}"
                                          if res["only_in_trace"] else ""))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="zoo ids, comma-separated")
    ap.add_argument("--scale", type=float, default=0.01, help="zoo table scale")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=40, help="steps timed without and with the profiler")
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = ap.parse_args(argv)
    os.environ.setdefault("RECSTACK_PROGRESS", "never")
    load = os.getloadavg()[0]
    print(f"host: {os.cpu_count()} CPUs, load average {load:.2f} at the start"
          + ("  (busy: the truth and the trace are both slowed; rerun on a quiet host)" if load > 0.5 else ""))
    t0 = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="recstack-overhead-") as d:
        for model in [m for m in args.models.split(",") if m]:
            res = measure(model, args.scale, args.batch, args.iters, Path(d))
            print("\n".join(report(res)), flush=True)
            results.append(res)
    print(f"\n{time.perf_counter() - t0:.0f} s in all; load average {os.getloadavg()[0]:.2f} at the end")
    if args.json:
        args.json.write_text(json.dumps({"load_start": load, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
