"""One compile session: the model eager and compiled on identical inputs, observed, compared per stage.

Order (one process): build; eager warm-up and stage discovery (recstack's own passes); eager reference
outputs; apply the compile plan; compiled warm-up (compiling, with modules that fail compiled around);
compiled outputs -> numerics; eager then compiled timing passes (stage boundaries outside compiled
regions); the compiled model over the workload's batch sizes (recompiles, fallbacks).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from recstack.compilation import numerics
from recstack.compilation.apply import WHOLE_NOTE, CompiledRun, visible_roots
from recstack.compilation.ceiling import FORMULA, stage_ceilings
from recstack.compilation.config import CompileConfig
from recstack.compilation.model import Loaded, Loader, load_zoo
from recstack.compilation.observe import phases
from recstack.config.run import RunConfig
from recstack.noise import deviation
from recstack.profiling.passes import Discovery, TimingResult, op_pass, timing_pass, warm_up_and_discover
from recstack.profiling.rules import rules_of
from recstack.profiling.runner import ProfileOptions, Step, call_model
from recstack.profiling.stats import median
from recstack.profiling.timing import CALLER, cuda_sync, split_caller_key
from recstack.schema.compile_model import CompileReport
from recstack.schema.documents import check

NUM_BATCHES = 4


@dataclass
class Setup:
    cfg: RunConfig
    loaded: Loaded
    step: Step
    batches: list[Any]
    found: Discovery


def prepare(cfg: RunConfig, loader: Loader = load_zoo) -> Setup:
    """Build the model and its batches, warm up eagerly and discover the stages (as ``recstack profile``)."""
    rules = rules_of(cfg.stage_rules)
    loaded = loader(cfg)
    step = Step(loaded.model, ProfileOptions(cfg, op_pass=False, cost_model=False, counters=False), None)
    batches = loaded.make_batches(cfg.batch_size, NUM_BATCHES)
    found = warm_up_and_discover(loaded.model, step, batches, max(cfg.warmup, 2), rules,
                                 forward=lambda b: call_model(loaded.model, b))
    return Setup(cfg, loaded, step, batches, found)


# -- timing -------------------------------------------------------------------
def stage_medians(t: TimingResult) -> dict[str, float]:
    """Median per-step time (s) per stage key; every stage's caller code summed into ``[caller code]``."""
    out: dict[str, float] = {}
    for k, xs in t.stage_samples.items():
        key = CALLER if split_caller_key(k) else k
        out[key] = out.get(key, 0.0) + median(xs)
    out["run"] = median(t.plain)
    return out


def timed(setup: Setup, roots: dict[str, str], iters: int) -> dict[str, float]:
    return stage_medians(timing_pass(setup.loaded.model, setup.step, setup.batches, roots, iters, cuda_sync()))


def timed_pair(setup: Setup, run: CompiledRun, roots: dict[str, str], iters: int,
               rounds: int = 4) -> tuple[dict[str, float], dict[str, float]]:
    """Eager and compiled per-stage medians, in alternating rounds (E C E C ...) of ``iters / rounds``
    timed steps each, so that a host's drift (other processes, frequency) hits both alike."""
    got = timed_rounds(setup, run, roots, iters, ("eager", "compiled"), rounds)
    return got["eager"], got["compiled"]


