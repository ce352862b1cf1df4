"""``recstack compile --recommend``: search compile configs within a time budget; propose the best measured one.

Candidates (most promising first, until the budget is spent): per-stage regional compilation (one
region per forward stage root) and whole-model compilation, each under the dynamic-shape policies
:data:`POLICIES`. Each candidate is applied in place to one model (``torch._dynamo.reset()`` between
candidates), checked for numerics against the eager reference, timed per stage against eager, and run
over the workload's batch sizes for recompiles and silent fallbacks. Eligible: numerics within
tolerance, no fallback, at most :data:`MAX_RECOMPILES_PER_REGION` recompiles per compiled region.
Regions that lose fall back: each stage's gain threshold is :data:`MIN_GAIN` or, where two eager arms
measured before the search differed by more, 1 + that deviation; the proposal composes, per stage, the
best eligible policy past its threshold, measures the composite, drops the regions whose stage does not
pass its threshold in it and measures the rest again (:func:`_prune`). The pruned composite or the best
eligible whole-model candidate, whichever has the higher measured run speedup, is measured once more
(a composite through the same pruning) and kept only if it still gains, since the best of many noisy
measurements is biased upwards; when nothing beats eager the config compiles nothing. In inference
with inductor, freezing (``options: {freezing: true}``) is tried too (:func:`policies_for`). The settings given with
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
    noise_table,
    prepare,
    stage_table,
    timed,
    timed_pair,
    timed_rounds,
    visible_roots,
)
from recstack.config.run import RunConfig
from recstack.noise import twin_floor

POLICIES: dict[str, dict[str, Any]] = {
    "dynamic-auto": {"dynamic": "auto"},
    "unbacked-batch": {"dims": [{"arg": "*", "dim": 0, "how": "unbacked"}]},
    "maybe-dynamic-batch": {"dims": [{"arg": "*", "dim": 0, "how": "maybe_mark_dynamic"}]},
    "dynamic-true": {"dynamic": True},
    "static": {"dynamic": False},
}
MAX_RECOMPILES_PER_REGION = 3  # automatic dynamic (1) + the batch-1 graph (1) + one more
MIN_GAIN = 1.02  # a stage must be measured at least 2% faster compiled to be kept compiled
FREEZING = {"freezing": True}  # inductor: weights as constants, prepacked for oneDNN (inference only)


def policies_for(mode: str, base: Settings) -> dict[str, dict[str, Any]]:
    """The candidates' settings by name, in the order tried: :data:`POLICIES`, and in inference with
    inductor (no ``mode`` or ``options`` given) each of the first two also with freezing, tried just
    before it (on CPU, freezing lets inductor fold and prepack the weights for oneDNN's GEMMs, which
    eager cannot: the candidate most likely to gain in inference comes first within a short budget)."""
    if mode == "train" or (base.backend or "inductor") != "inductor" or base.mode or base.options:
        return dict(POLICIES)
    out: dict[str, dict[str, Any]] = {}
    for i, (name, pol) in enumerate(POLICIES.items()):
        if i < 2:
            out[f"{name}+freezing"] = {**pol, "options": FREEZING}
        out[name] = pol
    return out
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
    arms = timed_rounds(setup, None, setup.found.roots, iters, ("eager", "eager2"))  # the gain thresholds
    noise = noise_table(arms["eager"], arms["eager2"])
    thresholds = gain_thresholds(noise)
    stage_roots = {p: s for p, s in setup.found.roots.items() if s in FORWARD}
    policies = policies_for(cfg.mode, base)
    plan: list[tuple[str, str, CompileConfig]] = []
    for pname, pol in policies.items():
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

    def prune(regions: dict[str, str], kind: str) -> tuple[CompileConfig, dict] | None:
        return _prune(setup, eager, base, policies, stage_roots, regions, thresholds, sizes, iters, emit, kind)

    chosen_cfg, chosen = _choose(policies, base, stage_roots, candidates, thresholds, prune)
    chosen_cfg, chosen = _verify(setup, eager, base, chosen_cfg, chosen, sizes, iters, emit, prune)
    emit("chosen", {**chosen, "config": chosen_cfg.model_dump(mode="json", exclude_none=True)})
    return {
        "model": setup.loaded.name, "mode": cfg.mode, "batch_sizes": sizes, "budget_s": budget_s,
        "eager_stages": eager, "noise_floor": noise, "gain_thresholds": thresholds, "stage_roots": stage_roots, "candidates": candidates, "chosen": chosen["name"], "chosen_result": chosen,
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


def gain_thresholds(noise: dict[str, Any] | None) -> dict[str, float]:
    """Per stage, the speedup a compiled stage must reach to count as a gain: :data:`MIN_GAIN`, or more
    where two eager arms already differed by more (1 + |eager/eager2 - 1| of that stage, measured)."""
    return {stage: twin_floor(row.get("ratio"), MIN_GAIN) for stage, row in ((noise or {}).get("stages") or {}).items()}


def winning_regions(stages: dict[str, Any], regions: dict[str, str], stage_roots: dict[str, str],
                    thresholds: dict[str, float]) -> tuple[dict[str, str], dict[str, float | None]]:
    """Split ``regions`` (path -> policy) by the stage speedups ``stages`` measured with them compiled:
    those whose stage reached its gain threshold, and those that did not (path -> the stage's speedup;
    None where the stage had no visible time). A region is kept or dropped with its stage, since the
    timing boundary is the stage."""
    keep: dict[str, str] = {}
    lost: dict[str, float | None] = {}
    for path, pol in regions.items():
        stage = stage_roots[path]
        sp = (stages.get(stage) or {}).get("speedup")
        if sp is not None and sp >= thresholds.get(stage, MIN_GAIN):
            keep[path] = pol
        else:
            lost[path] = sp
    return keep, lost


MAX_PRUNE_ROUNDS = 3  # composite measured, losers dropped, measured again: at most this many times


def _composite(base: Settings, policies: dict[str, dict[str, Any]], regions: dict[str, str]) -> CompileConfig:
    return _config(base, {}, {p: policies[pol] for p, pol in regions.items()})


def _prune(setup: Any, eager: dict, base: Settings, policies: dict[str, dict[str, Any]], stage_roots: dict[str, str],
           regions: dict[str, str], thresholds: dict[str, float], sizes: list[int], iters: int, emit: OnResult,
           kind: str) -> tuple[CompileConfig, dict] | None:
    """Measure the per-stage composite of ``regions``, drop the regions whose stage does not gain in it,
    and measure what is left again, until every compiled region gains (or none is left: None). Each
    measure is a fresh alternating run against eager, so a region kept on one lucky draw in the search
    is dropped when it loses beside the others."""
    dropped: list[dict[str, Any]] = []
    for i in range(MAX_PRUNE_ROUNDS):
        if not regions:
            return None
        ccfg = _composite(base, policies, regions)
        res = _evaluate(setup, eager, ccfg, sizes, iters)
        name = "per-stage/composite: " + ", ".join(f"{p}={pol}" for p, pol in regions.items())
        out = {"name": name, "policy": "per-stage", "round": i + 1, **res, "regions": dict(regions),
               "dropped": list(dropped)}
        emit(kind, out)
        keep, lost = winning_regions(res["stages"], regions, stage_roots, thresholds)
        if not lost:
            return ccfg, out
        dropped += [{"path": p, "stage": stage_roots[p], "speedup": sp, "round": i + 1} for p, sp in lost.items()]
        regions = keep
    return None


def _verify(setup: Any, eager: dict, base: Settings, ccfg: CompileConfig, chosen: dict, sizes: list[int],
            iters: int, emit: OnResult, prune: Callable[..., tuple[CompileConfig, dict] | None]) -> tuple[CompileConfig, dict]:
    """Measure the winner again, in fresh alternating rounds against eager, and keep it only if it still
    gains :data:`MIN_GAIN`: the best of many noisy candidates is biased upwards (the winner's curse), an
    independent re-measure is not. A per-stage composite is re-measured through :func:`_prune`, so a
    region that loses in the re-measure is dropped (and the rest measured again). A winner that does not
    hold up gives way to eager."""
    if chosen.get("policy") is None:
        return ccfg, chosen
    searched = chosen["speedup"]
    if chosen.get("regions"):
        got = prune(chosen["regions"], "verify")
        if got is None:
            return _eager_config(base), {"name": f"eager (every region of {chosen['name']} lost when measured again)",
                                         "policy": None, "speedup": 1.0, "eligible": True, "rejected": chosen["name"],
                                         "search_speedup": searched, "verify_speedup": None}
        ccfg, check = got
    else:
        check = _evaluate(setup, eager, ccfg, sizes, iters)
        emit("verify", {"name": f"verify: {chosen['name']}", "policy": chosen.get("policy"), **check})
    if holds_up(check):
        return ccfg, {**chosen, "name": check["name"] if chosen.get("regions") else chosen["name"],
                      "search_speedup": searched, "speedup": check["speedup"], "stages": check["stages"],
                      "dropped": chosen.get("dropped", []) + check.get("dropped", [])}
    return _eager_config(base), {
        "name": f"eager ({chosen['name']} measured {searched:.2f}x in the search, {check['speedup']:.2f}x "
                "when measured again)", "policy": None, "speedup": 1.0, "eligible": True,
        "rejected": chosen["name"], "search_speedup": searched, "verify_speedup": check["speedup"]}


def _choose(policies: dict[str, dict[str, Any]], base: Settings, stage_roots: dict[str, str],
            candidates: list[dict[str, Any]], thresholds: dict[str, float],
            prune: Callable[..., tuple[CompileConfig, dict] | None]) -> tuple[CompileConfig, dict]:
    """Per stage the best eligible policy that gains beyond its threshold, composed and pruned (regions
    that lose in the composite are dropped); or the best eligible whole-model candidate. A per-stage
    candidate as searched (every stage compiled) is no option: it compiles the stages that lose too."""
    keep: dict[str, tuple[float, str]] = {}
    for c in candidates:
        if not c["name"].startswith("per-stage/") or not c["eligible"]:
            continue
        for path, stage in stage_roots.items():
            sp = (c["stages"].get(stage) or {}).get("speedup")
            if sp is not None and sp >= thresholds.get(stage, MIN_GAIN) and sp > keep.get(path, (0.0, ""))[0]:
                keep[path] = (sp, c["policy"])
    options: list[tuple[CompileConfig, dict]] = []
    if keep:
        regions = {p: pol for p, (_sp, pol) in keep.items()}
        got = prune(regions, "composite")
        if got is not None:
            ccfg, res = got
            options.append((ccfg, res))
    for c in candidates:  # an eligible whole-model candidate as measured is an option too
        if c["eligible"] and c["name"].startswith("whole-model/"):
            options.append((_config(base, policies[c["policy"]], None), c))
    options = [o for o in options if holds_up(o[1])]
    if not options:
        return _eager_config(base), {"name": "eager (no candidate beat eager)", "policy": None, "speedup": 1.0, "eligible": True}
    return max(options, key=lambda o: o[1]["speedup"] or 0)


__all__ = ["MAX_RECOMPILES_PER_REGION", "POLICIES", "OnResult", "gain_thresholds", "policies_for", "recommend",
           "winning_regions"]
