"""The op-level pass: torch.profiler with named ranges for stages and modules, folded into a tree.

During this pass every module's ``forward`` is wrapped to open and close
a profiler range ``recstack.module::<path>``; stage roots also open
``recstack.stage::<stage>`` around it, and the step function opens
``recstack.stage::loss|backward|optimizer`` and ``recstack.step::<i>``. The
profiler nests every aten/fbgemm op (and, with CUDA, its kernels) inside these
ranges, so attribution comes from the ranges, not from host-side timers: it
holds when kernels run asynchronously and when compiled regions replace
modules (their ops still run inside the enclosing range).

Folding: per step, walk each range's children; stage ranges become stage
nodes under the run, module ranges module nodes, everything else op nodes
(nested as the dispatcher nested them). Ops outside every stage range (the
ranges of modules outside every stage are looked through) are caller code:
they go, by op name, to a ``[caller code]`` node of the stage whose range
starts next in the step (the timing pass charges the same interval there);
those after the last stage range go to the stage ``other``. Backward work is split per forward
stage by autograd sequence number (the forward op that created each autograd
node). Times are summed over the op-pass steps and divided by their number.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads when a pass runs, not with the module (the trace importer needs none)
    from torch import nn

from recstack.profiling.modelcode import AFTER, MODEL_CODE, Matcher
from recstack.profiling.timing import CALLER, ForwardWrappers

if TYPE_CHECKING:
    from recstack.profiling.modelcode import ModelCodePlan

STEP = "recstack.step::"
STAGE = "recstack.stage::"
MODULE = "recstack.module::"
MAX_SHAPES = 16


def profiler_range(name: str) -> Any:
    """A profiler range context manager: torch's fast C++ one where present (about 2 us per range
    against about 20 us for ``record_function`` on the development machine), else ``record_function``."""
    return _range_type()(name)


@functools.cache
def _range_type() -> Any:
    """The range class, looked up once (torch loads on the first range, not with this module)."""
    import torch
    from torch.autograd.profiler import record_function

    return getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None) or record_function


def install_range_hooks(model: nn.Module, roots: dict[str, str], opaque: frozenset[str] = frozenset()) -> ForwardWrappers:
    """Profiler ranges around every module call (and stage ranges around stage roots), except the modules
    in ``opaque`` (those inside compiled regions: a wrapper there changes what Dynamo guards on, so the
    region recompiles during the pass, tracing the wrapper, and the pass profiles that compile instead).

    A stage root called while its own stage is already open (several roots of
    one stage nested at run time, e.g. heirs of a container that never ran)
    opens only its module range, so the stage is not entered twice.
    """
    wrappers = ForwardWrappers()
    active: list[str] = []  # stages open right now, innermost last
    for path, mod in model.named_modules():
        if not path or path in opaque:
            continue
        stage = roots.get(path)
        stack: list[tuple[list[Any], bool]] = []

        def before(_path: str = path, _stage: str | None = stage, _stack: list = stack) -> None:
            opens = _stage is not None and (not active or active[-1] != _stage)
            names = ([STAGE + _stage] if opens and _stage else []) + [MODULE + _path]
            rfs = [profiler_range(n) for n in names]
            for rf in rfs:
                rf.__enter__()
            if opens and _stage:
                active.append(_stage)
            _stack.append((rfs, opens))

        def after(_stack: list = stack) -> None:
            if _stack:
                rfs, opened = _stack.pop()
                for rf in reversed(rfs):
                    rf.__exit__(None, None, None)
                if opened and active:
                    active.pop()

        wrappers.wrap(mod, before, after)
    return wrappers


@dataclass
class RawNode:
    """A node of the op-pass tree before scaling: summed microseconds over op steps."""

    name: str
    level: str
    stage: str | None
    us: float = 0.0
    calls: int = 0
    children: dict[tuple[str, str], RawNode] = field(default_factory=dict)
    shapes: dict[str, int] = field(default_factory=dict)
    dtypes: dict[str, int] = field(default_factory=dict)  # first floating input dtype -> calls (roof per dtype)
    device_us: float = 0.0
    nested_us: float = 0.0  # time of nested stage ranges inside this stage range

    def child(self, name: str, level: str, stage: str | None) -> RawNode:
        key = (level, name)
        node = self.children.get(key)
        if node is None:
            node = self.children[key] = RawNode(name, level, stage)
        return node


def _dur(evt: Any) -> float:
    return float(evt.time_range.end - evt.time_range.start)


FLOAT_DTYPES = {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16", "double": "fp64"}


def _dtype_key(evt: Any) -> str | None:
    """The op's first floating-point input dtype (``fp32``, ``bf16``, ...), from ``record_shapes``."""
    return next((FLOAT_DTYPES[d] for d in getattr(evt, "input_dtypes", None) or [] if d in FLOAT_DTYPES), None)


def _on_host(evt: Any, cpu: Any) -> bool:
    device = getattr(evt, "device_type", None)
    return (device is None or device == cpu) and not getattr(evt, "is_async", False)


def _is_range(name: str) -> bool:
    return name.startswith((STEP, STAGE, MODULE))


