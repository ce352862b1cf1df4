"""Before/after stage times of a what-if: the figures the advice page's stage bars draw (it computes none).

For every stage either arm timed, the median seconds per sample of the baseline and of the what-if over the
same alternating rounds (:mod:`recstack.advisor.measure`), in the baseline's stage order; for the compile
lever, the compile analysis's own eager and compiled stage medians.
"""

from __future__ import annotations

from typing import Any

from recstack.profiling.stats import median


def stage_times(base: Any, arm: Any) -> dict[str, dict[str, float | None]]:
    """``{stage: {"base_s", "what_if_s"}}`` (median s per sample; None where that arm did not time the stage)."""
    names = list(base.stage_samples) + [k for k in arm.stage_samples if k not in base.stage_samples]

    def med(xs: list[float] | None) -> float | None:
        return median(xs) if xs else None

    return {k: {"base_s": med(base.stage_samples.get(k)), "what_if_s": med(arm.stage_samples.get(k))}
            for k in names}


def compile_stage_times(stages: dict[str, Any] | None, batch_size: int) -> dict[str, dict[str, float | None]]:
    """The compile analysis's per-stage medians of its chosen config (``{stage: {eager_s, compiled_s}}``, per
    step, from its own alternating rounds) per sample; stages hidden inside a compiled region have no
    compiled time (None)."""
    def per(v: Any) -> float | None:
        return v / batch_size if isinstance(v, (int, float)) else None

    return {k: {"base_s": per(v.get("eager_s")), "what_if_s": per(v.get("compiled_s"))}
            for k, v in (stages or {}).items() if k != "run" and isinstance(v, dict)}


__all__ = ["compile_stage_times", "stage_times"]
