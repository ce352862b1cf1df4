"""The sharing analysis: request-only share of every stage, and what a shared execution saves.

:func:`analyse_sharing` runs a model on one request-aware batch (R requests x C
candidates) and returns a JSON-ready dict (the ``recstack share --json``
document):

* ``share_by_stage``: per stage and op class (request / candidate / mixed /
  constant), the cost model's FLOPs and bytes (one batched forward) and the
  ops' wall time under the provenance mode (the fastest of three passes); ``request_only_share`` sums the
  request class over all stages (time: op time under the mode, a proportion);
* ``stages``: per stage, the measured batched and shared time (fastest of the
  interleaved iterations, stage-root hooks), the saving, and the FLOPs and
  bytes saved per request (cost model: batched minus shared trace, over R);
* ``speedup``: batched over shared end-to-end time (the shared time includes
  the deduplication and the expansions); ``speedup_without_dedupe`` leaves the
  deduplication's time out (a server receiving request features once);
* ``curve``: the saving as C grows, by the stated formula
  ``saved(C) = (1 - 1/C) * request_only_share`` (request-only work scales with
  requests, the rest with candidates; expansion costs left out), and the
  speedup bound ``1 / (1 - saved(C))``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
from torch import nn

from recstack.profiling.dataflow import try_trace_stages
from recstack.profiling.rules import StageRules, detect_stages
from recstack.schema.documents import check
from recstack.schema.share_model import ShareResult
from recstack.sharing.execute import (
    ATOL,
    DEDUPE,
    RTOL,
    SharedRunner,
    Sides,
    StageClock,
    outputs_agree,
    time_executions,
    trace_batched,
    trace_shared,
)
from recstack.sharing.provenance import CLASSES, SharingStops, Totals, Trace
from recstack.workload.batch import RawBatch

CURVE_CANDIDATES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
OP_PASSES = 3
TIME_BASIS = ("op wall time under the provenance mode, fastest of {passes} pass(es) per module and class "
              "(dispatch overhead included; a proportion)")


def keep_fastest(trace: Trace, other: Trace) -> None:
    """Keep, per module and op class, the faster of two passes' op time (interference only adds time)."""
    for path, by in other.by_module.items():
        for cls, t in by.items():
            mine = trace.by_module[path][cls]
            mine.time_s = min(mine.time_s, t.time_s)


def stage_totals(trace: Trace, stage_of: dict[str, str]) -> dict[str, dict[str, Totals]]:
    """The trace's per-module sums regrouped per stage and op class."""
    out: dict[str, dict[str, Totals]] = defaultdict(lambda: defaultdict(Totals))
    for path, classes in trace.by_module.items():
        stage = DEDUPE if path == DEDUPE else stage_of.get(path) or "other"
        for cls, t in classes.items():
            acc = out[stage][cls]
            acc.flops += t.flops
            acc.bytes += t.bytes
            acc.time_s += t.time_s
            acc.ops += t.ops
    return out


def request_only_modules(trace: Trace) -> list[str]:
    """Outermost modules all of whose ops (descendants included) compute only from request-side inputs."""
    classes: dict[str, set[str]] = defaultdict(set)
    for path, by_cls in trace.by_module.items():
        if path == DEDUPE:
            continue
        parts = path.split(".") if path else []
        for i in range(len(parts) + 1):
            classes[".".join(parts[:i])].update(by_cls)
    only = sorted(p for p, c in classes.items() if p and "request" in c and c <= {"request", "constant"})
    return [p for p in only if not any(p.startswith(q + ".") for q in only)]


def _share(stages: dict[str, dict[str, Totals]], attr: str) -> float:
    total = sum(getattr(t, attr) for by in stages.values() for t in by.values())
    req = sum(getattr(by["request"], attr) for by in stages.values() if "request" in by)
    return req / total if total > 0 else 0.0


def curve(share_flops: float, share_time: float) -> list[dict[str, float]]:
    """Saving as the candidates per request grow, by ``saved(C) = (1 - 1/C) * request_only_share``."""
    pts = []
    for c in CURVE_CANDIDATES:
        f = (1 - 1 / c) * share_flops
        t = (1 - 1 / c) * share_time
        pts.append({"candidates": c, "flops_saved_share": f, "time_saved_share": t,
                    "speedup_bound": 1 / (1 - t) if t < 1 else None})
    return pts