def timed_rounds(setup: Setup, run: CompiledRun | None, roots: dict[str, str], iters: int, arms: tuple[str, ...],
                 rounds: int = 4) -> dict[str, dict[str, float]]:
    """Per-stage medians of each arm (``"eager"``, a second ``"eager2"``, ``"compiled"``), the arms taking
    turns in each of ``rounds`` rounds of ``iters / rounds`` timed steps (E C E2 E C E2 ...). Two eager
    arms in the same rounds measure the noise floor: the ratio the host gives between identical runs.
    ``run`` None: nothing is compiled (eager arms only)."""
    rounds = max(1, min(rounds, iters))
    per = max(1, iters // rounds)
    samples = {a: TimingResult() for a in arms}
    for _ in range(rounds):
        for arm in arms:
            if arm == "compiled":
                res = timing_pass(setup.loaded.model, setup.step, setup.batches, roots, per, cuda_sync())
            else:
                with run.compiled.eager_mode() if run is not None else contextlib.nullcontext():
                    res = timing_pass(setup.loaded.model, setup.step, setup.batches, roots, per, cuda_sync())
            acc = samples[arm]
            acc.plain += res.plain
            for k in set(acc.stage_samples) | set(res.stage_samples):
                acc.stage_samples.setdefault(k, [0.0] * (len(acc.plain) - len(res.plain)))
                acc.stage_samples[k] += res.stage_samples.get(k, [0.0] * len(res.plain))
    return {a: stage_medians(t) for a, t in samples.items()}


RESIDUAL_KEYS = ("other", CALLER)  # what no stage holds: small remainders, left out of the floor's maximum


def noise_table(a: dict[str, float], b: dict[str, float]) -> dict[str, Any]:
    """{stage: {eager_s, eager2_s, ratio}} of two eager arms (ratio = eager_s / eager2_s, computed from
    medians); ``run_dev``: |ratio - 1| of the whole step, and ``max_dev``: the largest over the stages
    (residuals left out) and the run, the floor below which a speedup is not told apart from noise."""
    table = {k: {"eager_s": a.get(k), "eager2_s": b.get(k),
                 "ratio": (a[k] / b[k]) if a.get(k) and b.get(k) else None} for k in sorted(set(a) | set(b))}
    devs = [deviation(v["ratio"]) for k, v in table.items() if v["ratio"] is not None and k not in RESIDUAL_KEYS]
    run = (table.get("run") or {}).get("ratio")
    return {"stages": table, "run_dev": None if run is None else deviation(run), "max_dev": max(devs, default=None),
            "provenance": "measured: two eager arms in the same alternating rounds as the compiled one"}


def stage_table(eager: dict[str, float], compiled: dict[str, float], hidden: dict[str, str],
                eager_full: dict[str, float] | None, ceilings: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """{stage: {eager_s, compiled_s, speedup}}; speedup = eager_s / compiled_s (computed from medians);
    with ``ceilings`` (:func:`.ceiling.stage_ceilings`) forward stages also carry ``library_share`` and
    ``ceiling_speedup`` (None where no library op ran)."""
    table = _stage_rows(eager, compiled, hidden, eager_full)
    for k, c in (ceilings or {}).items():
        if k in table:
            table[k].update(library_share=c["library_share"], ceiling_speedup=c["ceiling_speedup"])
    return table


def _stage_rows(eager: dict[str, float], compiled: dict[str, float], hidden: dict[str, str],
                eager_full: dict[str, float] | None) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for k in sorted(set(eager) | set(compiled) | set(hidden)):
        if k in hidden:
            e = (eager_full or {}).get(k)
            table[k] = {"eager_s": e, "compiled_s": None, "speedup": None, "unavailable": WHOLE_NOTE
                        if hidden[k] == "<model>" else f"unavailable: inside compiled region {hidden[k]} "
                        "with other stages; compile per stage to see it"}
            continue
        e, c = eager.get(k), compiled.get(k)
        table[k] = {"eager_s": e, "compiled_s": c, "speedup": (e / c) if e and c else None}
    return table


# -- the session --------------------------------------------------------------
def run_session(cfg: RunConfig, ccfg: CompileConfig, *, batch_sizes: list[int] | None = None,
                source: str = "compile", iters: int | None = None, loader: Loader = load_zoo,
                noise_floor: bool = False) -> dict[str, Any]:
    """Everything ``recstack compile`` reports except cold/warm compile time (:mod:`.coldwarm`)
    (:class:`recstack.schema.compile_model.CompileReport`);
    ``noise_floor``: a second eager arm in the timing rounds, reported as ``noise_floor``."""
    setup = prepare(cfg, loader)
    iters = iters or cfg.iters
    ceilings = eager_ceilings(setup)  # before the reference: in training its steps move the weights
    ref = numerics.capture(setup.step, setup.batches[:2])
    run = CompiledRun.start(setup.loaded.model, setup.step, setup.found, ccfg, source)
    try:
        # Numerics first: warm-up steps in train mode update the weights the reference was taken with.
        t0 = time.perf_counter()
        got = run.guarded(lambda: numerics.capture(setup.step, setup.batches[:2]))
        run.warm(setup.batches, max(cfg.warmup, 2))
        warm_s = time.perf_counter() - t0
        roots, hidden = visible_roots(setup.found.roots, run.plan)
        arms = ("eager", "compiled", "eager2") if noise_floor else ("eager", "compiled")
        timed_arms = timed_rounds(setup, run, roots, iters, arms)
        eager_t, compiled_t = timed_arms["eager"], timed_arms["compiled"]
        with run.compiled.eager_mode():
            eager_full = timed(setup, setup.found.roots, iters) if hidden else None
        sizes = batch_sizes if batch_sizes is not None else default_batch_sizes(setup.loaded)
        for bs in sizes:
            for b in setup.loaded.make_batches(bs, 1):
                run.run_step(b)
    finally:
        run.compiled.deactivate()  # the model (and torch's recompile limit) as they were
        run.finish()
    nums = numerics.compare(ref, got, cfg.dtype)
    obs = run.observer.obs
    return check(CompileReport, {
        "model": setup.loaded.name, "mode": cfg.mode, "batch_size": cfg.batch_size,
        **run.summary(),
        "stages": stage_table(eager_t, compiled_t, hidden, eager_full, ceilings),
        "ceiling": {"formula": FORMULA, "op_pass_steps": CEILING_STEPS,
                    "provenance": "computed from an eager op pass (torch.profiler) of the same model and batches"},
        "numerics": nums,
        **({"noise_floor": noise_table(eager_t, timed_arms["eager2"])} if noise_floor else {}),
        "compile_time_s": {"in_process": {"first_step_s": run.first_step_s, "warm_up_s": warm_s,
                                          "phases": phases(obs.metrics)}},
        "batch_sizes": sizes,
    })


CEILING_STEPS = 3  # eager op-pass steps for the ceilings


def eager_ceilings(setup: Setup) -> dict[str, dict[str, Any]]:
    """Per forward stage, the library-kernel share of its eager time and the Amdahl ceiling on its speedup
    (:mod:`.ceiling`), from an eager op pass over the discovered stage roots."""
    res = op_pass(setup.loaded.model, setup.step, setup.batches, setup.found.roots, CEILING_STEPS, cuda_sync())
    return stage_ceilings(res.folder.root, res.folder.steps)


def default_batch_sizes(loaded: Loaded, n: int = 64, most: int = 12) -> list[int]:
    """Batch sizes the workload produces: distinct query sizes of ``n`` draws (at most ``most``), and 1."""
    if loaded.query_sizes is None:
        return [1]
    sizes = sorted(set(loaded.query_sizes(n)))
    if len(sizes) > most:
        step = len(sizes) / most
        sizes = [sizes[int(i * step)] for i in range(most)]
    return sorted(set([1] + sizes))


__all__ = ["WHOLE_NOTE", "CompiledRun", "Setup", "noise_table", "prepare", "run_session", "stage_table", "timed_pair",
           "timed_rounds", "visible_roots"]
