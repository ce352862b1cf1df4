"""Progress of long phases on stderr (rich), so stdout carries only the result.

One phase at a time: ``with phase("model build"):`` or, where a call site
should not re-indent a block, ``advance("timing pass", estimate_s=...)``
(ends the running phase, starts the next) and ``finish()``. On a terminal a
spinner shows the phase, its elapsed time and the estimate where there is
one; every finished phase leaves one line (``done  timing pass  1.2 s (est.
1.0 s)``). Shown when stderr is a terminal, or when forced
(``configure(force=True)`` or ``RECSTACK_PROGRESS=always``; then plain lines,
which is what tests read); hidden by ``configure(quiet=True)`` (the CLI's
``--quiet``) or ``RECSTACK_PROGRESS=never``.

The console writes to a duplicate of file descriptor 2 taken when it is first
used, so that :func:`recstack.profiling.native_stderr.filtered_fd2` (which
points fd 2 elsewhere for a moment) never swallows progress.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

_state: dict[str, Any] = {"quiet": False, "force": None, "console": None, "live": None, "current": None}


def configure(*, quiet: bool | None = None, force: bool | None = None) -> None:
    """``quiet``: show nothing; ``force``: show even when stderr is not a terminal (plain lines).

    The console is re-created at next use, on the file descriptor 2 of that moment.
    """
    finish()
    _state["console"] = None
    if quiet is not None:
        _state["quiet"] = quiet
    if force is not None:
        _state["force"] = force


def _mode() -> str:
    """``off``, ``plain`` (lines) or ``live`` (spinner on a terminal)."""
    env = os.environ.get("RECSTACK_PROGRESS", "auto").lower()
    if _state["quiet"] or env == "never":
        return "off"
    tty = _stderr_is_tty()
    if tty:
        return "live"
    return "plain" if (_state["force"] or env == "always") else "off"


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _file() -> TextIO:
    con = _state["console"]
    if con is None:
        try:
            stream: TextIO = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
        except OSError:
            stream = sys.stderr
        from rich.console import Console

        con = _state["console"] = Console(file=stream, stderr=False, highlight=False, soft_wrap=True)
    return con


def _fmt(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def advance(name: str, estimate_s: float | None = None, *, measuring: bool = False) -> None:
    """End the running phase (if any) and start ``name``.

    ``measuring``: the phase times something (the timing and op passes, the machine
    benchmarks), so it gets a still line, never the live spinner, whose refresh
    thread would take the GIL during the timed work.
    """
    finish()
    mode = _mode()
    if mode == "off":
        return
    est = f" (est. {_fmt(estimate_s)})" if estimate_s and estimate_s > 0 else ""
    _state["current"] = (name, time.perf_counter(), estimate_s, mode)
    con = _file()
    if mode == "plain" or measuring:
        con.print(f"recstack: {name}{est} ...", markup=False)
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    live = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        TimeElapsedColumn(),
        TextColumn("{task.fields[est]}", markup=False),
        console=con,
        transient=True,
        refresh_per_second=2,  # the refresh thread takes the GIL: rarely, so timed steps barely notice
        redirect_stderr=False,
        redirect_stdout=False,
    )
    live.add_task(name, total=None, est=est.strip())
    live.start()
    _state["live"] = live


def finish() -> None:
    """End the running phase, leaving one line with its elapsed time."""
    cur = _state["current"]
    live = _state["live"]
    _state["current"] = _state["live"] = None
    if live is not None:
        live.stop()
    if cur is None:
        return
    name, t0, estimate_s, _mode_used = cur
    est = f" (est. {_fmt(estimate_s)})" if estimate_s and estimate_s > 0 else ""
    _file().print(f"recstack: {name} done in {_fmt(time.perf_counter() - t0)}{est}", markup=False)


@contextlib.contextmanager
def phase(name: str, estimate_s: float | None = None) -> Iterator[None]:
    """One phase around a block (ended even when the block raises)."""
    advance(name, estimate_s)
    try:
        yield
    finally:
        finish()


def reporter(say: Any = None) -> Any:
    """A ``progress(msg)`` callback (as the machine benchmarks take) that starts a phase per benchmark group.

    The group is the message's first two words (``fp32 GEMM``, ``gather setup``, ``latency round``
    -> ``gather``, ``latency``); ``say`` (if given) still gets every message.
    """
    last = [""]

    def call(msg: str) -> None:
        if say is not None:
            say(msg)
        words = msg.split()
        group = " ".join(w for w in words[:2] if w not in ("setup", "round")) or msg
        if group != last[0]:
            last[0] = group
            advance(f"machine: {group}", measuring=True)

    return call


def measuring_lines() -> Callable[[str], None]:
    """Print one line per benchmark step (set-up lines once per kind, every timing round) to stderr."""
    last = [""]

    def say(msg: str) -> None:
        key = " ".join(msg.split()[:2])
        if key != last[0] or " round " in msg:
            last[0] = key
            sys.stderr.write(f"  measuring: {msg}\n")
            sys.stderr.flush()

    return say
