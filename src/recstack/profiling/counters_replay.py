"""Hardware counters of a profiled model, stage by stage, by replaying each stage's recorded calls.

:func:`measure_stages` runs one step with hooks on the stage roots to record
the inputs of their outermost calls, then counts, per forward stage, N
replays of those calls in one perf session (:mod:`recstack.hardware.counters`,
which knows nothing of models). :func:`counters_for_profile` does this for a
profiled model and stores the result on its Profile: ``extra["counters"]``
(:func:`summarise_counters`) and each stage node's ``extra["counters"]``
(:func:`recstack.analysis.pipeline.stage_counters`, the ``counters``
analysis step, which derives the nodes' figures from the stored summary).

Limits: a replayed stage finds its weights warmer in cache than in the full
step; a stage root nested in another stage's root is counted in both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from recstack.analysis.pipeline import stage_counters
from recstack.hardware.counters import METHOD, PerfStatus, detect_perf, measure_counters, unusable_reason
from recstack.tree import Profile


def capture_stage_calls(
    model: Any, step: Callable[[], Any], roots: dict[str, str]
) -> dict[str, list[tuple[Any, tuple, dict]]]:
    """Run ``step()`` once and record every outermost call of each stage root: (module, args, kwargs)."""
    mods = dict(model.named_modules())
    missing = [p for p in roots if p not in mods]
    if missing:
        raise ValueError(f"stage roots not in the model: {', '.join(missing)}")
    calls: dict[str, list[tuple[Any, tuple, dict]]] = {s: [] for s in roots.values()}
    depth = {s: 0 for s in roots.values()}
    handles = []
    for path, stage in roots.items():

        def pre(m: Any, args: tuple, kwargs: dict, _s: str = stage) -> None:
            if depth[_s] == 0:
                calls[_s].append((m, args, kwargs))
            depth[_s] += 1

        def post(_m: Any, _a: tuple, _k: dict, _o: Any, _s: str = stage) -> None:
            depth[_s] -= 1

        handles.append(mods[path].register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mods[path].register_forward_hook(post, with_kwargs=True, always_call=True))
    try:
        step()
    finally:
        for h in handles:
            h.remove()
    return calls


def measure_stages(
    model: Any,
    step: Callable[[], Any],
    roots: dict[str, str],
    repeats: int = 10,
    *,
    warmup: int = 1,
    events: list[str] | None = None,
    status: PerfStatus | None = None,
    context: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Counters per forward stage; ``roots`` maps module paths (stage roots) to stage names.

    One ``step()`` records the inputs of every stage root (outermost calls);
    then, per stage, one perf session counts ``repeats`` replays of that
    stage's root calls on those inputs (under ``context()``, default
    ``torch.inference_mode()``) with no toggling inside the region.
    Limits: a replayed stage finds its weights warmer in cache than in the
    full step; a stage root nested in another stage's root is counted in
    both. Returns ``{"available": False, "reason"}`` or
    ``{"available": True, "method", "perf", "stages": {stage: derived + roots}}``.
    """
    st = status or detect_perf()
    why = unusable_reason(st, events)
    if why is not None:
        return {"available": False, "reason": why}
    for _ in range(warmup):
        step()
    calls = capture_stage_calls(model, step, roots)
    if context is None:
        context = torch.inference_mode
    stages: dict[str, Any] = {}
    for stage in sorted(calls):
        recorded = calls[stage]
        if not recorded:
            stages[stage] = {"available": False, "reason": "stage root was not called during the step"}
            continue

        def replay(_rec: list[tuple[Any, tuple, dict]] = recorded) -> None:
            with context():
                for mod, args, kwargs in _rec:
                    mod(*args, **kwargs)

        res = measure_counters(replay, repeats, warmup=warmup, events=events, status=st)
        if not res.get("available"):
            return {"available": False, "reason": res.get("reason", "perf session failed")}
        res.pop("available")
        stages[stage] = {
            "roots": [p for p, s in roots.items() if s == stage],
            "root_calls_per_step": len(recorded),
            **{k: v for k, v in res.items() if k not in ("method", "perf")},
        }
    return {
        "available": True,
        "method": METHOD + "; per stage: replays of the stage roots on inputs recorded from one step",
        "perf": st.version,
        "stages": stages,
    }


def summarise_counters(counters: dict[str, Any]) -> dict[str, Any]:
    """The ``profile.counters`` form of a :func:`measure_stages` result.

    ``available`` and ``reason``, or ``method``/``perf`` and ``stages``: per
    stage, per-step cycles, instructions and cache misses (one replay of the
    stage = one step), IPC, misses per 1000 instructions, top-down level 1 and
    whether perf multiplexed; or ``{"available": False, "reason"}``.
    """
    top = {k: v for k, v in counters.items() if k != "stages"}
    if not counters.get("available"):
        return top
    summary: dict[str, Any] = {}
    for stage, c in counters.get("stages", {}).items():
        if c.get("available") is False:
            summary[stage] = {"available": False, "reason": c.get("reason")}
            continue
        calls = max(1, int(c.get("calls") or 1))
        compact = {
            k: (c[k] / calls if c.get(k) is not None else None)
            for k in ("cycles", "instructions", "cache_misses")
        }
        compact.update(
            ipc=c.get("ipc"),
            cache_misses_per_kinstr=c.get("cache_misses_per_kinstr"),
            topdown=c.get("topdown"),
            multiplexed=c.get("multiplexed"),
        )
        summary[stage] = compact
    top["stages"] = summary
    return top


def attach_counters(profile: Profile, counters: dict[str, Any]) -> None:
    """Store a :func:`measure_stages` result on a Profile: ``profile.counters``
    (:func:`summarise_counters`) and each stage node's ``extra["counters"]``
    (:func:`recstack.analysis.pipeline.stage_counters`)."""
    profile.counters = summarise_counters(counters)
    stage_counters(profile)


def counters_for_profile(
    profile: Profile,
    model: nn.Module,
    step: Callable[[], Any],
    repeats: int = 10,
    *,
    events: list[str] | None = None,
    status: PerfStatus | None = None,
) -> dict[str, Any]:
    """Measure per-stage counters for a profiled model and attach them (:func:`attach_counters`).

    The stage roots come from ``profile.run["stage_roots"]`` (module path ->
    ``{"stage": ...}``, as the profiler records them); ``step()`` runs one
    forward step of ``model`` on a pre-generated batch. Returns what was
    attached: ``{"available": False, "reason"}`` where counters are unavailable.
    """
    roots = {p: v["stage"] for p, v in (profile.run.get("stage_roots") or {}).items() if v.get("stage")}
    if not roots:
        result: dict[str, Any] = {"available": False, "reason": "the profile records no stage roots"}
    else:
        result = measure_stages(model, step, roots, repeats, events=events, status=status)
    attach_counters(profile, result)
    return result
