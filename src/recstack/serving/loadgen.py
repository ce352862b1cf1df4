"""The open-loop load generator and the worker pool.

One dispatcher loop (this process) lets every request arrive at its
*scheduled* time, whatever the workers are doing (open loop: a slow system
does not slow the load down, so there is no coordinated omission), into a
central FIFO queue per worker class (CPU, accelerator). The schedule is known
in advance, so a batch can be handed to a worker before it is due, stamped
with its arrival (``t_due``), and the worker starts it no earlier than that
(:mod:`recstack.serving.worker`: an idle worker sleeps, then spins, to the
arrival itself). The dispatcher brings arrivals into its queues
``lookahead_s`` (default :data:`LOOKAHEAD_S`) ahead and wakes for that when
the next one is half the lookahead away, so one wake-up hands out many
requests; it never spins. Where a batch may go:

* a class with **one worker**: its pipe is the class's FIFO queue, so every
  batch goes to it as soon as it is within the lookahead (up to
  :data:`PIPE_FRAMES_MAX` held; ``depth`` does not apply): the textbook M/D/1
  queue, with no round trip between a completion and the next start;
* **several workers**: a batch not yet due goes only to an idle worker (which
  will still be idle at its arrival: handing it over early cannot change
  where it is served), and a due batch to the worker holding the fewest,
  below ``depth``. ``depth`` 1 is one central FIFO queue (an M/D/c system),
  but every batch then waits for a pipe round trip (completion, then hand-off)
  when a worker finishes; ``depth`` 2 (the CLI's default) lets the next batch
  wait in a busy worker's pipe, committing it one batch early.

``lookahead_s`` 0 hands every batch over at its arrival (the dispatcher then
sleeps to each one; ``depth`` applies to every class).

The loop sleeps in ``select`` (microsecond timeouts) on the workers' process
sentinels, and on their pipes only while a batch waits in a queue (a
completion then matters at once: it makes room, or an idle worker); otherwise
it sleeps through completions and reads them on its next wake-up (each
wake-up costs tens of us of CPU on a VM). Hand-offs and results are
fixed-size frames (:data:`~recstack.serving.worker.BATCH`,
:data:`~recstack.serving.worker.RESULT`) written and read on the pipe's
descriptor directly (no pickling per request; all the batches one hand-out
gives a worker in one ``os.write``, all waiting results in one ``os.read``), and lateness goes into its histogram in bulk after the loop.
A request's release lateness is how late its first batch became servable:
for one handed over early, the worker's release (its wake-up) after the
arrival; for one the dispatcher found already due (it woke late), how late
it looked. ``select``, not ``epoll``: Python rounds epoll and poll timeouts
to milliseconds. Python's cyclic GC is left on: the loop keeps no new
container objects.

A worker that dies is replaced (a fresh process; it serves once it says
ready); the requests of its in-flight batches that were due count as failed,
batches not yet due go back to the head of their queue (nothing of them was
lost). SIGINT (or ``stop()``) stops the arrivals; what arrived is drained
until the deadline and the record is marked stopped (batches of requests due
after the stop, already handed over, are served but not counted). The
deadline is the end of the schedule plus ``grace_s``: requests unfinished
then are late.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import select
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from recstack.errors import RecstackError
from recstack.serving.plan import ACCEL, CPU, Plan
from recstack.serving.worker import (
    BATCH,
    BATCH_LEN,
    HEADER_LEN,
    READ_CHUNK,
    RESULT,
    RESULT_BODY,
    RESULT_LEN,
    RESULT_TAG,
    WorkerSetup,
    worker_main,
)

HIST_MAX_US = 3_600_000_000  # one hour, in microseconds
HIST_DIGITS = 3
START_TIMEOUT_S = 600.0
RETURN_TIMEOUT_S = 60.0  # after a run: how long in-flight batches may take to come back
MAX_WAIT_S = 0.05  # the loop looks at the stop flag at least this often
LOOKAHEAD_S = 0.02  # batches are handed over up to this long before they are due
# Batches one worker may hold. Its pipe is a Unix socketpair (multiprocessing.Pipe, duplex), whose send buffer
# counts each small write at ~770 bytes: ~278 one-result writes fit before a write would block, and a worker's
# unread results are among the batches it holds, so 256 keeps the worker's result writes from ever blocking.
PIPE_FRAMES_MAX = 256


def new_histogram() -> HdrHistogram:
    """Microseconds from 1 us to 1 h at 3 significant digits (0.1% resolution)."""
    return HdrHistogram(1, HIST_MAX_US, HIST_DIGITS)


@dataclass
class Worker:
    """One worker process and what the dispatcher knows about it."""

    wid: int
    cls: int
    proc: Any
    conn: Any
    ready: bool = False
    alive: bool = True
    pid: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    inflight: deque[int] = field(default_factory=deque)
    busy_s: float = 0.0
    served: int = 0
    replaced_by: int | None = None
    fd: int = -1  # the pipe's descriptor (per-batch frames are written and read on it directly)
    buf: bytearray = field(default_factory=bytearray)  # a partial frame read from the pipe


class WorkerPool:
    """Worker processes per class, started with ``spawn`` (each builds its own model: no fork of torch state)."""

    def __init__(self, setups: dict[int, WorkerSetup], counts: dict[int, int], *, max_replacements: int | None = None):
        self.ctx = mp.get_context("spawn")
        self.setups = setups
        self.counts = counts
        self.workers: list[Worker] = []
        self.version = 0  # changes whenever a worker is added or dies (the dispatcher's fd list follows it)
        total = sum(counts.values())
        self.replacements_left = 2 * total + 2 if max_replacements is None else max_replacements

    # -- life cycle --------------------------------------------------------------
    def spawn(self, cls: int) -> Worker:
        parent, child = self.ctx.Pipe(duplex=True)
        proc = self.ctx.Process(target=worker_main, args=(child, self.setups[cls]), daemon=True,
                                name=f"recstack-serve-{'cpu' if cls == CPU else 'accel'}-{len(self.workers)}")
        proc.start()
        child.close()
        w = Worker(len(self.workers), cls, proc, parent, fd=parent.fileno())
        self.workers.append(w)
        self.version += 1
        return w

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start every worker and wait until each says ready (a worker's build error is raised here)."""
        for cls, n in self.counts.items():
            for _ in range(n):
                self.spawn(cls)
        end = time.monotonic() + timeout_s
        for w in self.workers:
            left = end - time.monotonic()
            if not w.conn.poll(max(left, 0.0)):
                self.close()
                raise RecstackError(f"a serving worker did not start within {timeout_s:.0f} s")
            try:
                msg = w.conn.recv()
            except (EOFError, OSError):
                w.proc.join(timeout=5)
                code = w.proc.exitcode
                self.close()
                why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                raise RecstackError(f"a serving worker died while starting ({why}); if it ran out of memory, "
                                    "lower --scale or --workers") from None
            self._ready(w, msg)

    def _ready(self, w: Worker, msg: Any) -> None:
        if msg[0] == "error":
            self.close()
            raise RecstackError(f"a serving worker failed to start: {msg[1]}")
        _set_ready(w, msg)

    def live(self) -> list[Worker]:
        return [w for w in self.workers if w.alive]

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self.workers if w.alive and w.proc.pid]

    def close(self) -> None:
        for w in self.live():
            with contextlib.suppress(OSError, ValueError, BrokenPipeError):
                w.conn.send(None)
        for w in self.live():
            w.proc.join(timeout=5)
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join(timeout=5)
            w.alive = False
            with contextlib.suppress(OSError):
                w.conn.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _set_ready(w: Worker, msg: Any) -> None:
    """A worker's ("ready", pid, info) message: it serves from now on."""
    w.ready, w.pid, w.info = True, msg[1], msg[2]


