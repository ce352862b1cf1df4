"""Calling the user's own code (factories, batch functions, models) and owning up to whose error it is.

An exception is the user's when, walking its traceback from the innermost
frame outwards and skipping library frames (torch, the site-packages folder
torch lives in, the standard library), the first frame left is not
recstack's: the user's function raised, or called a library that did. It then
becomes a :class:`~recstack.errors.UserCodeError` naming the user's function,
with the user's own frames for the CLI to print; recstack's own bugs stay
what they are (the CLI reports them as internal errors).
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from recstack.errors import ConfigError, RecstackError, UserCodeError

_RECSTACK_DIR = str(Path(__file__).resolve().parent) + os.sep


def _library_dirs() -> tuple[str, ...]:
    """Folders of code that is neither recstack's nor the user's: torch's site-packages and the stdlib."""
    dirs = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")}
    torch_mod = sys.modules.get("torch")
    if torch_mod is not None and getattr(torch_mod, "__file__", None):
        dirs.add(str(Path(torch_mod.__file__).resolve().parent.parent))
    return tuple(str(Path(d).resolve()) + os.sep for d in dirs if d)


def _where(filename: str, libs: tuple[str, ...]) -> str:
    """'recstack', 'library' or 'user' for a frame's file."""
    if filename.startswith("<"):
        return "library"  # <frozen importlib...>, <string>
    path = str(Path(filename).resolve())
    if path.startswith(_RECSTACK_DIR):
        return "recstack"
    return "library" if path.startswith(libs) else "user"


