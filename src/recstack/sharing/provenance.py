"""Data-flow provenance at the dispatch level: which ops compute only from request-side inputs.

:class:`Provenance` is a :class:`recstack.tagmode.TagMode` (a ``TorchDispatchMode`` with
per-storage tags and the running module stack, shared with stage detection). The model's batch inputs are
tagged by side (:data:`REQUEST`, :data:`CANDIDATE`); every op's outputs get the
union (bitwise or) of its tensor inputs' tags, so a tensor's tag says which
inputs it was computed from. Parameters, buffers and tensors made from
nothing (``arange``, ``zeros``) have tag 0 (constant). Tags are kept per
storage, so a view, an in-place write or an ``out=`` write carries them to
every tensor sharing that memory.

Each op is classed by its inputs: ``request`` (request-only inputs, besides
constants), ``candidate`` (no request-only input), ``mixed`` (a request-only
input meets a candidate-derived one: where sharing must expand) or
``constant``. Its FLOPs and bytes come from the cost model
(:func:`recstack.costmodel.op_cost`), its time is the op's wall time inside
the mode (the dispatch overhead included: use it for proportions).

In a shared execution (``rows`` set: the number of requests) a request-only
tensor has one row per request. A module that runs a mixed op directly (a
*mixer*, found on the batched run) gets its request-only row inputs expanded
at its entry (``index_select`` by request; not the model itself, whose input
is the deduplicated batch); an op that still meets a compact request-only
value raises :class:`SharingStops`, naming the op and module.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from recstack.costmodel import op_cost
from recstack.errors import RecstackError
from recstack.tagmode import ArgPath, TagMode, replace_at, walk

REQUEST = 1
CANDIDATE = 2
CLASSES = ("request", "candidate", "mixed", "constant", "expand")
"""Op classes; ``expand`` is the repeat of request rows a shared execution adds."""


class SharingStops(RecstackError):
    """A shared execution cannot go on: a request-only value meets candidate values unexpanded."""


@dataclass
class Totals:
    """Summed cost and op time of some ops."""

    flops: float = 0.0
    bytes: float = 0.0
    time_s: float = 0.0
    ops: int = 0

    def add(self, flops: float, nbytes: float, seconds: float) -> None:
        self.flops += flops
        self.bytes += nbytes
        self.time_s += seconds
        self.ops += 1


@dataclass
class Trace:
    """What one forward under :class:`Provenance` saw."""

    by_module: dict[str, dict[str, Totals]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(Totals)))
    mixers: list[str] = field(default_factory=list)  # modules running a mixed op directly, first-run order
    call_order: list[str] = field(default_factory=list)
    expansions: dict[str, dict[int, list[ArgPath]]] = field(default_factory=dict)  # module -> call -> args


class Provenance(TagMode):
    """Tag tensors by the batch inputs they derive from; class, price and time every op (module docstring).

    Ops are summed per innermost running module path (``""``: outside every module).
    ``rows`` and ``index`` (shared execution): the number of
    requests and each row's request (``index_select`` index); ``mixers``: the modules whose request-only
    row inputs are expanded at entry (their expansions are recorded in the trace).
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        rows: int | None = None,
        index: torch.Tensor | None = None,
        mixers: set[str] | None = None,
    ) -> None:
        super().__init__(model)
        self.rows = rows
        self.index = index
        self.mixers = mixers or set()
        self.trace = Trace()
        self.trace.call_order = self.call_order
        self._calls: dict[str, int] = defaultdict(int)
        self._expanding = False
        self._where: str | None = None

    # -- outside the model -----------------------------------------------------------------------
    @contextmanager
    def outside(self, name: str) -> Iterator[None]:
        """Sum the ops run inside under the pseudo path ``name`` (work outside the model: deduplication)."""
        self._where = name
        try:
            yield
        finally:
            self._where = None

    # -- expansion -------------------------------------------------------------------------------
    def expand(self, obj: Any) -> tuple[Any, list[ArgPath]]:
        """``obj`` with its compact request-only row tensors expanded to one row per candidate."""
        assert self.rows is not None and self.index is not None
        done: list[ArgPath] = []
        for path, t in list(walk(obj)):
            if self.tag_of(t) == REQUEST and t.dim() > 0 and t.shape[0] == self.rows:
                done.append(path)
        self._expanding = True
        try:
            for path in done:
                obj = replace_at(obj, path, self._expand_one)
        finally:
            self._expanding = False
        return obj, done

    def _expand_one(self, t: torch.Tensor) -> torch.Tensor:
        assert self.index is not None
        out = t.index_select(0, self.index)
        self.set_tag(out, REQUEST | CANDIDATE)  # full rows now: no longer compact
        return out

    # -- module tracking ------------------------------------------------------------------------
    def on_enter(self, path: str, args: Any, kwargs: Any) -> Any:
        call = self._calls[path]
        self._calls[path] += 1
        # The model itself takes the deduplicated batch as it is: a mixed op in its own forward stops.
        if self.rows is None or not path or path not in self.mixers:
            return None
        (args, kwargs), done = self.expand((args, kwargs))
        if done:
            self.trace.expansions.setdefault(path, {})[call] = done
        return args, kwargs

    # -- dispatch --------------------------------------------------------------------------------
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inputs = [t for _, t in walk((args, kwargs))]
        tags = [self.tag_of(t) for t in inputs]
        union = 0
        for v in tags:
            union |= v
        compact = [t for t, v in zip(inputs, tags, strict=True) if v == REQUEST]
        if self._expanding:
            cls = "expand"
        elif compact and union & CANDIDATE:
            cls = "mixed"
        elif union == REQUEST:
            cls = "request"
        elif union:
            cls = "candidate"
        else:
            cls = "constant"
        path = self._where or (self._stack[-1] if self._stack else "")
        if cls == "mixed" and self.rows is not None:
            shapes = ", ".join(str(tuple(t.shape)) for t in compact)
            raise SharingStops(
                f"sharing stops at {func._schema.name} in module {path or '<model>'}: request-only value(s) of "
                f"shape {shapes} meet candidate values without a row per request at the module's entry"
            )
        start = time.perf_counter_ns()
        out = func(*args, **kwargs)
        elapsed = (time.perf_counter_ns() - start) * 1e-9
        outs = [t for _, t in walk(out)]
        for t in outs:
            self.set_tag(t, union)
        cost = _price(func, args, kwargs, outs)
        self.trace.by_module[path][cls].add(cost[0], cost[1], elapsed)
        if cls == "mixed" and path not in self.trace.mixers:
            self.trace.mixers.append(path)
        return out


def _price(func: Any, args: Any, kwargs: Any, outs: list[torch.Tensor]) -> tuple[float, float]:
    """(FLOPs, bytes read + written) of one call by the cost model; (0, 0) where no formula covers it."""
    try:
        c = op_cost(func._schema.name, args, kwargs, outputs=outs)
    except Exception:  # a formula that cannot price this call leaves it unpriced, never breaks the run
        return 0.0, 0.0
    if c is None:
        return 0.0, 0.0
    return float(c.flops), float(c.bytes_read + c.bytes_written)


__all__ = ["CANDIDATE", "CLASSES", "REQUEST", "Provenance", "SharingStops", "Totals", "Trace", "replace_at", "walk"]