@dataclass
class RunRecord:
    """What one load run observed (times in seconds from the run's start)."""

    plan: Plan
    t_start: np.ndarray  # per batch; NaN if never started (or its result never came)
    t_end: np.ndarray
    t_sent: np.ndarray  # per batch: when the dispatcher handed it to a worker (may precede its arrival)
    t_release: np.ndarray  # per batch: when it became servable in the worker (handed over and due)
    batch_worker: np.ndarray  # worker id per batch (-1: never dispatched)
    request_failed: np.ndarray  # bool per request: a batch was on a worker that died
    released: int  # requests released (all of them unless stopped)
    deadline_s: float
    elapsed_s: float  # start to the end of the loop
    stopped: str | None  # "SIGINT" / "stop" when stopped early
    lateness: HdrHistogram  # release lateness (us)
    loadgen_cpu_s: float  # the dispatcher's CPU time during the run
    worker_spin_s: float  # the workers' spinning to arrivals of batches they held early, all together
    lookahead_s: float
    worker_stats: list[dict[str, Any]]
    deaths: int


class SigintFlag:
    """SIGINT sets a flag (the loop checks it) instead of raising in the middle of bookkeeping; also what a
    search installs between its probes (a probe's own flag replaces it while the probe runs)."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.count = 0

    def __call__(self, _signum: int, _frame: Any) -> None:
        self.reason = "SIGINT"
        self.count += 1

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        try:
            old = signal.signal(signal.SIGINT, self)
        except ValueError:  # not the main thread: no handler (stop() still works)
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, old)


class LoadRun:
    """One open-loop run of ``plan`` on ``pool``; see the module docstring."""

    def __init__(self, plan: Plan, pool: WorkerPool, *, grace_s: float = 1.0, depth: int = 2,
                 lookahead_s: float = LOOKAHEAD_S, announce: Callable[[], None] | None = None) -> None:
        self.plan, self.pool, self.grace_s = plan, pool, grace_s
        self.depth = min(depth, PIPE_FRAMES_MAX)  # no write to or from a worker ever blocks
        self.lookahead_s = lookahead_s
        self.announce = announce  # called once when the load starts (the CLI's "load started" line)
        nb = plan.batch_size.size
        self.t_start = np.full(nb, np.nan)
        self.t_end = np.full(nb, np.nan)
        self.t_sent = np.full(nb, np.nan)
        self.t_release = np.full(nb, np.nan)
        self.batch_worker = np.full(nb, -1, dtype=np.int64)
        self.failed = np.zeros(plan.requests, dtype=bool)
        self.early = np.zeros(plan.requests, dtype=bool)  # queued before it was due
        self.queues: dict[int, deque[int]] = {CPU: deque(), ACCEL: deque()}
        self.stop_flag = SigintFlag()
        self.deaths = 0
        self.lateness = new_histogram()
        self.t0 = 0.0
        self.released = plan.requests  # requests due before a stop (all of them unless stopped)
        self.spun_s = 0.0  # the workers' spin before early batches' arrivals (from their results)
        self._fd_version = -1
        self._sizes: list[int] = plan.batch_size.tolist()
        self._batch_request: list[int] = plan.batch_request.tolist()
        self._due: list[float] = plan.arrivals[plan.batch_request].tolist()  # per batch: its request's arrival
        self._inflight = 0  # batches on live workers, all together
        self._fds: dict[int, tuple[Worker, bool]] = {}
        self._fd_list: list[int] = []  # pipes and sentinels
        self._sentinels: list[int] = []

    def stop(self) -> None:
        self.stop_flag.reason = self.stop_flag.reason or "stop"

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> RunRecord:
        with self.stop_flag.installed():
            return self._run()

    def _run(self) -> RunRecord:
        plan = self.plan
        arr = plan.arrivals.tolist()
        first = plan.request_first_batch.tolist()
        bcls = plan.batch_class.tolist()
        n = len(arr)
        deadline = (plan.duration_s if n == 0 else max(plan.duration_s, arr[-1])) + self.grace_s
        clock = time.perf_counter
        for w in self.pool.workers:
            w.busy_s, w.served = 0.0, 0
        cpu0 = time.process_time()
        if self.announce is not None:
            self.announce()
        self.t0 = t0 = clock() + 0.01
        ahead = self.lookahead_s
        i = 0
        stop_at: float | None = None
        late: list[int] = []  # release lateness (us) of requests found already due, into the histogram after
        while True:
            now = clock() - t0
            if stop_at is None:
                while i < n and arr[i] <= now + ahead:
                    if arr[i] <= now:
                        late.append(int((now - arr[i]) * 1e6))
                    else:
                        self.early[i] = True
                    for b in range(first[i], first[i + 1]):
                        self.queues[bcls[b]].append(b)
                    i += 1
                if self.stop_flag.reason:  # after the arrivals: those due by now did arrive
                    stop_at = now
                    deadline = min(deadline, now + self.grace_s)
                    self._stop_arrivals(now)
            queued = self.queues[CPU] or self.queues[ACCEL]
            if queued:
                self._take_results()  # results the loop slept through free room first
                self._hand_out()
                queued = self.queues[CPU] or self.queues[ACCEL]
            if (i >= n or stop_at is not None) and not self._inflight and not queued:
                break
            if now >= deadline or self.stop_flag.count > 1:
                break
            arriving = i < n and stop_at is None
            self._wait(self._timeout(now, arr[i] if arriving else None, deadline),
                       results=self._completion_matters(now) or not arriving)  # at the end: the last results
        elapsed = clock() - t0
        self._record_lateness(late)
        cpu = time.process_time() - cpu0
        stats, spun = self._worker_stats(), self.spun_s
        self._collect_stragglers()
        return RunRecord(
            plan, self.t_start, self.t_end, self.t_sent, self.t_release, self.batch_worker, self.failed,
            self.released if stop_at is not None else i, deadline, elapsed, self.stop_flag.reason, self.lateness,
            cpu, spun, self.lookahead_s, stats, self.deaths,
        )

    def _timeout(self, now: float, next_arrival: float | None, deadline: float) -> float:
        """How long the loop may sleep: until the next arrival is half the lookahead away (so one wake-up
        brings in about half a lookahead of arrivals), until a queued batch not yet due becomes due (the
        due rule then applies to it), the deadline, and at most :data:`MAX_WAIT_S`."""
        wake = deadline
        if next_arrival is not None:
            wake = min(wake, next_arrival - self.lookahead_s / 2)
        for q in self.queues.values():
            if q and self._due[q[0]] > now:
                wake = min(wake, self._due[q[0]])
        return min(max(wake - now, 0.0), MAX_WAIT_S)

    def _completion_matters(self, now: float) -> bool:
        """Whether the loop should wake for results: a queued batch that is due (it waits for room), or one not
        yet due in a class of several workers (it waits for an idle one). A single worker's queue held back
        only by the pipe bound waits for the next refill or its head's arrival (:meth:`_timeout`): its worker
        still holds batches until then, and waking for each of its results cost the dispatcher a wake-up per
        request at 20,000 req/s."""
        return any(q and (self._due[q[0]] <= now or not (self.lookahead_s > 0 and self.pool.counts.get(cls) == 1))
                   for cls, q in self.queues.items())

    def _stop_arrivals(self, now: float) -> None:
        """A stop: requests due after ``now`` never arrive (those already handed over are served, not
        counted); their queued batches are dropped."""
        self.released = int(np.searchsorted(self.plan.arrivals, now, side="right"))
        for q in self.queues.values():
            kept = [b for b in q if self._batch_request[b] < self.released]
            q.clear()
            q.extend(kept)

    def _record_lateness(self, late: list[int]) -> None:
        """Into the histogram in bulk (one ``record_value`` per distinct microsecond value, at least 1 us): the
        dispatcher's lateness of requests it found already due, and for each request queued early the
        worker's release of its first batch after the arrival (0 when the batch was in the worker's hands
        and due on time, or never handed over early)."""
        plan = self.plan
        first = plan.request_first_batch[:-1]
        early = np.flatnonzero(self.early[:self.released] if self.stop_flag.reason else self.early)
        fb = first[early]
        due = plan.arrivals[early]
        with np.errstate(invalid="ignore"):
            handed_early = self.t_sent[fb] <= due
            worker = np.where(handed_early & np.isfinite(self.t_release[fb]), self.t_release[fb] - due, 0.0)
        values_us = np.concatenate([np.asarray(late, dtype=np.int64),
                                    np.rint(np.maximum(worker, 0.0) * 1e6).astype(np.int64)])
        if not values_us.size:
            return
        values, counts = np.unique(np.maximum(values_us, 1), return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True):
            self.lateness.record_value(v, c)

    def _hand_out(self) -> None:
        """Each queue's batches in order, while the head has a taker (:meth:`_taker`); a worker's batches of
        one hand-out go in one write."""
        now = time.perf_counter() - self.t0
        req, failed = self._batch_request, self.failed
        given: dict[int, tuple[Worker, list[int]]] = {}
        for cls, q in self.queues.items():
            while q:
                b = q[0]
                if failed[req[b]]:
                    q.popleft()  # its request already failed: do not spend a worker on it
                    continue
                w = self._taker(cls, self._due[b] > now)
                if w is None:
                    break
                q.popleft()
                w.inflight.append(b)  # counted at once: the taker of the next batch sees it
                self._inflight += 1
                given.setdefault(w.wid, (w, []))[1].append(b)
        for w, batches in given.values():
            self._send(w, batches)

    def _taker(self, cls: int, early: bool) -> Worker | None:
        """Who takes the next batch of class ``cls`` (see the module docstring): with one worker in the class
        (and a lookahead) that worker, below :data:`PIPE_FRAMES_MAX`; else, for a batch not yet due, an idle
        worker; for a due one the worker holding the fewest, below ``depth`` (the first on ties: breadth
        first, so every idle worker gets a batch before any gets its second)."""
        single = self.lookahead_s > 0 and self.pool.counts.get(cls) == 1
        best = None
        for w in self.pool.workers:
            if w.cls != cls or not (w.alive and w.ready):
                continue
            held = len(w.inflight)
            if single:
                return w if held < PIPE_FRAMES_MAX else None
            if early:
                if not held:
                    return w
            elif held < self.depth and (best is None or held < len(best.inflight)):
                best = w
        return best

    def _send(self, w: Worker, batches: list[int]) -> None:
        """Write ``batches`` (already in ``w.inflight``) to ``w`` in one ``os.write``, each frame stamped when
        it was packed (before the write: the worker may start before the write returns). If the worker is
        gone they go back to the head of their queue, for another worker."""
        clock, t0, sizes, due = time.perf_counter, self.t0, self._sizes, self._due
        frames = []
        for b in batches:
            sent = clock()
            frames.append(BATCH.pack(BATCH_LEN, b, sizes[b], b, sent, t0 + due[b]))
            self.t_sent[b] = sent - t0
            self.batch_worker[b] = w.wid
        try:
            data = memoryview(b"".join(frames))
            while data:  # a signal can cut a write short
                data = data[os.write(w.fd, data):]
        except OSError:
            for _ in batches:
                w.inflight.pop()
            self._inflight -= len(batches)
            self.queues[w.cls].extendleft(reversed(batches))
            self._died(w)

    def _take_results(self) -> None:
        """Read the results that came while the loop slept without watching the pipes (one zero-timeout
        ``select``)."""
        self._wait(0.0)

    def _wait(self, timeout: float, *, results: bool = True) -> bool:
        """Sleep until a sentinel (and, with ``results``, a pipe) is readable or ``timeout`` passes (select:
        microsecond timeouts, where Python's epoll and poll have milliseconds); whether anything was.
        Without ``results`` the loop sleeps through completions (each wake-up costs tens of us of CPU) and
        reads them on its next wake-up."""
        if self.pool.version != self._fd_version:  # rebuilt only when a worker is added or dies
            self._fds = {}
            for w in self.pool.workers:
                if w.alive:
                    self._fds[w.fd] = (w, False)
                    self._fds[w.proc.sentinel] = (w, True)
            self._fd_list = list(self._fds)
            self._sentinels = [fd for fd, (_w, sentinel) in self._fds.items() if sentinel]
            self._fd_version = self.pool.version
        fds = self._fds
        try:
            ready, _, _ = select.select(self._fd_list if results else self._sentinels, [], [], timeout)
        except InterruptedError:
            return True
        if not ready:
            return False
        for fd in ready:
            w, is_sentinel = fds[fd]
            if w.alive and not is_sentinel:
                self._read(w)
        for fd in ready:
            w, is_sentinel = fds[fd]
            if w.alive and is_sentinel:
                self._drain_pipe(w)  # what it sent before dying still counts
                self._died(w)
        return True

    def _drain_pipe(self, w: Worker) -> None:
        """Take all the worker's frames that are in its pipe."""
        while w.alive and select.select([w.fd], [], [], 0)[0]:
            if not self._read(w):
                return

    def _read(self, w: Worker) -> bool:
        """One ``os.read`` of the pipe (select said it is readable), then every whole frame in it; a partial
        frame waits in ``w.buf``. Whether anything came (end of file: the worker is gone)."""
        try:
            data = os.read(w.fd, READ_CHUNK)
        except OSError:
            data = b""
        if not data:
            self._died(w)
            return False
        if not w.buf and len(data) == RESULT.size and data[HEADER_LEN] == RESULT_TAG:  # the usual: one result
            _, _, b, tr, ts, te, spun = RESULT.unpack(data)
            self._result(w, b, tr, ts, te, spun)
            return True
        buf = w.buf
        buf += data
        pos, end = 0, len(buf)
        while w.alive and end - pos >= HEADER_LEN:
            size = int.from_bytes(buf[pos:pos + HEADER_LEN], "big")
            body = pos + HEADER_LEN
            if end - body < size:
                break
            if size == RESULT_LEN and buf[body] == RESULT_TAG:
                _, b, tr, ts, te, spun = RESULT_BODY.unpack_from(buf, body)
                self._result(w, b, tr, ts, te, spun)
            else:  # a control message, pickled by the worker (ready / error)
                self._control(w, pickle.loads(bytes(buf[body:body + size])))
            pos = body + size
        del buf[:pos]
        return True

    def _control(self, w: Worker, msg: Any) -> None:
        if msg[0] == "ready":
            _set_ready(w, msg)
        else:  # a replacement failed to build: it is gone, and no more are started
            self.pool.replacements_left = 0
            self._died(w)

    def _result(self, w: Worker, b: int, tr: float, ts: float, te: float, spun: float) -> None:
        if w.inflight and w.inflight[0] == b:
            w.inflight.popleft()
            self._inflight -= 1
        self.spun_s += spun
        self.t_release[b] = tr - self.t0
        self.t_start[b] = ts - self.t0
        self.t_end[b] = te - self.t0
        w.busy_s += te - ts
        w.served += 1

    def _died(self, w: Worker) -> None:
        if not w.alive:
            return
        w.alive = False
        self.pool.version += 1
        self.deaths += 1
        now = time.perf_counter() - self.t0
        ahead = []  # not yet due: nothing of them was lost, they go back to the head of the queue
        for b in w.inflight:
            if self._due[b] > now and self.stop_flag.reason is None:
                ahead.append(b)
            else:
                self.failed[self._batch_request[b]] = True
        self.queues[w.cls].extendleft(reversed(ahead))
        self._inflight -= len(w.inflight)
        w.inflight.clear()
        with contextlib.suppress(OSError):
            w.conn.close()
        w.proc.join(timeout=1)
        if self.pool.replacements_left > 0 and self.stop_flag.reason is None:
            self.pool.replacements_left -= 1
            w.replaced_by = self.pool.spawn(w.cls).wid

    def _collect_stragglers(self) -> None:
        """After the deadline: let in-flight batches come back (not counted), so the next run starts idle."""
        for q in self.queues.values():
            q.clear()
        end = time.monotonic() + RETURN_TIMEOUT_S
        saved = self.t_start.copy(), self.t_end.copy(), self.t_release.copy()
        while any(w.inflight or not w.ready for w in self.pool.workers if w.alive) and time.monotonic() < end:
            self._wait(MAX_WAIT_S)
        self.t_start, self.t_end, self.t_release = saved  # results after the loop ended are not part of this run
        for w in self.pool.workers:
            if w.alive and w.inflight:
                w.proc.kill()
                self._died(w)

    def _worker_stats(self) -> list[dict[str, Any]]:
        out = []
        for w in self.pool.workers:
            out.append({
                "id": w.wid, "pid": w.pid or w.proc.pid, "class": "cpu" if w.cls == CPU else "accel",
                "served_batches": w.served, "busy_s": w.busy_s, "alive": w.alive, "replaced_by": w.replaced_by,
                **({"info": w.info} if w.info else {}),
            })
        return out
