"""Batched against shared execution of one model on one request-aware batch.

The batched execution is the model's own forward on the served batch (R
requests x C candidates, request-side values repeated). The shared execution
is built by one mechanism for every model:

1. *deduplicate* at the model's input: each request-side feature keeps one row
   per request (the request's first row; :func:`compact_batch`);
2. run the model on that batch: every op computed only from request-side
   values now runs once per request;
3. *expand* where request-only values meet candidate values: at the entry of
   each module that mixes them (found by :mod:`recstack.sharing.provenance` on
   the batched run), its request-only row inputs are repeated to one row per
   candidate (``index_select`` by request), as are request-only outputs of the
   model.

A traced shared run under :class:`~recstack.sharing.provenance.Provenance`
records which inputs of which module calls it expanded (a :class:`Plan`); the
timed shared runs replay that plan with plain forward pre-hooks, without the
mode. Where the trace meets a request-only value that has no row per request
(a jagged ID list concatenated with candidate IDs), sharing stops there and the
reason is reported.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from recstack.profiling.timing import StageTimer, hook_stage_roots, stage_seconds
from recstack.sharing.provenance import (
    CANDIDATE,
    REQUEST,
    ArgPath,
    Provenance,
    SharingStops,
    Trace,
    replace_at,
    walk,
)
from recstack.workload.batch import RawBatch
from recstack.workload.requests import expand_index, first_rows, select_rows

DEDUPE = "request_dedupe"
"""Pseudo stage of the shared execution's deduplication (outside the model)."""
RTOL, ATOL = 1e-5, 1e-6


@dataclass(frozen=True)
class Sides:
    """Which inputs of a batch are request-side."""

    request_features: frozenset[str]
    dense_request: bool = False

    @property
    def any(self) -> bool:
        return bool(self.request_features) or self.dense_request


@dataclass
class Plan:
    """Where a shared execution expands: module path -> call number -> argument paths; and model outputs."""

    expansions: dict[str, dict[int, list[ArgPath]]] = field(default_factory=dict)
    outputs: list[ArgPath] = field(default_factory=list)


def compact_batch(batch: RawBatch, sides: Sides) -> tuple[RawBatch, torch.Tensor]:
    """The batch with request-side inputs deduplicated to one row per request, and each row's request."""
    sizes = batch.request_sizes
    if sizes is None:
        raise SharingStops("the batch has no request_sizes: build it with recstack.workload.request_batch")
    rows = first_rows(sizes)
    sparse = {n: select_rows(f, rows) if n in sides.request_features else f for n, f in batch.sparse.items()}
    dense = batch.dense
    if sides.dense_request and dense is not None:
        dense = dense.index_select(0, rows)
    return RawBatch(dense=dense, sparse=sparse, labels=batch.labels, request_sizes=sizes), expand_index(sizes)


def tag_batch(mode: Provenance, batch: RawBatch, sides: Sides) -> None:
    """Tag a batch's inputs by side (labels are not model inputs)."""
    for name, feat in batch.sparse.items():
        mode.tag((feat.values, feat.lengths), REQUEST if name in sides.request_features else CANDIDATE)
    if batch.dense is not None:
        mode.tag(batch.dense, REQUEST if sides.dense_request else CANDIDATE)


# -- traced runs ---------------------------------------------------------------------------------
def trace_batched(model: nn.Module, batch: RawBatch, sides: Sides) -> tuple[Trace, Any]:
    """One batched forward under the provenance mode: its trace and output."""
    with torch.no_grad(), Provenance(model) as mode:
        tag_batch(mode, batch, sides)
        out = model(batch)
    return mode.trace, out


def trace_shared(model: nn.Module, batch: RawBatch, sides: Sides, mixers: list[str]) -> tuple[Trace, Plan, Any]:
    """One shared forward under the provenance mode: its trace, the plan it followed, its output.

    Raises SharingStops where a request-only value meets candidate values without a row per request.
    """
    sizes = batch.request_sizes
    assert sizes is not None
    index = expand_index(sizes)
    with torch.no_grad(), Provenance(model, rows=int(sizes.numel()), index=index, mixers=set(mixers)) as mode:
        tag_batch(mode, batch, sides)
        with mode.outside(DEDUPE):
            compact, _ = compact_batch(batch, sides)
        try:
            out = model(compact)
        except SharingStops:
            raise
        except Exception as exc:  # the model's own code could not run on compact request values
            raise SharingStops(f"the model failed on one row per request: {type(exc).__name__}: {exc}") from None
        out, done = mode.expand(out)
        left = [p for p, t in walk(out) if mode.tag_of(t) == REQUEST]
    if left:
        raise SharingStops(f"model outputs {left} are request-only without a row per request")
    return mode.trace, Plan(expansions=mode.trace.expansions, outputs=done), out


