"""One compile session: the model eager and compiled on identical inputs, observed, compared per stage.

Order (one process): build; eager warm-up and stage discovery (recstack's own passes); eager reference
outputs; apply the compile plan; compiled warm-up (compiling, with modules that fail compiled around);
compiled outputs -> numerics; eager then compiled timing passes (stage boundaries outside compiled
regions); the compiled model over the workload's batch sizes (recompiles, fallbacks).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from recstack.compilation import numerics
from recstack.compilation.config import WHOLE, CompileConfig, Plan, plan_regions
from recstack.compilation.locate import SourceIndex
from recstack.compilation.model import Loaded, load
from recstack.compilation.observe import Observer, graphs, phases, raise_metrics_limit
from recstack.compilation.regional import Compiled
from recstack.config.run import RunConfig
from recstack.profiling.passes import Discovery, TimingResult, timing_pass, warm_up_and_discover
from recstack.profiling.runner import ProfileOptions, Step
from recstack.profiling.stats import median
from recstack.profiling.timing import CALLER, cuda_sync, split_caller_key

WHOLE_NOTE = "unavailable in whole-model mode: compile per stage to see them"
NUM_BATCHES = 4


@dataclass
class Setup:
    cfg: RunConfig
    loaded: Loaded
    step: Step
    batches: list[Any]
    found: Discovery


def prepare(cfg: RunConfig) -> Setup:
    """Build the model and its batches, warm up eagerly and discover the stages (as ``recstack profile``)."""
    from recstack.api import _resolve_files

    rules = _resolve_files(cfg)[0]
    loaded = load(cfg)
    step = Step(loaded.model, ProfileOptions(cfg, op_pass=False, cost_model=False, counters=False), None)
    batches = loaded.make_batches(cfg.batch_size, NUM_BATCHES)
    found = warm_up_and_discover(loaded.model, step, batches, max(cfg.warmup, 2), rules)
    return Setup(cfg, loaded, step, batches, found)


def visible_roots(roots: dict[str, str], plan: Plan) -> tuple[dict[str, str], dict[str, str]]:
    """Stage roots usable as timing boundaries with ``plan`` applied, and the stages hidden (stage -> region).

    A root inside a compiled region cannot time (its wrapper would be traced); a region that swallows
    roots of one stage becomes that stage's root; one swallowing several stages hides them."""
    kept: dict[str, str] = {}
    swallowed: dict[str, list[str]] = {}
    for p, s in roots.items():
        r = next((r.path for r in plan.regions if r.path == WHOLE or p.startswith(r.path + ".")), None)
        if r is None:
            kept[p] = s
        else:
            swallowed.setdefault(r, []).append(s)
    hidden: dict[str, str] = {}
    for r, stages in swallowed.items():
        if len(set(stages)) == 1 and r != WHOLE and r not in kept:
            kept[r] = stages[0]
        else:
            hidden.update({s: r or "<model>" for s in stages})
    return kept, hidden


@dataclass
class CompiledRun:
    """The compile plan applied to a model in place, under observation (``recstack compile`` and ``profile``)."""

    model: Any
    step: Any
    stage_of: Any  # module path -> stage (the discovered stage map)
    plan: Plan
    compiled: Compiled
    observer: Observer
    hazards: list[dict[str, Any]] = field(default_factory=list)
    first_step_s: float | None = None

    @classmethod
    def start(cls, model: Any, step: Any, found: Discovery, ccfg: CompileConfig,
              source: str = "compile") -> CompiledRun:
        plan = plan_regions(model, ccfg, source=source)
        raise_metrics_limit()
        observer = Observer(SourceIndex(model, found.smap.stage_of).locate).__enter__()
        try:
            compiled = Compiled(model, plan)
        except Exception:
            observer.__exit__(None, None, None)
            raise
        return cls(model, step, found.smap.stage_of, plan, compiled, observer)

    def run_step(self, batch: Any) -> None:
        """One compiled step; a region whose compilation raises is compiled around (or left eager), then retried."""
        self.guarded(lambda: self.step.run(batch))

    def guarded(self, fn: Any) -> Any:
        """``fn()``, compiling around what fails to compile (the eager warm-up ran it: a failure is the compiler's)."""
        for _ in range(8):
            try:
                return fn()
            except Exception as exc:
                if not self.compiled.active or not self._compile_around(exc):
                    raise
        return fn()

    def _compile_around(self, exc: Exception) -> bool:
        region = getattr(exc, "_recstack_region", None)
        if region is None:
            return False
        mods = dict(self.model.named_modules())
        culprit = self._culprit(str(exc), region)
        reason = _first_line(exc)
        if culprit is not None and culprit != region and culprit in mods:
            self.compiled.run_eager(culprit)
            action = f"{culprit} runs eagerly inside compiled {region or '<model>'} (torch.compiler.disable)"
        else:
            self.compiled.drop(region)
            action = f"{region or '<model>'} runs eagerly"
        self.hazards.append({"region": region or "<model>", "module_path": culprit, "what": "compile raised",
                             "reason": reason, "action": action,
                             "stage": self.stage_of(culprit or region)})
        return True

    def _culprit(self, text: str, region: str) -> str | None:
        index = SourceIndex(self.model)
        frames = re.findall(r'File "([^"]+)", line (\d+)', text)
        for file, line in reversed(frames):
            path = index.module_at(file, int(line), region)
            if path is not None:
                return path
        return None

    def warm(self, batches: list[Any], steps: int) -> None:
        t0 = time.perf_counter()
        self.run_step(batches[0])
        self.first_step_s = time.perf_counter() - t0
        for i in range(1, steps):
            self.run_step(batches[i % len(batches)])

    def finish(self) -> None:
        self.observer.__exit__(None, None, None)

    def summary(self) -> dict[str, Any]:
        """The observation as the report's keys (after :meth:`finish`)."""
        obs = self.observer.obs
        return {
            "compile": self.compiled.describe(),
            "graphs": graphs(obs.metrics, obs.region_of),
            "unique_graphs": obs.unique_graphs,
            "graph_breaks": obs.graph_breaks,
            "recompiles": obs.recompiles,
            "fallbacks": obs.fallbacks,
            "hazards": self.hazards,
            "batch_one_specialised": _batch_one(obs.recompiles),
            "unavailable": obs.unavailable,
        }


