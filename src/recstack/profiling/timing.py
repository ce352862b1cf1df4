"""The low-overhead timing collector: stage boundaries only, exclusive accounting.

Wrappers around the ``forward`` of the *stage roots* (a handful of modules,
not every module; cheaper than forward hooks) and explicit regions around loss, backward and optimizer mark stage
boundaries with ``time.perf_counter_ns``. Time is exclusive: entering a nested
stage root pauses the enclosing stage, so stage times never double count.
With CUDA, boundaries synchronise the device first so kernels are charged to
the stage that launched them (this makes the timing pass slower on GPU, which
the overhead ratio shows).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


class StageTimer:
    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self.sync = sync
        self.acc: dict[str, int] = {}
        self.stack: list[str] = []
        self.last = 0

    def reset(self) -> None:
        self.acc = {}
        self.stack = []

    def start(self) -> int:
        if self.sync:
            self.sync()
        self.last = time.perf_counter_ns()
        return self.last

    def stop(self) -> int:
        if self.sync:
            self.sync()
        now = time.perf_counter_ns()
        if self.stack:  # an exception left a stage open: close everything
            self.acc[self.stack[-1]] = self.acc.get(self.stack[-1], 0) + now - self.last
            self.stack.clear()
        return now

    def enter(self, stage: str) -> None:
        if self.sync:
            self.sync()
        now = time.perf_counter_ns()
        if self.stack:
            top = self.stack[-1]
            self.acc[top] = self.acc.get(top, 0) + now - self.last
        self.stack.append(stage)
        self.last = now

    def exit(self) -> None:
        if self.sync:
            self.sync()
        now = time.perf_counter_ns()
        if self.stack:
            top = self.stack.pop()
            self.acc[top] = self.acc.get(top, 0) + now - self.last
        self.last = now


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


def cuda_sync() -> Callable[[], None] | None:
    return torch.cuda.synchronize if torch.cuda.is_available() else None
