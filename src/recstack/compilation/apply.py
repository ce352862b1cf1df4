"""A compile plan applied to a model in place, under observation; which stage roots can still time.

Used by ``recstack compile`` (:mod:`.session`) and ``recstack profile --compile`` (:mod:`.profiling`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from recstack.compilation.config import WHOLE, CompileConfig, Plan, plan_regions
from recstack.compilation.locate import SourceIndex
from recstack.compilation.observe import Observer, graphs, raise_metrics_limit
from recstack.compilation.regional import Compiled

WHOLE_NOTE = "unavailable in whole-model mode: compile per stage to see them"


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
    def start(cls, model: Any, step: Any, found: Any, ccfg: CompileConfig,
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
            "hazards": self.hazards + obs.not_converted,
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


__all__ = ["WHOLE_NOTE", "CompiledRun", "visible_roots"]
