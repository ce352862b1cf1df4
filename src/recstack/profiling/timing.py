"""The low-overhead timing collector: stage boundaries only, exclusive accounting.

Wrappers around the ``forward`` of the *stage roots* (a handful of modules,
not every module; cheaper than forward hooks) and explicit regions around loss, backward and optimizer mark stage
boundaries with ``time.perf_counter_ns``. Time is exclusive: entering a nested
stage root pauses the enclosing stage, so stage times never double count.
With CUDA, boundaries synchronise the device first so kernels are charged to
the stage that launched them (this makes the timing pass slower on GPU, which
the overhead ratio shows).

Each boundary also takes one ``getrusage(RUSAGE_SELF)`` (about 1 us, one
syscall) so that the kernel's per-process counters (minor and major page
faults, voluntary and involuntary context switches) are charged to stages the
same exclusive way; the deltas are worked out after the step's clock stops.
``stage_rusage`` averages them over the central steps for the stage nodes'
``extra.rusage``.

Caller code: time between stage roots, when no stage is open, is the model's
own code (its ``forward`` and the functions it calls outside every stage
root: slicing inputs for a lookup, concatenating embeddings for the MLP,
Python between module calls). It is charged to the stage whose root runs
next, under the key :func:`caller_key` (``<stage>/[caller code]``), because
that stage is what the code prepares; the tree shows it as its own child of
the stage. Time after the last stage root of a step stays ``other``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads when a pass runs, not with the module (the trace importer needs none)
    from torch import nn

try:
    import resource

    _getrusage: Callable[[int], Any] | None = resource.getrusage
    _SELF = resource.RUSAGE_SELF
except ImportError:  # not POSIX: no per-stage kernel counters
    _getrusage, _SELF = None, 0


RUSAGE_FIELDS = ("minor_faults", "major_faults", "voluntary_ctx_switches", "involuntary_ctx_switches")
OUTSIDE = "other"  # where time and counters after the last stage root of a step go
CALLER = "[caller code]"


def caller_key(stage: str) -> str:
    """The accumulator key of the caller code that ran, outside every stage, just before ``stage``'s root."""
    return f"{stage}/{CALLER}"


def split_caller_key(key: str) -> str | None:
    """The stage of a :func:`caller_key`, or None for a plain stage key."""
    stage, sep, rest = key.partition("/")
    return stage if sep and rest == CALLER else None


def _ru_tuple(r: Any) -> tuple[int, int, int, int]:
    return (r.ru_minflt, r.ru_majflt, r.ru_nvcsw, r.ru_nivcsw)