def _batch_one(recompiles: list[dict[str, Any]]) -> str | None:
    """Say so when a recompile guard shows torch's 0/1 size specialisation (a batch of 1 got its own graph)."""
    for r in recompiles:
        g = " ".join(r.get("guards") or [r.get("guard") or ""])
        if re.search(r"\b2 <= \S+\.size\(\)\[\d+\]", g) or re.search(r"expected 1, actual|expected \d+, actual 1\b", g):
            return ("a size of 1 got its own graph (0/1 specialisation); dims with how: unbacked "
                    "(mark_unbacked) compile one graph for every size including 1")
    return None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:400]


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


def stage_table(eager: dict[str, float], compiled: dict[str, float], hidden: dict[str, str],
                eager_full: dict[str, float] | None) -> dict[str, Any]:
    """{stage: {eager_s, compiled_s, speedup}}; speedup = eager_s / compiled_s (computed from medians)."""
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
                source: str = "compile", iters: int | None = None) -> dict[str, Any]:
    """Everything ``recstack compile`` reports except cold/warm compile time (:mod:`.coldwarm`)."""
    setup = prepare(cfg)
    iters = iters or cfg.iters
    ref = numerics.capture(setup.step, setup.batches[:2])
    run = CompiledRun.start(setup.loaded.model, setup.step, setup.found, ccfg, source)
    try:
        # Numerics first: warm-up steps in train mode update the weights the reference was taken with.
        t0 = time.perf_counter()
        got = run.guarded(lambda: numerics.capture(setup.step, setup.batches[:2]))
        run.warm(setup.batches, max(cfg.warmup, 2))
        warm_s = time.perf_counter() - t0
        roots, hidden = visible_roots(setup.found.roots, run.plan)
        with run.compiled.eager_mode():
            eager_t = timed(setup, roots, iters)
            eager_full = timed(setup, setup.found.roots, iters) if hidden else None
        compiled_t = timed(setup, roots, iters)
        sizes = batch_sizes if batch_sizes is not None else default_batch_sizes(setup.loaded)
        for bs in sizes:
            for b in setup.loaded.make_batches(bs, 1):
                run.run_step(b)
    finally:
        run.finish()
    nums = numerics.compare(ref, got, cfg.dtype)
    obs = run.observer.obs
    return {
        "model": setup.loaded.name, "mode": cfg.mode, "batch_size": cfg.batch_size,
        **run.summary(),
        "stages": stage_table(eager_t, compiled_t, hidden, eager_full),
        "numerics": nums,
        "compile_time_s": {"in_process": {"first_step_s": run.first_step_s, "warm_up_s": warm_s,
                                          "phases": phases(obs.metrics)}},
        "batch_sizes": sizes,
    }


def default_batch_sizes(loaded: Loaded, n: int = 64, most: int = 12) -> list[int]:
    """Batch sizes the workload produces: distinct query sizes of ``n`` draws (at most ``most``), and 1."""
    if loaded.query_sizes is None:
        return [1]
    sizes = sorted(set(loaded.query_sizes(n)))
    if len(sizes) > most:
        step = len(sizes) / most
        sizes = [sizes[int(i * step)] for i in range(most)]
    return sorted(set([1] + sizes))


__all__ = ["CompiledRun", "Setup", "prepare", "run_session", "stage_table", "visible_roots"]
