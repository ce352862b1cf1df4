"""Stages run from a model's own methods: timed as their stage, not as the next stage's caller code.

A model may run a stage's work from a method of its own (torch-rechub's AFM computes its
attention weights in ``AFM.attention``, SASRec its blocks in ``seq_forward``) instead of a
submodule's ``forward``. Such code runs outside every stage root, so the timing pass would
charge it to the next stage as ``[caller code]``. The dataflow trace
(:mod:`recstack.profiling.dataflow`) records, for each op with evidence, the method of the
innermost running module it ran in; a method of a module in no stage (the model itself, a
mixed module) whose ops show one strong kind becomes a *stage method*: both passes mark
its calls as that stage (the :class:`recstack.profiling.passes.Regions` protocol: an
instance attribute wraps the method, ``enter(stage)`` before, ``leave()`` after), and
``run.stage_methods`` records it with its evidence. Work in ``forward`` itself is not
wrapped (that would be the whole step).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

    from recstack.profiling.dataflow import Flow
    from recstack.profiling.regions import Regions
    from recstack.profiling.rules import StageMap


@dataclass
class StageMethod:
    """A module's own method that runs one stage's work."""

    path: str  # the module ("" : the model)
    method: str
    stage: str
    evidence: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.path}:{self.method}"


def find_stage_methods(flow: Flow, smap: StageMap) -> list[StageMethod]:
    """Methods (not ``forward``) of modules in no stage whose ops with evidence show one strong kind."""
    from recstack.profiling.dataflow import STRONG

    out: list[StageMethod] = []
    for (path, method), evs in flow.methods.items():
        if smap.stage_of(path) is not None:
            continue
        kinds = {e.stage for e in evs if e.stage in STRONG}  # layers' stages are settled by now (Flow.finish)
        if len(kinds) != 1:
            continue
        stage = kinds.pop()
        first = next(e for e in evs if e.stage == stage)
        counts: dict[str, int] = {}
        for e in evs:
            counts[e.stage] = counts.get(e.stage, 0) + 1
        ev = {"basis": "dataflow", "ops_by_stage": counts, **first.as_dict()}
        out.append(StageMethod(path, method, stage, ev))
    return out


@dataclass
class MethodRegions:
    """:class:`~recstack.profiling.passes.Regions` for stage methods, after any other regions (``inner``)."""

    methods: list[StageMethod]
    inner: Regions | None = None
    _saved: list[tuple[Any, str, Any]] = field(default_factory=list)

    def install(self, model: nn.Module, enter: Callable[[str], None], leave: Callable[[], None]) -> Callable[[], None]:
        undo_inner = self.inner.install(model, enter, leave) if self.inner is not None else None
        saved: list[tuple[Any, str, Any]] = []
        for m in self.methods:
            mod = model.get_submodule(m.path) if m.path else model
            previous = mod.__dict__.get(m.method)
            inner = getattr(mod, m.method)

            def wrapped(*args: Any, _f: Any = inner, _s: str = m.stage, **kwargs: Any) -> Any:
                enter(_s)
                try:
                    return _f(*args, **kwargs)
                finally:
                    leave()

            saved.append((mod, m.method, previous))
            setattr(mod, m.method, wrapped)

        def undo() -> None:
            for mod, name, previous in reversed(saved):
                if previous is None:
                    mod.__dict__.pop(name, None)
                else:
                    setattr(mod, name, previous)
            if undo_inner is not None:
                undo_inner()

        return undo


__all__ = ["MethodRegions", "StageMethod", "find_stage_methods"]