class StageTimer:
    def __init__(self, sync: Callable[[], None] | None = None, *, rusage: bool = True) -> None:
        self.sync = sync
        self.acc: dict[str, int] = {}
        self.stack: list[str] = []
        self.last = 0
        self.ru = _getrusage if rusage else None
        # Per boundary: (stage the interval ending here belongs to, raw rusage); deltas worked out in stop().
        self.marks: list[tuple[str, Any]] = []
        self.rusage_steps: list[dict[str, list[int]]] = []  # one dict per start()/stop(): stage -> RUSAGE_FIELDS

    def reset(self) -> None:
        self.acc = {}
        self.stack = []
        self.marks = []

    def start(self) -> int:
        if self.ru:
            self.marks = [("", self.ru(_SELF))]
        if self.sync:
            self.sync()
        self.last = time.perf_counter_ns()
        return self.last

    def stop(self) -> int:
        if self.sync:
            self.sync()
        now = time.perf_counter_ns()
        owner = self.stack[-1] if self.stack else OUTSIDE
        if self.stack:  # an exception left a stage open: close everything
            self.acc[self.stack[-1]] = self.acc.get(self.stack[-1], 0) + now - self.last
            self.stack.clear()
        if self.ru and self.marks:
            self.marks.append((owner, self.ru(_SELF)))
            self.rusage_steps.append(self._rusage_deltas())
        return now

    def _rusage_deltas(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        prev = _ru_tuple(self.marks[0][1])
        for owner, r in self.marks[1:]:
            cur = _ru_tuple(r)
            acc = out.setdefault(owner, [0, 0, 0, 0])
            for i in range(4):
                acc[i] += cur[i] - prev[i]
            prev = cur
        return out

    def enter(self, stage: str, *, mark: bool = True) -> None:
        """Open ``stage``; ``mark=False`` takes no getrusage here (the interval's faults and switches then
        count in the stage of the next boundary that takes one)."""
        if self.sync:
            self.sync()
        now = time.perf_counter_ns()
        # No stage open: the interval since the last boundary is caller code preparing this stage.
        owner = self.stack[-1] if self.stack else caller_key(stage)
        self.acc[owner] = self.acc.get(owner, 0) + now - self.last
        if self.ru and mark:
            self.marks.append((owner, self.ru(_SELF)))
        self.stack.append(stage)
        self.last = now

    def exit(self, *, mark: bool = True) -> None:
        if self.sync:
            self.sync()
        now = time.perf_counter_ns()
        if self.stack:
            top = self.stack.pop()
            self.acc[top] = self.acc.get(top, 0) + now - self.last
            if self.ru and mark:
                self.marks.append((top, self.ru(_SELF)))
        self.last = now

    def enter_unmarked(self, stage: str) -> None:
        self.enter(stage, mark=False)

    def exit_unmarked(self) -> None:
        self.exit(mark=False)


class _Region:
    __slots__ = ("timer", "stage")

    def __init__(self, timer: StageTimer, stage: str) -> None:
        self.timer, self.stage = timer, stage

    def __enter__(self) -> None:
        self.timer.enter(self.stage)

    def __exit__(self, *exc: Any) -> None:
        self.timer.exit()


class ForwardWrappers:
    """Wrap modules' ``forward`` (instance attribute) instead of registering hooks; ``remove()`` restores them.

    A wrapper costs one Python call per module call and keeps ``nn.Module.__call__``
    on its fast path (no hook lists to walk), which is why the timing pass uses it.
    """

    def __init__(self) -> None:
        self._saved: list[tuple[nn.Module, Any]] = []

    def wrap(self, mod: nn.Module, before: Callable[[], None], after: Callable[[], None]) -> None:
        previous = mod.__dict__.get("forward")
        inner = mod.forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            before()
            try:
                return inner(*args, **kwargs)
            finally:
                after()

        self._saved.append((mod, previous))
        mod.forward = forward  # type: ignore[method-assign]

    def remove(self) -> None:
        for mod, previous in reversed(self._saved):
            if previous is None:
                mod.__dict__.pop("forward", None)
            else:
                mod.forward = previous  # type: ignore[method-assign]
        self._saved.clear()


def install_stage_hooks(model: nn.Module, roots: dict[str, str], timer: StageTimer) -> ForwardWrappers:
    """Wrap each stage root (module path -> stage) so its calls enter/exit the stage."""
    wrappers = ForwardWrappers()
    mods = dict(model.named_modules())
    for path, stage in roots.items():
        wrappers.wrap(mods[path], lambda _s=stage: timer.enter(_s), timer.exit)
    return wrappers


def hook_stage_roots(model: nn.Module, roots: dict[str, str], timer: StageTimer) -> list[Any]:
    """As :func:`install_stage_hooks`, with forward (pre-)hooks: hooks registered after these (request sharing's
    input expansions) then run inside the stage. Returns the handles (``remove()`` each); unknown paths skipped."""
    mods = dict(model.named_modules())
    handles = []
    for path, stage in roots.items():
        if path in mods:
            handles.append(mods[path].register_forward_pre_hook(lambda _m, _a, _s=stage: timer.enter(_s)))
            handles.append(mods[path].register_forward_hook(lambda _m, _a, _o: timer.exit(), always_call=True))
    return handles


def stage_seconds(timer: StageTimer) -> dict[str, float]:
    """Exclusive seconds per stage since the timer's last start (caller code between stages left out)."""
    return {k: ns * 1e-9 for k, ns in timer.acc.items() if not split_caller_key(k)}


def stage_rusage(steps: list[dict[str, list[int]]], central: list[int]) -> dict[str, dict[str, float]]:
    """Per stage, the mean per step over the ``central`` steps of each of :data:`RUSAGE_FIELDS`."""
    idx = [i for i in central if i < len(steps)]
    if not idx:
        return {}
    stages = {st for i in idx for st in steps[i]}
    return {
        st: {f: sum(steps[i].get(st, [0, 0, 0, 0])[k] for i in idx) / len(idx) for k, f in enumerate(RUSAGE_FIELDS)}
        for st in stages
    }


def attach_stage_rusage(root: Any, timer: StageTimer, central: list[int]) -> None:
    """Set ``extra.rusage`` (per-step means over the central steps) on every stage node under ``root``."""
    per_stage = stage_rusage(timer.rusage_steps, central)
    for node in root.children:
        if node.level == "stage" and node.name in per_stage:
            node.rusage = per_stage[node.name]


def cuda_sync() -> Callable[[], None] | None:
    import torch

    return torch.cuda.synchronize if torch.cuda.is_available() else None