def _outermost_op_us(evs: list[Any], steps: list[Any]) -> float:
    """Time of the ops no other op encloses, inside the step ranges (by parent chain, or by time for events
    recorded on other threads): what the folded tree must account for."""
    total = 0.0
    for e in evs:
        if _is_range(e.name):
            continue
        parent, inside_op = e.cpu_parent, False
        while parent is not None:
            if not _is_range(parent.name):
                inside_op = True
                break
            if parent.name.startswith(STEP):
                break
            parent = parent.cpu_parent
        if inside_op:
            continue
        if parent is None and not any(s.time_range.start <= e.time_range.start <= s.time_range.end for s in steps):
            continue
        total += _dur(e)
    return total


def _shape_key(evt: Any) -> str | None:
    shapes = getattr(evt, "input_shapes", None)
    if not shapes:
        return None
    return str([list(s) if isinstance(s, (list, tuple)) else s for s in shapes])


def _outside_sequence(events: Iterable[Any]) -> Iterable[Any]:
    """Events directly under a step in start order, looking through module ranges (outside every stage
    at this level: a stage root's module range sits inside its stage range)."""
    for e in sorted(events, key=lambda e: e.time_range.start):
        if e.name.startswith(MODULE):
            yield from _outside_sequence(e.cpu_children)
        else:
            yield e


