"""The low-overhead timing collector: stage boundaries only, exclusive accounting.

Wrappers around the ``forward`` of the *stage roots* (a handful of modules,
not every module; cheaper than forward hooks) and explicit regions around loss, backward and optimizer mark stage
boundaries with ``time.perf_counter_ns``. Time is exclusive: entering a nested
stage root pauses the enclosing stage, so stage times never double count.
With CUDA, boundaries synchronise the device first so kernels are charged to
the stage that launched them (this makes the timing pass slower on GPU, which
the overhead ratio shows).

A boundary costs one clock read and one append to the timer's log, inside one
Python frame (the root wrapper inlines it); the exclusive times are worked out
from the log after the step's clock stops. In a timer made with
``rusage=True`` every boundary also takes one ``getrusage(RUSAGE_SELF)`` (one
syscall, about 2 us) so that the kernel's per-process counters (minor and
major page faults, voluntary and involuntary context switches) are charged to
stages the same exclusive way (a stage's caller code's to the stage). The
timing pass uses such a timer only for a few extra steps after the timed ones
(:data:`recstack.profiling.passes.COUNTER_STEPS`), so the timed steps carry no
syscall; ``stage_rusage`` averages the counters over the central counter steps
for the stage nodes' ``extra.rusage``.

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
    """Exclusive stage times (``acc``: key -> ns) and per-stage kernel counters of the steps between
    :meth:`start` and :meth:`stop`.

    A boundary only appends ``(stage or None, clock, rusage or None)`` to a log (None: an exit); :meth:`stop`
    works out the exclusive times from the log after the step's clock stopped, so a boundary costs a
    clock read and an append (the accounting at every boundary made a 52-table DeepFM's ~100 boundaries
    per step cost 1.28x). With ``rusage`` every marked boundary also takes ``getrusage`` (a syscall,
    about 2 us: the timing pass uses such a timer only in its counter steps); the deltas are charged
    like time, a stage's caller code's to the stage.
    """

    def __init__(self, sync: Callable[[], None] | None = None, *, rusage: bool = True) -> None:
        self.sync = sync
        self.acc: dict[str, int] = {}
        self.log: list[tuple[str | None, int, Any]] = []
        self.first = 0
        self.ru = _getrusage if rusage else None
        self._ru0: Any = None
        self.rusage_steps: list[dict[str, list[int]]] = []  # one dict per start()/stop(): stage -> RUSAGE_FIELDS

    @property
    def last(self) -> int:
        """The clock at the latest boundary (or start)."""
        return self.log[-1][1] if self.log else self.first

    def reset(self) -> None:
        self.acc.clear()
        self.log.clear()  # in place: the root wrappers (:meth:`wrap`) append to it

    def start(self) -> int:
        self.reset()
        self._ru0 = self.ru(_SELF) if self.ru else None
        if self.sync:
            self.sync()
        self.first = time.perf_counter_ns()
        return self.first

    def stop(self) -> int:
        if self.sync:
            self.sync()
        now = time.perf_counter_ns()
        self.log.append((None, now, self.ru(_SELF) if self.ru else None))
        self._replay()
        return now

    def _replay(self) -> None:
        """``acc`` (and, with rusage, this step's counters) from the log; the last entry is stop()'s."""
        acc, stack, last = self.acc, [], self.first
        ru: dict[str, list[int]] = {}
        prev = _ru_tuple(self._ru0) if self._ru0 is not None else None
        for stage, t, r in self.log:
            if stage is not None:  # entering: what ran since the last boundary is the open stage's or caller code
                owner = stack[-1] if stack else caller_key(stage)
                stack.append(stage)
            else:  # leaving (or stop(): an exception may have left stages open, the top one gets the rest)
                owner = stack.pop() if stack else OUTSIDE
            acc[owner] = acc.get(owner, 0) + t - last
            last = t
            if r is not None and prev is not None:
                cur = _ru_tuple(r)
                tot = ru.setdefault(split_caller_key(owner) or owner, [0, 0, 0, 0])
                for i in range(4):
                    tot[i] += cur[i] - prev[i]
                prev = cur
        acc.pop(OUTSIDE, None)  # `other` is the step's time less the stages' (timing pass)
        if self.ru:
            self.rusage_steps.append(ru)

    def enter(self, stage: str, *, mark: bool = True) -> None:
        """Open ``stage``; ``mark=False`` never takes getrusage here (the interval's faults and switches then
        count where the next marked boundary charges them)."""
        if self.sync:
            self.sync()
        self.log.append((stage, time.perf_counter_ns(), self.ru(_SELF) if self.ru and mark else None))

    def exit(self, *, mark: bool = True) -> None:
        if self.sync:
            self.sync()
        self.log.append((None, time.perf_counter_ns(), self.ru(_SELF) if self.ru and mark else None))

    def wrap(self, stage: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        """``inner`` (a stage root's ``forward``) between :meth:`enter` ``(stage)`` and :meth:`exit`, inlined:
        one Python frame per root call (benchmarks/LOG.md)."""
        append, sync, ru, clock = self.log.append, self.sync, self.ru, time.perf_counter_ns

        def forward(*args: Any, **kwargs: Any) -> Any:
            if sync is not None:
                sync()
            append((stage, clock(), ru(_SELF) if ru is not None else None))
            try:
                return inner(*args, **kwargs)
            finally:
                if sync is not None:
                    sync()
                append((None, clock(), ru(_SELF) if ru is not None else None))

        return forward

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
        inner = mod.forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            before()
            try:
                return inner(*args, **kwargs)
            finally:
                after()

        self.replace(mod, forward)

    def replace(self, mod: nn.Module, forward: Callable[..., Any]) -> None:
        """Make ``forward`` the module's ``forward`` until :meth:`remove`."""
        self._saved.append((mod, mod.__dict__.get("forward")))
        mod.forward = forward  # type: ignore[method-assign]

    def remove(self) -> None:
        for mod, previous in reversed(self._saved):
            if previous is None:
                mod.__dict__.pop("forward", None)
            else:
                mod.forward = previous  # type: ignore[method-assign]
        self._saved.clear()


def install_stage_hooks(model: nn.Module, roots: dict[str, str], timer: StageTimer) -> ForwardWrappers:
    """Wrap each stage root (module path -> stage) so its calls enter/exit the stage (:meth:`StageTimer.wrap`)."""
    wrappers = ForwardWrappers()
    mods = dict(model.named_modules())
    for path, stage in roots.items():
        wrappers.replace(mods[path], timer.wrap(stage, mods[path].forward))
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
