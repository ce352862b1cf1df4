"""``recstack.annotate(model)``: profiler ranges named by module path around every module call.

Inside ``with recstack.annotate(model):`` every module's forward runs inside
a torch.profiler range ``recstack.module::<path>|<ClassName>`` (the root module's
path is empty). A trace recorded so carries the module hierarchy by path and
class, which ``recstack import`` reads back (the class feeds the stage type
rules, the path the name rules). Outside a profiler the ranges cost almost
nothing (torch's fast C++ range where present). Hooks are removed on exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the importer reads range names without torch
    from torch import nn

MODULE_RANGE = "recstack.module::"
TYPE_SEP = "|"


def range_name(path: str, type_name: str) -> str:
    """The range name of one module: ``recstack.module::<path>|<ClassName>``."""
    return f"{MODULE_RANGE}{path}{TYPE_SEP}{type_name}"


def parse_range_name(name: str) -> tuple[str, str | None]:
    """(path, class name or None) of a module range name (``recstack.module::path`` without a class too:
    the ranges of a live profile's op pass)."""
    body = name[len(MODULE_RANGE):]
    path, sep, tname = body.rpartition(TYPE_SEP)
    return (path, tname or None) if sep else (body, None)


@contextmanager
def annotate(model: nn.Module) -> Iterator[nn.Module]:
    """Name a profiler range after each module's path (and class) around every forward call of ``model``."""
    from recstack.profiling.oppass import profiler_range

    handles: list[Any] = []
    for path, mod in model.named_modules():
        name = range_name(path, type(mod).__name__)
        open_ranges: list[Any] = []  # a module called re-entrantly opens one range per call

        def pre(_m: nn.Module, _args: Any, _name: str = name, _open: list = open_ranges) -> None:
            rf = profiler_range(_name)
            rf.__enter__()
            _open.append(rf)

        def post(_m: nn.Module, _args: Any, _out: Any, _open: list = open_ranges) -> None:
            if _open:
                _open.pop().__exit__(None, None, None)

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post, always_call=True))
    try:
        yield model
    finally:
        for h in handles:
            h.remove()
