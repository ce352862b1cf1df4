"""Summed costs: what the counter records per (module, op) and what the tree's cost sites accumulate.

Apart from :mod:`recstack.costmodel.counter` (a TorchDispatchMode) so that pricing without a model, such
as an imported trace's recorded shapes (:mod:`recstack.traceimport.cost`), needs no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recstack.costmodel.registry import OpCost

BACKWARD = "<backward>"


@dataclass
class CostSum:
    """Summed cost of some calls; ``covered_calls`` of the ``calls`` had a formula."""

    calls: int = 0
    covered_calls: int = 0
    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    def add(self, cost: OpCost | None, calls: int = 1) -> None:
        self.calls += calls
        if cost is None:
            return
        self.covered_calls += calls
        self.flops += cost.flops
        self.bytes_read += cost.bytes_read
        self.bytes_written += cost.bytes_written
        for k, v in cost.extra.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.extra[k] = self.extra.get(k, 0.0) + float(v)

    def merge(self, other: CostSum) -> None:
        self.calls += other.calls
        self.covered_calls += other.covered_calls
        self.flops += other.flops
        self.bytes_read += other.bytes_read
        self.bytes_written += other.bytes_written
        for k, v in other.extra.items():
            self.extra[k] = self.extra.get(k, 0.0) + v


@dataclass(frozen=True)
class Context:
    """Where a call ran: inside which decomposed CompositeImplicit ops (outermost first) and, for backward
    ops, which autograd node ran it and which forward module path created that node (None: unknown)."""

    chain: tuple[str, ...] = ()
    node: str | None = None
    origin: str | None = None


@dataclass
class OpCount(CostSum):
    """All calls of one op under one key. ``decomposed_calls``: calls the counter split into inner ops
    (their cost is on the inner ops' entries); ``errors``: calls whose formula raised (counted uncovered)."""

    decomposed_calls: int = 0
    errors: int = 0
    contexts: dict[Context, CostSum] = field(default_factory=dict)

    def record(self, ctx: Context, cost: OpCost | None) -> None:
        self.add(cost)
        self.contexts.setdefault(ctx, CostSum()).add(cost)


__all__ = ["BACKWARD", "Context", "CostSum", "OpCount"]