def analyse_sharing(
    model: nn.Module,
    batch: RawBatch,
    sides: Sides,
    *,
    iters: int = 5,
    warmup: int = 1,
    rules: StageRules | None = None,
    op_passes: int = OP_PASSES,
) -> dict[str, Any]:
    """Batched against shared execution of ``model`` on ``batch`` (module docstring); a JSON-ready dict
    (:class:`recstack.schema.share_model.ShareResult`).

    ``op_passes``: provenance passes whose fastest op times give the time shares.
    """
    sizes = batch.request_sizes
    if sizes is None:
        raise SharingStops("the batch has no request_sizes: build it with recstack.workload.request_batch")
    requests, rows = int(sizes.numel()), int(sizes.sum())
    model.eval()
    trace, batched_out = trace_batched(model, batch, sides)
    for _ in range(op_passes - 1):
        keep_fastest(trace, trace_batched(model, batch, sides)[0])
    smap = detect_stages(model, rules, trace.call_order, try_trace_stages(model, model, batch))
    stage_of = {p: pl.stage for p, pl in smap.placements.items() if pl.stage}
    roots = {p: smap.placements[p].stage for p in smap.roots if smap.placements[p].stage}
    batched_stages = stage_totals(trace, stage_of)

    status, reason, plan, shared_stages, shared_out = "shared", "", None, None, None
    if not sides.any:
        status, reason = "none", "the model has no request-side inputs: nothing to share"
    else:
        try:
            s_trace, plan, shared_out = trace_shared(model, batch, sides, trace.mixers)
            shared_stages = stage_totals(s_trace, stage_of)
        except SharingStops as exc:
            status, reason = "stopped", str(exc)
    runs = {"batched": lambda: model(batch)}
    extra = {}
    clock = StageClock(model, roots)  # first, so that the plan's expansions count in their stage
    runner = SharedRunner(model, sides, plan) if plan is not None else None
    if runner is not None:
        runs["shared"] = lambda: runner(batch)
        extra["shared"] = lambda: runner.dedupe_s
        runner.install()
    try:
        timing = time_executions(runs, clock, iters=iters, warmup=warmup, extra=extra)
    finally:
        clock.remove()
        if runner is not None:
            runner.remove()
    b = timing["batched"]
    s = timing.get("shared", b)  # no shared execution: it is the batched one
    equal, diff = (True, 0.0)
    if plan is not None:
        eq_trace, d_trace = outputs_agree(shared_out, batched_out)
        eq_run, d_run = outputs_agree(s.outputs, b.outputs)
        equal, diff = eq_trace and eq_run, max(d_trace, d_run)
    stage_names = [st for st in dict.fromkeys([*roots.values(), "other", *(k for t in s.stages for k in t)])]
    stages: dict[str, dict[str, float]] = {}
    for st in stage_names:
        bs, ss = b.best_stage(st), s.best_stage(st)
        bf = sum(t.flops for t in batched_stages.get(st, {}).values())
        bb = sum(t.bytes for t in batched_stages.get(st, {}).values())
        sf = sum(t.flops for t in (shared_stages or batched_stages).get(st, {}).values())
        sb = sum(t.bytes for t in (shared_stages or batched_stages).get(st, {}).values())
        stages[st] = {"batched_s": bs, "shared_s": ss, "saved_s": bs - ss,
                      "flops_saved_per_request": (bf - sf) / requests, "bytes_saved_per_request": (bb - sb) / requests}
    share_flops, share_time = _share(batched_stages, "flops"), _share(batched_stages, "time_s")
    total_b, total_s = b.best_total(), s.best_total()
    dedupe = s.best_stage(DEDUPE) if plan is not None else 0.0
    return check(ShareResult, {
        "model": type(model).__name__,
        "requests": requests,
        "candidates": rows // requests if rows % requests == 0 else rows / requests,
        "rows": rows,
        "request_inputs": sorted(sides.request_features) + (["<dense>"] if sides.dense_request else []),
        "sharing": {"status": status, "reason": reason},
        "tolerance": {"rtol": RTOL, "atol": ATOL},
        "outputs_equal": equal,
        "max_abs_diff": diff if diff != float("inf") else None,
        "request_only_share": {"flops": share_flops, "bytes": _share(batched_stages, "bytes"), "time": share_time,
                               "time_basis": TIME_BASIS.format(passes=op_passes)},
        "share_by_stage": {
            st: {cls: {"flops": t.flops, "bytes": t.bytes, "time_s": t.time_s, "ops": t.ops}
                 for cls in CLASSES if (t := by.get(cls)) is not None}
            for st, by in batched_stages.items()
        },
        "request_only_modules": (only := request_only_modules(trace)),
        # Request-only by provenance, but inside a module whose inputs are expanded: run per candidate.
        "unshared_request_modules": [p for p in only if plan is not None
                                     and any(p.startswith(m + ".") for m in plan.expansions)],
        "mixers": list(trace.mixers),
        "expansions": sorted(plan.expansions) if plan is not None else [],
        "stages": stages,
        "total": {"batched_s": total_b, "shared_s": total_s, "saved_s": total_b - total_s,
                  "saved_share": (total_b - total_s) / total_b if total_b > 0 else 0.0},
        "speedup": total_b / total_s if total_s > 0 else 1.0,
        # A server that receives each request's features once skips the deduplication.
        "speedup_without_dedupe": total_b / (total_s - dedupe) if total_s - dedupe > 0 else 1.0,
        "curve": curve(share_flops, share_time),
        "timing": {"iters": iters, "warmup": warmup, "statistic": "fastest of the interleaved iterations (per stage and end to end)",
                   "threads": torch.get_num_threads(), "batched_totals_s": b.totals, "shared_totals_s": s.totals},
    })


__all__ = ["CURVE_CANDIDATES", "analyse_sharing", "curve", "request_only_modules", "stage_totals"]