# -- replay ----------------------------------------------------------------------------------------
class SharedRunner:
    """The shared execution without the provenance mode: dedupe, forward with the plan's expansions."""

    def __init__(self, model: nn.Module, sides: Sides, plan: Plan) -> None:
        self.model = model
        self.sides = sides
        self.plan = plan
        self.index: torch.Tensor | None = None  # set while a shared forward runs (the hooks act then only)
        self.dedupe_s = 0.0
        self._calls: dict[str, int] = defaultdict(int)
        self._handles: list[RemovableHandle] = []

    def install(self) -> None:
        mods = dict(self.model.named_modules())
        for path, calls in self.plan.expansions.items():
            def pre(_m: nn.Module, args: Any, kwargs: Any, _p: str = path, _c: dict = calls) -> Any:
                if self.index is None:  # a batched forward of the same model
                    return None
                n = self._calls[_p]
                self._calls[_p] += 1
                paths = _c.get(n)
                if not paths:
                    return None
                obj = (args, kwargs)
                for ap in paths:
                    obj = replace_at(obj, ap, self._expand)
                return obj

            self._handles.append(mods[path].register_forward_pre_hook(pre, with_kwargs=True))

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _expand(self, t: torch.Tensor) -> torch.Tensor:
        assert self.index is not None
        return t.index_select(0, self.index)

    def __call__(self, batch: RawBatch) -> Any:
        start = time.perf_counter_ns()
        compact, self.index = compact_batch(batch, self.sides)
        self.dedupe_s = (time.perf_counter_ns() - start) * 1e-9
        self._calls.clear()
        try:
            out = self.model(compact)
            for ap in self.plan.outputs:
                out = replace_at(out, ap, self._expand)
        finally:
            self.index = None
        return out


# -- timing ----------------------------------------------------------------------------------------
class StageClock:
    """Exclusive wall time per stage: the profiler's stage timer (:class:`~recstack.profiling.timing.StageTimer`)
    on forward hooks of the stage roots (a nested root pauses its parent), without rusage."""

    def __init__(self, model: nn.Module, roots: dict[str, str]) -> None:
        self.timer = StageTimer(rusage=False)
        self._handles = hook_stage_roots(model, roots, self.timer)

    @property
    def acc(self) -> dict[str, float]:
        """Seconds per stage since :meth:`reset`."""
        return stage_seconds(self.timer)

    def reset(self) -> None:
        self.timer.reset()
        self.timer.start()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


@dataclass
class Timing:
    """Per-iteration stage times and totals of one execution."""

    stages: list[dict[str, float]] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)
    outputs: Any = None

    # The fastest iteration: interference (preemption on a busy host) only ever lengthens one.
    def best_stage(self, stage: str) -> float:
        return min(s.get(stage, 0.0) for s in self.stages) if self.stages else 0.0

    def best_total(self) -> float:
        return min(self.totals) if self.totals else 0.0


def time_executions(
    runs: dict[str, Callable[[], Any]],
    clock: StageClock,
    *,
    iters: int,
    warmup: int,
    extra: dict[str, Callable[[], float]] | None = None,
) -> dict[str, Timing]:
    """Time each run ``iters`` times, interleaved (the order alternates), after ``warmup`` untimed rounds.

    ``clock``: installed before any hook that should count in its stage (the shared plan's expansions).
    ``extra[name]``: seconds the run measured itself outside the model (added as the ``request_dedupe`` stage).
    """
    out = {name: Timing() for name in runs}
    names = list(runs)
    with torch.no_grad():
        for _ in range(warmup):
            for fn in runs.values():
                fn()
        for i in range(iters):
            for name in names if i % 2 == 0 else names[::-1]:
                clock.reset()
                start = time.perf_counter_ns()
                result = runs[name]()
                total = (time.perf_counter_ns() - start) * 1e-9
                stages = dict(clock.acc)
                if extra and name in extra:
                    stages[DEDUPE] = extra[name]()
                stages["other"] = stages.get("other", 0.0) + max(0.0, total - sum(stages.values()))
                out[name].stages.append(stages)
                out[name].totals.append(total)
                out[name].outputs = result
    return out


def outputs_agree(a: Any, b: Any) -> tuple[bool, float]:
    """Whether every output tensor agrees within rtol 1e-5, atol 1e-6 (fp32), and the largest difference."""
    ta = [t for _, t in walk(a)]
    tb = [t for _, t in walk(b)]
    if len(ta) != len(tb) or any(x.shape != y.shape for x, y in zip(ta, tb, strict=True)):
        return False, float("inf")
    diff = max((float((x.double() - y.double()).abs().max()) if x.numel() else 0.0) for x, y in zip(ta, tb, strict=True))
    ok = all(torch.allclose(x, y, rtol=RTOL, atol=ATOL) for x, y in zip(ta, tb, strict=True))
    return ok, diff


__all__ = [
    "ATOL", "DEDUPE", "RTOL", "Plan", "SharedRunner", "Sides", "StageClock", "Timing", "compact_batch",
    "outputs_agree", "tag_batch", "time_executions", "trace_batched", "trace_shared",
]
