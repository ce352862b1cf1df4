"""``recstack compile --recommend``: search compile configs within a time budget; propose the best measured one.

Candidates (most promising first, until the budget is spent): per-stage regional compilation (one
region per forward stage root) and whole-model compilation, each under the dynamic-shape policies
:data:`POLICIES`. Each candidate is applied in place to one model (``torch._dynamo.reset()`` between
candidates), checked for numerics against the eager reference, timed per stage against eager, and run
over the workload's batch sizes for recompiles and silent fallbacks. Eligible: numerics within
tolerance, no fallback, at most :data:`MAX_RECOMPILES_PER_REGION` recompiles per compiled region. The proposal keeps, per stage, the
policy with the best measured stage speedup above :data:`MIN_GAIN` (regions that lose stay eager),
verifies that composite, and takes it or the best eligible candidate, whichever has the higher
measured run speedup; that winner is measured once more (fresh alternating rounds against eager) and
kept only if it still gains, since the best of many noisy measurements is biased upwards; when nothing
beats eager the config compiles nothing. The settings given with
``--compile`` (e.g. ``backend``) are the base of every candidate. Each result goes to ``on_result``
as it is measured (``recstack compile --recommend --store`` writes it to the results store's
``compile`` table: :mod:`recstack.compilation.store`), and all of them are in the returned JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from recstack.compilation import numerics
from recstack.compilation.apply import CompiledRun
from recstack.compilation.config import CompileConfig, Settings, load_compile_config
from recstack.compilation.model import Loader, load_zoo
from recstack.compilation.session import (
    default_batch_sizes,
    prepare,
    stage_table,
    timed,
    timed_pair,
    visible_roots,
)
from recstack.config.run import RunConfig

POLICIES: dict[str, dict[str, Any]] = {
    "dynamic-auto": {"dynamic": "auto"},
    "unbacked-batch": {"dims": [{"arg": "*", "dim": 0, "how": "unbacked"}]},
    "maybe-dynamic-batch": {"dims": [{"arg": "*", "dim": 0, "how": "maybe_mark_dynamic"}]},
    "dynamic-true": {"dynamic": True},
    "static": {"dynamic": False},
}
MAX_RECOMPILES_PER_REGION = 3  # automatic dynamic (1) + the batch-1 graph (1) + one more
MIN_GAIN = 1.02  # a stage must be measured at least 2% faster compiled to be kept compiled
FORWARD = ("feature_processing", "embedding", "dense", "interaction", "sequence", "head")


def _config(base: Settings, policy: dict[str, Any], regions: dict[str, dict[str, Any]] | None) -> CompileConfig:
    defaults = {**base.model_dump(exclude_none=True, mode="json"), **policy}
    if regions is None:
        return CompileConfig.model_validate({"defaults": defaults})
    return CompileConfig.model_validate({"defaults": base.model_dump(exclude_none=True, mode="json"),
                                         "rules": [{"match": p, **pol} for p, pol in regions.items()]})


def _evaluate(setup: Any, eager: dict, ccfg: CompileConfig, sizes: list[int], iters: int) -> dict:
    t0 = time.perf_counter()
    torch._dynamo.reset()
    # Identical batches as new tensors: dynamic-dim marks (mark_dynamic, mark_unbacked) of an earlier
    # candidate stay on the tensors it saw and would make this candidate's graphs dynamic too.
    setup.batches = setup.loaded.make_batches(setup.cfg.batch_size, len(setup.batches))
    # The eager reference on the weights as they are now: train steps of earlier candidates updated them.
    ref = numerics.capture(setup.step, setup.batches[:2])
    run = CompiledRun.start(setup.loaded.model, setup.step, setup.found, ccfg, source="recommend")
    try:
        got = run.guarded(lambda: numerics.capture(setup.step, setup.batches[:2]))
        run.warm(setup.batches, max(setup.cfg.warmup, 2))
        roots, hidden = visible_roots(setup.found.roots, run.plan)
        eager_now, comp = timed_pair(setup, run, roots, iters)  # eager beside each candidate, alternating
        for bs in sizes:
            for b in setup.loaded.make_batches(bs, 1):
                run.run_step(b)
    finally:
        run.compiled.deactivate()
        run.finish()
    summary = run.summary()
    nums = numerics.compare(ref, got, setup.cfg.dtype)
    stages = stage_table(eager_now, comp, hidden, eager)
    out = {"stages": stages, "speedup": stages["run"]["speedup"], "graphs": len(summary["graphs"]),
           "recompiles": len(summary["recompiles"]),
           "graph_breaks": len(summary["graph_breaks"]), "fallbacks": summary["fallbacks"],
           "hazards": summary["hazards"], "numerics_ok": nums["ok"], "max_abs_err": nums["max_abs_err"],
           "recompile_guards": [{"region": r["region"], "guard": r["guard"]} for r in summary["recompiles"]][:20],
           "batch_one_specialised": summary["batch_one_specialised"]}
    bound = MAX_RECOMPILES_PER_REGION * max(1, len(summary["compile"]["regions"]))
    why = [w for w, bad in (("numerics past tolerance", not nums["ok"]), ("silent fallback", bool(summary["fallbacks"])),
                            (f"more than {bound} recompiles", out["recompiles"] > bound)) if bad]
    out["eligible"], out["why"] = not why, "; ".join(why) or None
    out["config"] = ccfg.model_dump(mode="json", exclude_none=True)
    out["batch_sizes"], out["eval_s"] = sizes, time.perf_counter() - t0
    return out


# on_result(kind, result): kind is "candidate", "composite" or "chosen"
OnResult = Callable[[str, dict[str, Any]], None]


def recommend(cfg: RunConfig, *, budget_s: float, batch_sizes: list[int] | None = None,
              loader: Loader = load_zoo, on_result: OnResult | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    emit = on_result or (lambda _kind, _res: None)
    base = load_compile_config(cfg.compile).defaults if cfg.compile is not None else Settings()
    setup = prepare(cfg, loader)
    iters = cfg.iters
    sizes = batch_sizes if batch_sizes is not None else default_batch_sizes(setup.loaded)
    eager = timed(setup, setup.found.roots, iters)
    stage_roots = {p: s for p, s in setup.found.roots.items() if s in FORWARD}
    plan: list[tuple[str, str, CompileConfig]] = []
    for pname, pol in POLICIES.items():
        plan.append((f"per-stage/{pname}", pname, _config(base, {}, {p: pol for p in stage_roots})))
        plan.append((f"whole-model/{pname}", pname, _config(base, pol, None)))
    candidates: list[dict[str, Any]] = []
    for name, pname, ccfg in plan:
        spent = time.perf_counter() - t0
        if candidates and spent + spent / (len(candidates) + 1) > budget_s:
            break
        res = _evaluate(setup, eager, ccfg, sizes, iters)
        candidates.append({"name": name, "policy": pname, **res})
        emit("candidate", candidates[-1])
    chosen_cfg, chosen = _choose(setup, eager, base, stage_roots, candidates, sizes, iters, emit)
    chosen_cfg, chosen = _verify(setup, eager, base, chosen_cfg, chosen, sizes, iters, emit)
    emit("chosen", {**chosen, "config": chosen_cfg.model_dump(mode="json", exclude_none=True)})
    return {
        "model": setup.loaded.name, "mode": cfg.mode, "batch_sizes": sizes, "budget_s": budget_s,
        "eager_stages": eager, "stage_roots": stage_roots, "candidates": candidates, "chosen": chosen["name"], "chosen_result": chosen,
        "config": chosen_cfg.model_dump(mode="json", exclude_none=True), "config_yaml": chosen_cfg.to_yaml(),
        "elapsed_s": time.perf_counter() - t0,
        "provenance": "measured: eager and compiled timing passes on identical batches (medians), speedup = "
                      "eager_s / compiled_s",
    }


def _eager_config(base: Settings) -> CompileConfig:
    return CompileConfig.model_validate({"defaults": {**base.model_dump(exclude_none=True, mode="json"),
                                                      "enabled": False}})


def holds_up(check: dict[str, Any]) -> bool:
    """Whether a re-measured winner is still worth compiling: eligible and at least :data:`MIN_GAIN`."""
    return bool(check["eligible"]) and (check["speedup"] or 0) >= MIN_GAIN


def _verify(setup: Any, eager: dict, base: Settings, ccfg: CompileConfig, chosen: dict, sizes: list[int],
            iters: int, emit: OnResult) -> tuple[CompileConfig, dict]:
    """Measure the winner again, in fresh alternating rounds against eager, and keep it only if it still
    gains :data:`MIN_GAIN`: the best of many noisy candidates is biased upwards (the winner's curse), an
    independent re-measure is not. A winner that does not hold up gives way to eager."""
    if chosen.get("policy") is None:
        return ccfg, chosen
    check = _evaluate(setup, eager, ccfg, sizes, iters)
    emit("verify", {"name": f"verify: {chosen['name']}", "policy": chosen.get("policy"), **check})
    searched = chosen["speedup"]
    if holds_up(check):
        return ccfg, {**chosen, "search_speedup": searched, "speedup": check["speedup"], "stages": check["stages"]}
    return _eager_config(base), {
        "name": f"eager ({chosen['name']} measured {searched:.2f}x in the search, {check['speedup']:.2f}x "
                "when measured again)", "policy": None, "speedup": 1.0, "eligible": True,
        "rejected": chosen["name"], "search_speedup": searched, "verify_speedup": check["speedup"]}


def _choose(setup: Any, eager: dict, base: Settings, stage_roots: dict[str, str], candidates: list[dict[str, Any]],
            sizes: list[int], iters: int, emit: OnResult) -> tuple[CompileConfig, dict]:
    """Per stage the best eligible policy that gains; the composite verified; else the best whole model."""
    keep: dict[str, tuple[float, str]] = {}
    for c in candidates:
        if not c["name"].startswith("per-stage/") or not c["eligible"]:
            continue
        for path, stage in stage_roots.items():
            sp = (c["stages"].get(stage) or {}).get("speedup")
            if sp is not None and sp >= MIN_GAIN and sp > keep.get(path, (0.0, ""))[0]:
                keep[path] = (sp, c["policy"])
    options: list[tuple[CompileConfig, dict]] = []
    if keep:
        composite = _config(base, {}, {p: POLICIES[pol] for p, (_sp, pol) in keep.items()})
        res = _evaluate(setup, eager, composite, sizes, iters)
        options.append((composite, {"name": "per-stage/composite: " + ", ".join(
            f"{p}={pol}" for p, (_s, pol) in keep.items()), "policy": "per-stage", **res}))
        emit("composite", options[-1][1])
    for c in candidates:  # each eligible candidate as measured is an option too
        if c["eligible"] and c["name"].startswith("whole-model/"):
            options.append((_config(base, POLICIES[c["policy"]], None), c))
        elif c["eligible"] and c["name"].startswith("per-stage/"):
            options.append((_config(base, {}, {p: POLICIES[c["policy"]] for p in stage_roots}), c))
    options = [o for o in options if o[1]["eligible"] and (o[1]["speedup"] or 0) >= MIN_GAIN]
    if not options:
        return _eager_config(base), {"name": "eager (no candidate beat eager)", "policy": None, "speedup": 1.0, "eligible": True}
    return max(options, key=lambda o: o[1]["speedup"] or 0)


__all__ = ["MAX_RECOMPILES_PER_REGION", "POLICIES", "OnResult", "recommend"]