class Folder:
    """Fold profiler events of several steps into one RawNode tree (run root with stage children).

    With a :class:`~recstack.profiling.modelcode.ModelCodePlan`, an op outside every stage whose planned
    stage is not its interval's goes to ``model_code[stage]`` instead, and its share of the interval
    (from the end of the event before it) counts in :meth:`moved_fractions` (:mod:`recstack.profiling.modelcode`).
    """

    def __init__(self, plan: ModelCodePlan | None = None) -> None:
        self.root = RawNode("run", "run", None)
        self.callers: dict[str, RawNode] = {}  # stage -> ops run outside every stage just before its root
        self.matcher = Matcher(plan) if plan is not None and plan.moves() else None
        self.model_code: dict[str, RawNode] = {}  # stage -> the model's own ops that are its work
        self.moved_us: list[dict[tuple[str, str], float]] = []  # per step: (interval, stage) -> shares moved
        self.interval_us: list[dict[str, float]] = []  # per step: interval -> summed length
        self.seq_stage: dict[int, str] = {}
        self.steps = 0
        self.unparented_us = 0.0
        self.step_us = 0.0  # summed duration of the step ranges
        self.op_total_us = 0.0  # summed duration of outermost ops in the steps, counted from the raw events
        self._open: list[RawNode] = []  # the nodes being visited, outermost first (see _nested)

    def fold(self, events: Iterable[Any]) -> None:
        # Host events only: with CUDA the list also holds the kernels themselves (device events, no CPU
        # parent); they are reached through their launching op's ``kernels``, never placed by time.
        from torch.autograd import DeviceType

        evs = [e for e in events if _on_host(e, DeviceType.CPU)]
        steps = [e for e in evs if e.name.startswith(STEP) and e.cpu_parent is None]
        self.steps += len(steps)
        self.step_us += sum(_dur(s) for s in steps)
        self.op_total_us += _outermost_op_us(evs, steps)
        for s in steps:
            self._fold_step(s)
        # Events recorded on other threads (e.g. autograd workers) are roots: place them by time.
        for e in evs:
            if e.cpu_parent is None and not e.name.startswith(STEP):
                host = next((s for s in steps if s.time_range.start <= e.time_range.start <= s.time_range.end), None)
                if host is None:
                    continue
                self.unparented_us += _dur(e)
                backward = self.root.child("backward", "stage", "backward")
                self._open.append(backward)  # a stage range nested in these is taken out of backward
                self._visit(e, backward, "backward", in_backward=True)
                self._open.pop()

    def _fold_step(self, step: Any) -> None:
        """One step range: stage ranges in order, each preceded by the caller-code ops that ran before it."""
        pending: list[Any] = []
        start = step.time_range.start
        if self.matcher is not None:
            self.matcher.reset()
        self.moved_us.append({})
        self.interval_us.append({})
        for e in _outside_sequence(step.cpu_children):
            if e.name.startswith(STAGE):
                self._flush(pending, e.name[len(STAGE) :], start, e.time_range.start)
                pending = []
                self._visit(e, self.root, None, in_backward=False)
                start = e.time_range.end
            else:
                pending.append(e)
        self._flush(pending, AFTER, start, step.time_range.end)  # after the last stage range: `other`

    def _flush(self, ops: list[Any], interval: str, start: float, end: float) -> None:
        """The ops outside every stage before a stage range (``interval``: its stage) or after the last one
        (:data:`AFTER`): the interval's caller code (or ``other``), or the ``[model code]`` of their stage."""
        lengths, moved = self.interval_us[-1], self.moved_us[-1]
        lengths[interval] = lengths.get(interval, 0.0) + max(0.0, end - start)
        prev = start
        for op in ops:
            stage = self.matcher.stage_of(interval, op) if self.matcher is not None else None
            share, prev = max(0.0, op.time_range.end - prev), max(prev, op.time_range.end)
            if stage is not None and stage != interval:
                node = self.model_code.setdefault(stage, RawNode(MODEL_CODE, "module", stage))
                moved[(interval, stage)] = moved.get((interval, stage), 0.0) + share
                self._visit(op, node, stage, in_backward=False)
            elif interval == AFTER:
                self._visit(op, self.root, None, in_backward=False)
            else:
                self._visit(op, self.callers.setdefault(interval, RawNode(CALLER, "module", interval)), interval,
                            in_backward=False)

    def moved_fractions(self) -> dict[tuple[str, str], float]:
        """(interval, stage) -> the fraction of the interval's time that is that stage's model code: the median
        over the op-pass steps (a step preempted inside the interval does not decide it)."""
        from recstack.profiling.stats import median

        keys = {k for step in self.moved_us for k in step}
        return {k: median([m.get(k, 0.0) / n[k[0]] for m, n in zip(self.moved_us, self.interval_us, strict=True)
                           if n.get(k[0], 0.0) > 0]) for k in sorted(keys)}

    def _visit(self, evt: Any, ctx: RawNode, stage: str | None, *, in_backward: bool) -> None:
        name: str = evt.name
        if name.startswith(STAGE):
            self._visit_stage(evt, ctx, name[len(STAGE) :])
            return
        if name.startswith(MODULE) and stage is None:
            # A module outside every stage: look through it (its ops are grouped by op name).
            for c in evt.cpu_children:
                self._visit(c, ctx, None, in_backward=in_backward)
            return
        if not name.startswith(MODULE) and in_backward and ctx.level == "stage" and ctx.name == "backward":
            # backward's part for the forward stage that made this op's autograd node
            fwd = self.seq_stage.get(int(getattr(evt, "sequence_nr", -1)), "unattributed")
            part = ctx.child(fwd, "stage", "backward")
            part.us += _dur(evt)
            part.calls += 1
            self._open.append(part)  # a stage range nested in the op leaves this part too
            self._visit_node(evt, part, stage, in_backward)
            self._open.pop()
            return
        self._visit_node(evt, ctx, stage, in_backward)

    def _visit_stage(self, evt: Any, ctx: RawNode, st: str) -> None:
        node = self.root.child(st, "stage", st)
        node.us += _dur(evt)
        node.calls += 1
        if ctx.level == "stage" or ctx.level == "module" or ctx.level == "op":
            # A nested stage root: its time belongs to it, not to the enclosing stage.
            self._nested(ctx, _dur(evt))
        self._open.append(node)
        for c in evt.cpu_children:
            self._visit(c, node, st, in_backward=st == "backward")
        self._open.pop()

    def _visit_node(self, evt: Any, ctx: RawNode, stage: str | None, in_backward: bool) -> None:
        """A module or op node under ``ctx``, then its children."""
        name: str = evt.name
        if name.startswith(MODULE):
            node = ctx.child(name[len(MODULE) :], "module", stage)
        else:
            if ctx is self.root:
                ctx = self.root.child("other", "stage", "other")
                stage = "other"
            node = self._op_node(evt, ctx, stage, in_backward)
        node.us += _dur(evt)
        node.calls += 1
        self._open.append(node)
        for c in evt.cpu_children:
            self._visit(c, node, stage, in_backward=in_backward)
        self._open.pop()

    def _op_node(self, evt: Any, ctx: RawNode, stage: str | None, in_backward: bool) -> RawNode:
        """The op's node under ``ctx`` with its shapes, dtypes and kernels counted (not its time)."""
        node = ctx.child(evt.name, "op", stage)
        key = _shape_key(evt)
        if key is not None and (key in node.shapes or len(node.shapes) < MAX_SHAPES):
            node.shapes[key] = node.shapes.get(key, 0) + 1
        if (dt := _dtype_key(evt)) is not None:
            node.dtypes[dt] = node.dtypes.get(dt, 0) + 1
        seq = int(getattr(evt, "sequence_nr", -1))
        if seq >= 0 and not in_backward and stage is not None:
            self.seq_stage[seq] = stage  # the last op with this number created the autograd node
        for k in getattr(evt, "kernels", []) or []:
            kn = node.child(k.name, "kernel", stage)
            kn.us += float(k.duration)
            kn.calls += 1
            node.device_us += float(k.duration)
        return node

    def _nested(self, ctx: RawNode, us: float) -> None:
        """Record time of a nested stage so it can be subtracted: from the innermost stage range open around
        it (``nested_us``; none when it ran in code outside every stage, whose ops ``ctx`` collects for the
        next stage) and from each module and op it ran in (their time is then the nested stage's)."""
        for n in reversed(self._open):
            if n.level == "stage" and n.name == n.stage:
                n.nested_us += us
                break
            n.us = max(0.0, n.us - us)  # a module, an op or a part of backward (named for a forward stage)

    @staticmethod
    def stage_exclusive_us(node: RawNode) -> float:
        # Never below zero: a stage's nested stage ranges summed to more than the stage itself once
        # (RMC1 training under DistributedModelParallel, 2 gloo ranks), which no profile may hold.
        return max(0.0, node.us - node.nested_us)
