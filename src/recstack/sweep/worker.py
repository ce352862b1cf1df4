"""A long-lived sweep worker process: ``python -m recstack.sweep.worker``.

It imports torch once and runs points one after another (keeping the last
built model, :class:`recstack.sweep.point.BuildCache`). Protocol: one JSON
request per line on stdin (``{"config": {...}, "profile_path": "..."}``),
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


def main() -> int:
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    parent = int(os.environ.get("RECSTACK_SWEEP_PARENT", "0"))
    if parent and os.getppid() != parent:  # the parent died before the death signal was armed
        return 1
    from recstack.config.run import RunConfig
    from recstack.sweep.point import BuildCache, run_point

    cache = BuildCache()
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        cfg = RunConfig.model_validate(req["config"])
        result = run_point(cfg, req["profile_path"], cache)
        out.write(json.dumps(result, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