def _frames(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return out


# recstack frames that only pass a call through to the model (the stage-boundary forward wrapper):
# an error raised below them is still judged by the frames above them.
_TRANSPARENT = frozenset({"ForwardWrappers.wrap.<locals>.forward"})


def culprit(exc: BaseException) -> tuple[FrameType, int] | None:
    """The user's innermost frame if the exception is the user's, else None."""
    libs = _library_dirs()
    for frame, line in reversed(_frames(exc.__traceback__)):
        kind = _where(frame.f_code.co_filename, libs)
        if kind == "recstack" and frame.f_code.co_qualname in _TRANSPARENT:
            continue
        if kind == "recstack":
            return None
        if kind == "user":
            return frame, line
    return None


def user_frames(exc: BaseException) -> str:
    """The traceback lines of the user's frames only (not recstack's, torch's or the stdlib's)."""
    libs = _library_dirs()
    summary = traceback.extract_tb(exc.__traceback__)
    mine = [fs for fs in summary if _where(fs.filename, libs) == "user"]
    return "".join(traceback.format_list(mine)).rstrip("\n")


def name_of(fn: Any) -> str:
    """A readable name for a user's callable: ``module.qualname``."""
    qual = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", repr(fn))
    mod = getattr(fn, "__module__", None)
    return f"{mod}.{qual}" if mod and mod != "__main__" else qual


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def as_user_error(exc: Exception, what: str) -> UserCodeError | None:
    """``exc`` as a UserCodeError (``what`` says which call of user code) if it is the user's, else None."""
    if isinstance(exc, RecstackError):
        return None
    found = culprit(exc)
    if found is None:
        return None
    frame, line = found
    where = f"{frame.f_code.co_qualname} ({Path(frame.f_code.co_filename).name}:{line})"
    err = UserCodeError(
        f"{what} raised {first_line(exc)}, in {where}",
        function=frame.f_code.co_qualname,
        user_frames=user_frames(exc),
    )
    err.__cause__ = exc
    return err


def call_user(fn: Callable[..., Any], *args: Any, what: str) -> Any:
    """``fn(*args)``; an exception from the user's code becomes a UserCodeError naming ``what``."""
    try:
        return fn(*args)
    except Exception as exc:
        err = as_user_error(exc, what)
        if err is None:
            raise
        raise err from exc


def is_factory(model: str) -> bool:
    """``package.module:factory`` (and not an existing file whose name has a colon)."""
    return ":" in model and not Path(model).exists()


def current_directory_on_path() -> None:
    """Put the current directory first on ``sys.path`` unless it is there, as ``python -m`` does: the
    ``recstack`` script's own first entry is its bin folder, so ``recstack profile mymodel:make`` would
    not find ``./mymodel.py`` otherwise."""
    cwd = os.getcwd()
    if not any(p in ("", ".", cwd) for p in sys.path):
        sys.path.insert(0, cwd)


def load_factory(spec: str) -> Callable[..., Any]:
    """``package.module:factory`` -> the factory ``(batch_size, seed) -> (model, batch_fn)``, imported from
    the current directory or ``sys.path`` (PYTHONPATH, installed packages)."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ConfigError(f"expected package.module:factory (got {spec!r})", field="model")
    current_directory_on_path()
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        missing = isinstance(exc, ModuleNotFoundError) and exc.name and mod_name.startswith(exc.name)
        where = (f"; it is looked for in the current directory ({os.getcwd()}), on PYTHONPATH and among "
                 "installed packages" if missing else "")
        raise ConfigError(f"cannot import {mod_name!r} ({exc}){where}", field="model") from None
    except SyntaxError as exc:  # the user's file does not parse: no frame of it exists, so say where it fails
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else mod_name
        raise UserCodeError(
            f"your module {mod_name} has a syntax error at {where}: {exc.msg}; fix it and run again",
            function=mod_name,
        ) from None
    except Exception as exc:
        err = as_user_error(exc, f"importing {mod_name}")
        if err is None:
            raise
        raise err from exc
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise ConfigError(f"{mod_name} has no callable {attr!r}", field="model")
    return fn


__all__ = ["as_user_error", "call_factory", "call_user", "check_batch", "culprit", "current_directory_on_path",
           "is_factory", "load_factory", "make_batches", "name_of", "user_frames"]


# -- factories and batch functions (the API, compile analysis and advisor load user models through these) --
def call_factory(
    factory: Callable[..., Any], spec: str, batch_size: int, seed: int
) -> tuple[Any, Callable[..., Any]]:
    """``factory(batch_size, seed)``, checked: it must return ``(nn.Module, batch function)``."""
    from torch import nn

    out = call_user(factory, batch_size, seed, what=f"your factory {spec}")
    if not (isinstance(out, tuple) and len(out) == 2):
        got = f"a {len(out)}-tuple" if isinstance(out, tuple) else f"{type(out).__name__} {out!r}"[:80]
        raise UserCodeError(f"your factory {spec} must return (model, batch_fn); it returned {got}", function=spec)
    model, batch_fn = out
    if not isinstance(model, nn.Module):
        raise UserCodeError(
            f"your factory {spec} must return (model, batch_fn) with model a torch.nn.Module "
            f"(got {type(model).__name__})", function=spec,
        )
    if not callable(batch_fn) and not isinstance(batch_fn, list):
        raise UserCodeError(
            f"your factory {spec} must return (model, batch_fn) with batch_fn callable (got {type(batch_fn).__name__})",
            function=spec,
        )
    return model, batch_fn


def make_batches(inputs: Any, batch_size: int, count: int) -> list[Any]:
    """Pre-generate ``count`` batches so that generation never runs inside a timed region."""
    if hasattr(inputs, "batch") and callable(inputs.batch):
        return [inputs.batch(batch_size, i) for i in range(count)]
    if callable(inputs):
        import inspect

        try:
            nparams = len(inspect.signature(inputs).parameters)
        except (TypeError, ValueError):
            nparams = 0
        what = f"your batch function {name_of(inputs)}"
        batches = [call_user(inputs, *((i,) if nparams >= 1 else ()), what=what) for i in range(count)]
        for b in batches:
            check_batch(b, what)
        return batches
    if isinstance(inputs, (list, tuple)) and not isinstance(inputs, str):
        if not inputs:
            raise ConfigError("the list of batches is empty", field="inputs")
        if any(b is None for b in inputs):
            raise ConfigError("a batch in the list is None", field="inputs")
        return list(inputs)
    raise ConfigError(
        "must be a workload (with .batch(batch_size, index)), a callable returning batches, or a list "
        f"(got {type(inputs).__name__})",
        field="inputs",
    )


_BATCH_KINDS = "a tensor, a tuple of arguments, a dict or recstack.Call(args, kwargs)"


def check_batch(batch: Any, what: str) -> None:
    import inspect
    from collections.abc import Iterator

    import torch

    if batch is None:
        raise UserCodeError(f"{what} returned None; return a batch ({_BATCH_KINDS})", function=what)
    if inspect.isgenerator(batch) or (isinstance(batch, Iterator) and not isinstance(batch, torch.Tensor)):
        raise UserCodeError(f"{what} returned a {type(batch).__name__}; return one batch per call "
                            f"({_BATCH_KINDS}), not an iterator", function=what)
