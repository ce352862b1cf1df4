"""Keep native libraries' log lines out of recstack's output.

Kineto (torch.profiler's back end) writes ``USDT: ... SyncActivityProfilerHandler.cpp:52] profiler_start``
(and ``profiler_stop``) from C++ straight to file descriptor 2, where Python's
``sys.stderr`` cannot filter them. :func:`filtered_fd2` points fd 2 at a
temporary file for a short span (profiler start, profiler stop), then restores
it and writes back every line that is not such a native log line, so
recstack's own messages and real warnings survive (later, in order).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

# ``USDT:2026-12-01 06:08:35 9748:9748 SyncActivityProfilerHandler.cpp:52] profiler_start`` and the
# ``STAGE:...ActivityProfilerController.cpp:...] Completed Stage: ...`` lines of older Kineto builds.
NATIVE_LOG = re.compile(r"^(USDT|STAGE):\S+ \S+ \d+:\d+ \w+\.cpp:\d+\]")


def is_native_log(line: str) -> bool:
    return bool(NATIVE_LOG.match(line))


@contextlib.contextmanager
def filtered_fd2() -> Iterator[None]:
    """Capture fd 2 while inside; afterwards re-emit every captured line but Kineto's log lines."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", errors="replace")
            kept = "".join(ln for ln in text.splitlines(keepends=True) if not is_native_log(ln))
            if kept:
                os.write(2, kept.encode("utf-8"))


@contextlib.contextmanager
def quiet_native(cm: Any) -> Iterator[Any]:
    """Enter and exit the context manager ``cm`` (a torch profiler) with fd 2 filtered; the body is not."""
    with filtered_fd2():
        value = cm.__enter__()
    try:
        yield value
    except BaseException:
        with filtered_fd2():
            if not cm.__exit__(*sys.exc_info()):
                raise
    else:
        with filtered_fd2():
            cm.__exit__(None, None, None)
