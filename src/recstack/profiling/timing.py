"""The low-overhead timing collector: stage boundaries only, exclusive accounting.

Forward pre/post hooks on the *stage roots* (a handful of modules, not every
module) and explicit regions around loss, backward and optimizer mark stage
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
from torch.utils.hooks import RemovableHandle


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


def install_stage_hooks(model: nn.Module, roots: dict[str, str], timer: StageTimer) -> list[RemovableHandle]:
    """Hooks on each stage root (module path -> stage) that enter/exit the stage."""
    handles: list[RemovableHandle] = []
    mods = dict(model.named_modules())
    for path, stage in roots.items():
        mod = mods[path]

        def pre(_m: nn.Module, _a: Any, _stage: str = stage) -> None:
            timer.enter(_stage)

        def post(_m: nn.Module, _a: Any, _o: Any) -> None:
            timer.exit()

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post, always_call=True))
    return handles


def cuda_sync() -> Callable[[], None] | None:
    return torch.cuda.synchronize if torch.cuda.is_available() else None
