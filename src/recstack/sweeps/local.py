"""The local executor: long-lived worker processes (:mod:`recstack.sweeps.worker`), one point in flight each.

A point that crashes its worker (a segfault, the kernel's OOM killer), that
runs past the per-point timeout (the worker is killed), or that raises,
loses that point only: the result says why, a fresh worker takes the next
point, and the sweep goes on. Workers are killed when the sweep ends, and
die with it if it is killed (parent-death signal; they also share its
process group, so ``kill -- -PGID`` reaches them all).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from recstack.sweeps.worker import die_with_parent

READY_TIMEOUT_S = 300.0  # importing torch on a loaded host can take a while
# The worker's program: the point runner calls the public API, so it lives in the interface layer.
WORKER_MAIN = "import sys; from recstack.sweeps.runner import worker_main; sys.exit(worker_main())"


@dataclass
class Job:
    point_id: str
    config: Any  # RunConfig
    profile_path: str
    attempts: int = 1


@dataclass
class _Worker:
    proc: subprocess.Popen[bytes]
    buf: bytes = b""
    job: Job | None = None
    started: float = 0.0
    spawned_s: float = field(default=0.0)


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])  # the folder holding the recstack package


class LocalExecutor:
    name = "local"

    def __init__(self, *, parallel: int = 1, timeout_s: float = 600.0, log: str | Path | None = None,
                 min_timed_s: float | None = None) -> None:
        self.min_timed_s = min_timed_s
        self.parallel = max(1, parallel)
        self.timeout_s = timeout_s
        self.log_path = Path(log) if log else None
        self.spawn_s = 0.0  # total seconds spent starting workers (the sweep's overhead)
        self._log: IO[bytes] | None = None

    # -- workers ----------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        t0 = time.perf_counter()
        env = dict(os.environ)
        env["RECSTACK_PROGRESS"] = "never"
        env["RECSTACK_SWEEP_PARENT"] = str(os.getpid())
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH", "")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER_MAIN],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log or subprocess.DEVNULL,
            env=env, preexec_fn=die_with_parent, bufsize=0,
        )
        w = _Worker(proc)
        line = self._read_line(w, READY_TIMEOUT_S)
        if line is None or "ready" not in line:
            self._kill(w)
            raise RuntimeError(f"a sweep worker did not start (see {self.log_path or 'its stderr'})")
        self.spawn_s += time.perf_counter() - t0
        return w

    @staticmethod
    def _kill(w: _Worker) -> None:
        if w.proc.poll() is None:
            w.proc.kill()
        w.proc.wait()
        for f in (w.proc.stdin, w.proc.stdout):
            if f is not None:
                f.close()

    @staticmethod
    def _read_line(w: _Worker, timeout: float) -> dict[str, Any] | None:
        """The next JSON line from ``w`` within ``timeout`` s; None at EOF or timeout (see ``w.proc.poll()``)."""
        assert w.proc.stdout is not None
        fd = w.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while b"\n" not in w.buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                w.buf += chunk
        finally:
            sel.close()
        line, _, w.buf = w.buf.partition(b"\n")
        return json.loads(line)

    # -- running ------------------------------------------------------------------------------
    def run(self, jobs: list[Job], on_result: Callable[[Job, dict[str, Any]], None]) -> None:
        """Run ``jobs`` (in order, ``parallel`` at a time); ``on_result(job, result)`` as each finishes."""
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in finally)
        workers: list[_Worker] = []
        queue = list(jobs)
        try:
            while queue or any(w.job for w in workers):
                while queue and sum(1 for w in workers if w.job) < self.parallel:
                    idle = next((w for w in workers if w.job is None), None)
                    if idle is None:
                        idle = self._spawn()
                        workers.append(idle)
                    self._submit(idle, queue.pop(0))
                self._collect(workers, on_result)
        finally:
            for w in workers:
                self._kill(w)
            if self._log is not None:
                self._log.close()
                self._log = None

    def _submit(self, w: _Worker, job: Job) -> None:
        assert w.proc.stdin is not None
        req = {"config": job.config.model_dump(mode="json"), "profile_path": job.profile_path,
               "min_timed_s": self.min_timed_s}
        w.job, w.started = job, time.monotonic()
        try:
            w.proc.stdin.write((json.dumps(req) + "\n").encode())
            w.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the worker died; _collect finds EOF and records why

    def _collect(self, workers: list[_Worker], on_result: Callable[[Job, dict[str, Any]], None]) -> None:
        """Wait for the first busy worker to answer, die, or run out of time; hand on its result."""
        busy = [w for w in workers if w.job]
        sel = selectors.DefaultSelector()
        for w in busy:
            assert w.proc.stdout is not None
            sel.register(w.proc.stdout.fileno(), selectors.EVENT_READ, w)
        try:
            first_deadline = min(w.started + self.timeout_s for w in busy)
            events = sel.select(max(0.0, first_deadline - time.monotonic())) if not any(b"\n" in w.buf for w in busy) else []
        finally:
            sel.close()
        ready = [key.data for key, _ in events] + [w for w in busy if b"\n" in w.buf]
        for w in busy:
            if w in ready:
                res = self._read_line(w, max(1.0, w.started + self.timeout_s - time.monotonic()))
            elif time.monotonic() >= w.started + self.timeout_s:
                res = None
            else:
                continue
            job = w.job
            assert job is not None
            if res is None:
                res = self._lost(w)
                workers.remove(w)
            w.job = None
            on_result(job, res)

    def _lost(self, w: _Worker) -> dict[str, Any]:
        """The result of a point whose worker died or ran out of time (the worker is killed either way)."""
        elapsed = time.monotonic() - w.started
        code = w.proc.poll()
        self._kill(w)
        if code is None:
            return {"status": "timeout", "reason": f"no result within the {self.timeout_s:g} s per-point timeout; "
                    "the worker was killed", "wall_s": elapsed, "stages": []}
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (the kernel's out-of-memory killer sends SIGKILL)" if -code == signal.SIGKILL else ""
            why = f"the worker died of {name}{hint}"
        else:
            why = f"the worker exited with code {code}"
        return {"status": "failed", "reason": why, "wall_s": elapsed, "stages": []}


__all__ = ["Job", "LocalExecutor"]
