"""The ``recstack compile`` report (``--json`` / ``-o FILE``): eager against compiled, per stage (docs/compile.md).

:class:`CompileReport` is what :func:`recstack.compilation.session.run_session` returns; the command then
replaces ``compile_time_s`` with the fresh-process cold and warm compile times (or says why not).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from recstack.schema.documents import Doc

Records = list[dict[str, Any]]


class CompileReport(Doc):
    """One model under one compile config: what compiled, how it ran and whether its outputs agree."""

    model: str
    mode: str = Field(description="inference or train")
    batch_size: int = Field(ge=1)
    compile: dict[str, Any] = Field(description="the compile config as applied: regions, settings, skipped roots")
    graphs: Records = Field(description="every compiled graph: region, ops, inputs")
    unique_graphs: int | None = Field(description="distinct graphs (null: not observed)")
    graph_breaks: Records = Field(description="every graph break with its reason and place")
    recompiles: Records = Field(description="every recompile with the guard that failed")
    fallbacks: Records = Field(description="ops that fell back to eager")
    hazards: Records = Field(description="known patterns that break or slow compilation, and failed frames")
    batch_one_specialised: str | None = Field(description="set when a batch of one got its own graph")
    unavailable: dict[str, str] = Field(description="observations torch did not provide, and why")
    stages: dict[str, Any] = Field(description="per stage: eager_s, compiled_s, speedup, ceiling (and run)")
    ceiling: dict[str, Any] = Field(description="how the per-stage ceilings were computed")
    numerics: dict[str, Any] = Field(description="compiled outputs against eager: tolerance, max error, ok")
    noise_floor: dict[str, Any] | None = Field(None, description="a second eager arm's deviation (when asked)")
    compile_time_s: dict[str, Any] = Field(description="in-process first step and warm-up (the command adds cold "
                                           "and warm fresh-process times)")
    batch_sizes: list[int] = Field(description="the batch sizes run after timing (recompile check)")
