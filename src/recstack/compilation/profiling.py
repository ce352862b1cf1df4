"""``recstack profile --compile cfg.yaml``: profile the compiled model with its stages visible.

After the eager warm-up has discovered the stages, the compile config is applied in place
(:mod:`.regional`) and a few compiled warm-up steps compile it (modules that fail are compiled around).
The timing and op passes then use the stage roots that sit outside compiled regions
(:func:`.session.visible_roots`); stages inside a region with other stages (whole-model mode) are
hidden and said so in ``run.compile.hidden_stages``. Dynamo drops ``record_function`` inside traced code,
also with ``torch._dynamo.config.capture_profiler_record_function = True`` (checked on torch 2.13 CPU with
inductor: the ranges are absent from the trace), so nothing keeps stage ranges inside a whole-model
compile. The cost model and hardware-counter replays run eagerly (they instrument every module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recstack.compilation.apply import WHOLE_NOTE, CompiledRun, visible_roots
from recstack.compilation.config import WHOLE, load_compile_config


@dataclass
class ProfileCompile:
    run: CompiledRun
    roots: dict[str, str]
    hidden: dict[str, str]
    opaque: frozenset[str]  # module paths strictly inside compiled regions: the op pass leaves them unwrapped

    def finish(self) -> dict[str, Any]:
        """Back to eager (for the analyses that instrument modules) and the summary for ``run.compile``."""
        self.run.compiled.deactivate()
        self.run.finish()
        out = self.run.summary()
        out["hidden_stages"] = {s: (WHOLE_NOTE if r == "<model>" else f"inside compiled region {r}")
                                for s, r in self.hidden.items()}
        out["first_step_s"] = self.run.first_step_s
        out["note"] = "timing and op passes ran compiled; cost model and counter replays ran eagerly"
        return out


def compile_for_profile(model: Any, step: Any, batches: list[Any], found: Any, source: Any,
                        warmup: int, config: Any = None) -> ProfileCompile:
    """Compile ``model`` in place by ``config`` (the parsed compile config; else read from ``source``)."""
    ccfg = config if config is not None else load_compile_config(source)
    run = CompiledRun.start(model, step, found, ccfg, source=source if isinstance(source, str) else "compile")
    run.warm(batches, max(warmup, 2))
    roots, hidden = visible_roots(found.roots, run.plan)
    return ProfileCompile(run, roots, hidden, inside_regions(model, run.plan))


def inside_regions(model: Any, plan: Any) -> frozenset[str]:
    """Paths of the modules strictly inside a compiled region (a region's own root stays outside)."""
    return frozenset(p for p, _ in model.named_modules()
                     if p and any(r.path == WHOLE or p.startswith(r.path + ".") for r in plan.regions))


__all__ = ["ProfileCompile", "compile_for_profile", "inside_regions"]
