"""Tags carried through every op of a forward: the dispatch-level provenance both analyses share.

:class:`TagMode` is a ``TorchDispatchMode`` that keeps an integer tag per tensor
storage (so a view, an in-place write or an ``out=`` write carries it to every
tensor sharing that memory) and the stack of module paths running, with forward
pre/post hooks on every module. What a tag means and how an op combines its
inputs' tags is the subclass's: the request-sharing analysis
(:class:`recstack.sharing.provenance.Provenance`) tags inputs by request or
candidate side; stage detection (:class:`recstack.profiling.dataflow.StageFlow`)
tags lookups, sequences and the layers they pass through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.hooks import RemovableHandle

ArgPath = tuple[Any, ...]


def tensor_key(t: torch.Tensor) -> int:
    """The key of ``t``'s storage (views share it); tensors without storage memory are keyed by identity."""
    try:
        ptr = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return -id(t)
    return ptr if ptr else -id(t)


def walk(obj: Any, path: ArgPath = ()) -> Iterator[tuple[ArgPath, torch.Tensor]]:
    """Every tensor in a nest of tuples, lists, dicts and dataclasses, with its path."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from walk(v, (*path, i))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk(v, (*path, k))
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from walk(getattr(obj, f.name), (*path, f.name))


def replace_at(obj: Any, path: ArgPath, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``obj`` with the tensor at ``path`` replaced by ``fn(tensor)`` (containers rebuilt, not mutated)."""
    if not path:
        return fn(obj)
    head, rest = path[0], path[1:]
    if isinstance(obj, tuple):
        return tuple(replace_at(v, rest, fn) if i == head else v for i, v in enumerate(obj))
    if isinstance(obj, list):
        return [replace_at(v, rest, fn) if i == head else v for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        return {k: replace_at(v, rest, fn) if k == head else v for k, v in obj.items()}
    return dataclasses.replace(obj, **{head: replace_at(getattr(obj, head), rest, fn)})


class TagMode(TorchDispatchMode):
    """Per-storage integer tags and the running module stack (module docstring).

    Subclasses implement ``__torch_dispatch__`` (read :meth:`tag_of`, write :meth:`set_tag`)
    and may override :meth:`on_enter` (may return replacement ``(args, kwargs)``) and :meth:`on_exit`.
    ``path`` is the innermost running module (``""``: outside every module).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self._tags: dict[int, int] = {}
        self._stack: list[str] = []
        self.call_order: list[str] = []
        self._handles: list[RemovableHandle] = []

    # -- tags ------------------------------------------------------------------------------------
    def tag(self, obj: Any, value: int) -> None:
        """Tag every tensor in ``obj`` (a batch input) with ``value``."""
        for _, t in walk(obj):
            self._tags[tensor_key(t)] = value

    def tag_of(self, t: torch.Tensor) -> int:
        return self._tags.get(tensor_key(t), 0)

    def set_tag(self, t: torch.Tensor, value: int) -> None:
        self._tags[tensor_key(t)] = value

    @property
    def path(self) -> str:
        return self._stack[-1] if self._stack else ""

    # -- module tracking ------------------------------------------------------------------------
    def on_enter(self, path: str, args: Any, kwargs: Any) -> Any:
        """Called as module ``path`` starts; a non-None result replaces its ``(args, kwargs)``."""
        return None

    def on_exit(self, path: str, output: Any) -> None:
        """Called as module ``path`` returns (also when it raised: ``output`` is then None)."""

    def _install(self) -> None:
        for path, mod in self.model.named_modules():
            def pre(_m: nn.Module, args: Any, kwargs: Any, _p: str = path) -> Any:
                self._stack.append(_p)
                self.call_order.append(_p)
                return self.on_enter(_p, args, kwargs)

            def post(_m: nn.Module, _a: Any, out: Any, _p: str = path) -> None:
                if self._stack:
                    self._stack.pop()
                self.on_exit(_p, out)

            self._handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
            self._handles.append(mod.register_forward_hook(post, always_call=True))

    def __enter__(self) -> TagMode:
        self._install()
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            for h in self._handles:
                h.remove()
            self._handles.clear()


__all__ = ["ArgPath", "TagMode", "replace_at", "tensor_key", "walk"]
