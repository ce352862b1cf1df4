"""``recstack.advise``: measured what-ifs for each bottleneck of a model, ranked, combined, applied.

Profile (or read ``from_profile``), list the levers the stages suggest (:mod:`.levers`), measure each against the
baseline in alternating rounds in this process (:mod:`.measure`), measure the non-conflicting winners
together (:mod:`.combine`), rank, and write the RunConfig of the winner (:func:`write_apply`). docs/advise.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from recstack.advisor.levers import KINDS, Lever, NotTried, candidates, stages_of
from recstack.config.run import RunConfig
from recstack.errors import ConfigError, ContendedRunError
from recstack.units import ratio

GOALS = ("throughput", "latency", "p99")
DEFAULT_TOLERANCE = 1e-2
DEFAULT_ROUNDS = 10
DEFAULT_ITERS = 40  # timed steps per arm in all, split over the rounds


def advise(model: str | None = None, config: RunConfig | None = None, *, goal: str = "throughput",
           levers: list[str] | None = None, budget_min: float | None = None, tolerance: float = DEFAULT_TOLERANCE,
           from_profile: str | Path | None = None, strict: bool = False, rounds: int = DEFAULT_ROUNDS,
           advise_iters: int = DEFAULT_ITERS, **overrides: Any) -> dict[str, Any]:
    """Measured advice for a zoo model or ``package.module:factory``: the ``recstack.advice`` document (a
    dict, validated by :class:`recstack.schema.advice_model.AdviceDocument`). ``overrides``: RunConfig fields;
    ``advise_iters``: timed steps per arm over ``rounds`` alternating rounds (RunConfig's ``iters`` is the profile's)."""
    start = time.perf_counter()
    _check_options(goal, levers, budget_min, tolerance, rounds, advise_iters)
    cfg = _run_config(model, config, overrides)
    prof = _profile(cfg, from_profile)
    contended, evidence = _profile_contention(prof, strict)
    cands, skipped = candidates(prof, cfg, goal="latency" if goal == "p99" else goal, factory=_factory(cfg),
                                kinds=set(levers) if levers else None)
    notes: list[str] = []
    if goal == "p99":
        notes.append("goal p99 is not implemented yet (it needs the serving search under load per what-if); "
                     "advised for latency (median step time) instead")
    if contended:
        notes.append("the profile was contended (other processes took CPU): the measurements may be too; "
                     "re-run on a quiet host, or with --strict to refuse advice then")
    # Under --budget, what-ifs are built only in the first half of it (the rounds and the combination need the rest).
    deadline = start + budget_min * 60 if budget_min else None
    builds_until = start + budget_min * 30 if budget_min else None
    results, used_rounds, timed, floor = _measure_all(cfg, cands, skipped, tolerance, rounds, advise_iters,
                                                      (builds_until, deadline), notes)
    if floor.pop("rounds_contended"):
        if strict:
            raise ContendedRunError("--strict: the measurement rounds were contended, so no advice is given; "
                                    "re-run on a quiet host")
        contended = True
        evidence.append("the measurement rounds were contended (notes)")
    ranking = sorted(results, key=_rank_key)
    winner = next((r for r in ranking if r["recommended"]), None)
    winner_cfg = cfg.updated(**winner["change"]) if winner else None
    doc = {
        "schema": "recstack.advice", "version": 1, "model": cfg.model, "goal": "latency" if goal == "p99" else goal,
        "baseline": cfg.model_dump(mode="json"), "stages": [s.__dict__ for s in stages_of(prof)],
        "contended": contended, "contention_evidence": evidence, "rounds": used_rounds, "iters": timed,
        "noise_floor": floor, "budget_min": budget_min, "tolerance": tolerance, "noise_rule": _rule_text(),
        "ranking": ranking, "winner": winner["name"] if winner else None,
        "winner_config": winner_cfg.model_dump(mode="json") if winner_cfg else None,
        "winner_options": winner["options"] if winner else {},
        "not_tried": [s.to_dict() for s in skipped], "notes": notes,
        "elapsed_s": round(time.perf_counter() - start, 3),
    }
    from recstack.schema.advice_model import AdviceDocument

    return AdviceDocument.model_validate(doc).model_dump(by_alias=True)


def _run_config(model: str | None, config: RunConfig | None, overrides: dict[str, Any]) -> RunConfig:
    """The baseline RunConfig, checked for what advise can measure (one CPU process, eager)."""
    if model is not None:
        overrides = {"model": model, **overrides}
    cfg = RunConfig.build(config, overrides)
    if cfg.model is None:
        raise ConfigError("give a zoo id, a model YAML or package.module:factory", field="model")
    if cfg.nproc > 1:
        raise ConfigError("advise measures one process; use --nproc 1", field="nproc")
    if cfg.compile is not None:
        raise ConfigError("advise measures an eager baseline; drop compile and ask for the compile lever with "
                          "--levers compile,...", field="compile")
    if cfg.device == "cuda":
        raise ConfigError("advise builds and times its what-ifs on the CPU for now; use --device cpu",
                          field="device")
    return cfg.updated(device="cpu")  # "auto" too: the what-ifs are timed on the CPU (docs/advise.md)


def _profile_contention(prof: Any, strict: bool) -> tuple[bool, list[str]]:
    """Whether the profile was contended, and its evidence; ``strict``: a contended profile is an error."""
    contention = prof.environment.get("contention") or {}
    contended = bool(isinstance(contention, dict) and contention.get("detected"))
    evidence = [str(e) for e in (contention.get("evidence") or [])][:3] if contended else []
    if strict and contended:
        raise ContendedRunError("--strict: the profile was contended, so no advice is given: "
                                + ("; ".join(evidence) or "see environment.contention"))
    return contended, evidence


def _check_options(goal: str, levers: list[str] | None, budget_min: float | None, tolerance: float, rounds: int,
                   iters: int) -> None:
    if goal not in GOALS:
        raise ConfigError(f"must be one of {', '.join(GOALS)} (got {goal!r})", field="--goal")
    bad = sorted(set(levers or ()) - set(KINDS))
    if bad:
        raise ConfigError(f"unknown lever kind {', '.join(bad)}; choose from {', '.join(KINDS)}", field="--levers")
    if budget_min is not None and not (isinstance(budget_min, (int, float)) and 0 < budget_min <= 24 * 60):
        raise ConfigError(f"must be minutes in (0, 1440] (got {budget_min!r})", field="--budget")
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance <= 1):
        raise ConfigError(f"must be a relative deviation in (0, 1] (got {tolerance!r})", field="--tolerance")
    if not (isinstance(rounds, int) and 2 <= rounds <= 100):
        raise ConfigError(f"must be an integer 2..100 (got {rounds!r})", field="--rounds")
    if not (isinstance(iters, int) and 2 * rounds <= iters <= 10_000):
        raise ConfigError(f"must be an integer from 2 x --rounds to 10000 (timed steps per arm; got {iters!r})",
                          field="--advise-iters")


def _profile(cfg: RunConfig, from_profile: str | Path | None) -> Any:
    from recstack.session import profile_config
    from recstack.tree import Profile

    if from_profile is None:
        return profile_config(cfg)
    path = Path(from_profile)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file; give a profile JSON written by `recstack profile -o`",
                          field="--from")
    prof = Profile.load(path)
    recorded = ((prof.run or {}).get("config") or {}).get("model") or (prof.run or {}).get("model")
    if recorded and recorded != cfg.model:
        raise ConfigError(f"{path} is a profile of {recorded}, not {cfg.model}; profile {cfg.model} first or give "
                          f"MODEL {recorded}", field="--from")
    return prof


def _factory(cfg: RunConfig) -> Any:
    from recstack.usercode import is_factory, load_factory

    return load_factory(cfg.model) if is_factory(cfg.model or "") else None


def _rule_text() -> str:
    from recstack.advisor.measure import NOISE_RULE

    return (f"recommended when the 95% bootstrap intervals of the baseline's and the what-if's median time per "
            f"sample do not overlap and the medians differ by more than {NOISE_RULE.min_change_pct:g}% "
            "(recstack diff's rule), and for levers that change the arithmetic when the output deviation is "
            "within the tolerance")


def _rank_key(r: dict[str, Any]) -> tuple[int, float]:
    return (0 if r["recommended"] else 1, -(r["step"]["speedup"] or 0.0))


# -- measuring -------------------------------------------------------------------------------
def _measure_all(cfg: RunConfig, cands: list[Lever], skipped: list[NotTried], tolerance: float, rounds: int,
                 iters: int, limits: tuple[float | None, float | None],
                 notes: list[str]) -> tuple[list[dict[str, Any]], int, int, dict[str, Any]]:
    from recstack.advisor import measure
    from recstack.advisor.combine import merged, pick

    builds_until, deadline = limits
    base = measure.build(measure.Arm("baseline", cfg), capture=True)
    again = measure.build(measure.Arm("baseline again", cfg), capture=False)  # the noise floor
    arms: list[tuple[Lever, measure.Arm]] = []
    compiled = [_compile_result(lv, cfg, deadline, skipped) for lv in cands if lv.kind == "compile"]
    cands = [lv for lv in cands if lv.kind != "compile"]
    for lever in cands:
        if builds_until is not None and time.perf_counter() > builds_until:
            skipped.append(NotTried(lever.name, lever.stage, "--budget: no time left to build and measure it"))
            notes.append(f"--budget: {lever.name} not measured (time)")
            continue
        arm = _build(lever, cfg, skipped)
        if arm is not None:
            arms.append((lever, arm))
    from recstack.hardware.contention import ContentionWatch

    watch = ContentionWatch(None, probe=False).start()  # the rounds themselves, not only the profile
    done = measure.rounds([base, again] + [a for _, a in arms], iters, rounds, deadline)
    watched = watch.stop()
    if watched.get("detected"):
        notes.append("the measurement rounds were contended: "
                     + ("; ".join(str(e) for e in watched.get("evidence", [])[:2]) or "see docs/contention.md"))
    if done < rounds:
        notes.append(f"--budget: {done} of {rounds} rounds measured")
    floor = measure.compare(base.step_samples, again.step_samples)
    floor_dev = abs((floor["speedup"] or 1.0) - 1.0)
    notes.append(f"noise floor: the baseline against a second copy of itself in the same rounds: "
                 f"{ratio(floor['speedup'])} ({floor['verdict']}); a lever must beat it too")
    if floor["verdict"] != "noise":
        notes.append("the baseline differed from itself beyond the noise rule: this host is too noisy for "
                     "small differences; re-run on a quiet host")
    results = [_result(lever, base, arm, tolerance, floor_dev) for lever, arm in arms]
    winners = sorted(((lv, r["step"]["speedup"]) for (lv, _), r in zip(arms, results, strict=True)
                      if r["recommended"]), key=lambda x: -x[1])
    results += [r for r in compiled if r is not None]  # measured by the compile analysis, not combined
    del arms  # free the singles' models before the combination is built
    combo = pick(winners)
    if len(combo) >= 2:
        if deadline is not None and time.perf_counter() > deadline:
            notes.append("--budget: the combination of " + " + ".join(lv.name for lv in combo) + " not measured")
        else:
            results.append(_measure_combination(merged(combo), cfg, tolerance, rounds, iters, deadline, skipped,
                                                floor_dev))
    return results, done, len(base.step_samples), {**floor, "rounds_contended": bool(watched.get("detected"))}


def _build(lever: Lever, cfg: RunConfig, skipped: list[NotTried]) -> Any:
    from recstack.advisor import measure
    from recstack.errors import RecstackError

    try:
        what = cfg.updated(**lever.change)
        return measure.build(measure.Arm(lever.name, what, dict(lever.options)), capture=lever.numeric)
    except (RecstackError, RuntimeError, ValueError, ImportError, NotImplementedError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        skipped.append(NotTried(lever.name, lever.stage, f"could not build it here: {first[:200]}"))
        return None


def _compile_result(lever: Lever, cfg: RunConfig, deadline: float | None,
                    skipped: list[NotTried]) -> dict[str, Any] | None:
    """The compile analysis's search (:func:`recstack.compilation.recommend.recommend`: per-stage and
    whole-model candidates against eager in its own alternating rounds, numerics checked, losing regions
    pruned, the winner re-measured) as one lever; half the time left under ``--budget``, else 5 minutes."""
    from recstack.advisor.stagebars import compile_stage_times
    from recstack.compilation.model import load
    from recstack.compilation.recommend import holds_up, recommend
    from recstack.errors import RecstackError

    budget_s = max(30.0, (deadline - time.perf_counter()) / 2) if deadline is not None else 300.0
    try:
        rec = recommend(cfg, budget_s=budget_s, loader=load)
    except (RecstackError, RuntimeError, ValueError, ImportError, NotImplementedError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        skipped.append(NotTried(lever.name, lever.stage, f"the compile search failed here: {first[:200]}"))
        return None
    chosen = rec["chosen_result"]
    compiles = not str(rec["chosen"]).startswith("eager")
    good = compiles and holds_up(chosen)
    speedup = chosen.get("speedup")
    stage_sp = ((chosen.get("stages") or {}).get(lever.stage) or {}).get("speedup")
    basis = "the compile analysis's rule (docs/compile.md): gain beyond two eager arms' deviation, re-measured"
    step = {"speedup": speedup, "interval": None, "verdict": "improvement" if good else "noise", "basis": basis}
    reason = (f"compile config {rec['chosen']} gains beyond the compile analysis's noise floor" if good
              else f"the compile search kept eager: {rec['chosen']}")
    return {"name": f"compile ({rec['chosen']})" if good else "compile", "kind": "compile", "stage": lever.stage,
            "change": {"compile": rec["config"]} if good else {}, "options": {},
            "exact_change": "--compile FILE with the config in the winner's RunConfig (compile:)",
            "why": lever.why, "step": step, "stage_result": {**step, "speedup": stage_sp},
            "deviation": None, "within_tolerance": chosen.get("numerics_ok"), "build_s": round(rec["elapsed_s"], 3),
            "recommended": good, "reason": reason, "members": [],
            "resident": {"baseline_bytes": None, "what_if_bytes": None},
            "stage_times": compile_stage_times(chosen.get("stages"), cfg.batch_size)}


def _measure_combination(lever: Lever, cfg: RunConfig, tolerance: float, rounds: int, iters: int,
                         deadline: float | None, skipped: list[NotTried], floor_dev: float) -> dict[str, Any]:
    from recstack.advisor import measure

    base = measure.build(measure.Arm("baseline", cfg), capture=True)
    arm = _build(lever, cfg, skipped)
    if arm is None:
        return _result(lever, base, measure.Arm(lever.name, cfg), tolerance, floor_dev)
    measure.rounds([base, arm], iters, rounds, deadline)
    out = _result(lever, base, arm, tolerance, floor_dev)
    out["members"] = lever.name.split(" + ")
    return out


def _result(lever: Lever, base: Any, arm: Any, tolerance: float, floor_dev: float) -> dict[str, Any]:
    from recstack.advisor import measure

    step = measure.compare(base.step_samples, arm.step_samples)
    stage = step if lever.stage == "step" else measure.stage_compare(base, arm, lever.stage)
    dev = measure.deviation(base, arm) if lever.numeric else None
    within = None if dev is None else dev["max_rel"] <= tolerance
    from recstack.advisor.loss import loss_cost, loss_gate, loss_within
    from recstack.advisor.stagebars import stage_times

    loss = loss_cost(base, arm) if lever.numeric else None
    recommended, reason = loss_gate(_judge(step, lever, dev, within, tolerance, floor_dev), loss, tolerance)
    if loss_within(loss, tolerance) is False:
        within = False
    memory = {"baseline_bytes": base.resident_bytes, "what_if_bytes": arm.resident_bytes}
    return {"name": lever.name, "kind": lever.kind, "stage": lever.stage, "change": lever.change,
            "options": lever.options, "exact_change": lever.describe(), "why": lever.why, "step": step,
            "stage_result": stage, "deviation": dev, "within_tolerance": within, "build_s": round(arm.build_s, 3),
            "recommended": recommended, "reason": reason, "members": [], "resident": memory,
            "stage_times": stage_times(base, arm), "loss": loss}


def _judge(step: dict[str, Any], lever: Lever, dev: dict[str, Any] | None, within: bool | None,
           tolerance: float, floor_dev: float) -> tuple[bool, str]:
    if step["verdict"] != "improvement":
        return False, {"noise": "within noise", "regression": "slower than the baseline"}.get(
            step["verdict"], "not measured")
    if step["speedup"] - 1.0 <= floor_dev:
        return False, f"within the measured noise floor ({1 + floor_dev:.2f}x between two baselines)"
    if lever.numeric and dev is None:
        return False, "faster, but its output deviation could not be compared"
    if within is False:
        return False, f"faster, but its output deviates {dev['max_rel']:.2g} (relative) > tolerance {tolerance:g}"
    return True, "faster beyond noise" + ("" if dev is None else f"; output deviation {dev['max_rel']:.2g} relative")


def write_apply(doc: dict[str, Any], path: str | Path) -> str:
    """The RunConfig YAML of the winner (fields that differ from RunConfig's defaults); factory options as a
    comment (they are your factory's, not RunConfig's). Returns what was done, for the terminal."""
    import yaml

    from recstack.outputs import atomic_write_text

    if doc["winner_config"] is None:
        return f"--apply-to: nothing written to {path}: no lever beat noise"
    cfg = RunConfig.model_validate(doc["winner_config"])
    text = f"# recstack advise: the winner {doc['winner']}\n"
    if doc["winner_options"]:
        opts = ", ".join(f"{k}={v!r}" for k, v in doc["winner_options"].items())
        text += f"# and in your factory: {opts} (factory options are not RunConfig fields)\n"
    text += yaml.safe_dump(cfg.model_dump(mode="json", exclude_defaults=True), sort_keys=False)
    atomic_write_text(path, text)
    return f"--apply-to: the winner's RunConfig written to {path}"


def write_outputs(doc: dict[str, Any], report: Path | None, store: str | None) -> list[str]:
    """``--report``: the advice page; ``--store``: every what-if as a row of the store's ``advice`` table.
    Returns what was written, a line each, for the terminal."""
    said = []
    if report is not None:
        from recstack.report.advice import write_advice_html

        said.append(f"advice page written to {write_advice_html(doc, report)}")
    if store:
        from recstack.advisor.store import write_advice

        said.append(f"{write_advice(doc, store)} what-ifs written to {store} (table advice)")
    return said


__all__ = ["DEFAULT_ITERS", "DEFAULT_ROUNDS", "DEFAULT_TOLERANCE", "GOALS", "advise", "write_apply", "write_outputs"]
