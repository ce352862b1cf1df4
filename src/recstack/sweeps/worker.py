"""A long-lived sweep worker process: ``python -m recstack.sweeps.worker``.

It imports torch once and runs points one after another (keeping the last
built model, :class:`recstack.sweeps.point.BuildCache`). Protocol: one JSON
request per line on stdin (``{"config": {...}, "profile_path": "...", "min_timed_s": ...}``),
one JSON result per line on the file descriptor that was stdout at start
(stdout itself is pointed at stderr, so that a model's prints cannot break
the protocol). The worker exits at end of input, and the kernel kills it when
its parent dies (``PR_SET_PDEATHSIG``, set by :func:`die_with_parent` before
exec), so it never outlives the sweep, not even a SIGKILLed one.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Linux: ask the kernel to SIGKILL this process when its parent exits (a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def serve(run: Callable[..., dict[str, Any]]) -> int:
    """Answer requests until end of input: ``run(RunConfig, profile_path, min_timed_s=...) -> result dict``."""
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    parent = int(os.environ.get("RECSTACK_SWEEP_PARENT", "0"))
    if parent and os.getppid() != parent:  # the parent died before the death signal was armed
        return 1
    from recstack.config.run import RunConfig

    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        result = run(RunConfig.model_validate(req["config"]), req["profile_path"],
                     min_timed_s=req.get("min_timed_s"))
        out.write(json.dumps(result, default=str) + "\n")
    return 0


__all__ = ["die_with_parent", "serve"]
