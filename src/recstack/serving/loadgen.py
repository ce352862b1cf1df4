"""The open-loop load generator and the worker pool.

One dispatcher loop (this process) releases every request at its *scheduled*
arrival time, whatever the workers are doing (open loop: a slow system does not
slow the load down, so there is no coordinated omission), into a central FIFO
queue per worker class (CPU, accelerator). A worker is handed the next batch of
its class's queue whenever it holds fewer than ``depth`` batches, idle workers
first. ``depth`` 1 is one central FIFO queue (an M/D/c system), but every batch
then waits for a pipe round trip (completion, then hand-off) when a worker
finishes; ``depth`` 2 (the CLI's default) lets the next batch wait in the
worker's pipe, so a busy worker goes on at once, at the cost of committing
that batch to the worker one batch early. With one worker that commitment
changes nothing (every batch goes to it, in order: the pipe is the head of
the one FIFO queue), so depth 2 with one worker is the textbook M/D/1 queue
without the round trip, and so is any deeper pipe, which also keeps a
dispatcher that is late to read a completion from leaving the worker idle
with batches queued (``benchmarks/bench_mdl.py`` runs depth 64); with c > 1
only depth 1 is one central queue.

The loop sleeps in ``select`` (microsecond timeouts) on the workers' process
sentinels, and on their pipes only while a batch is queued for room (a
completion then matters at once: the next hand-over waits for it) or before
an arrival it will spin for (below); otherwise it sleeps through completions
and reads them (one zero-timeout ``select``) on its next wake-up, so such a
request costs one wake-up, not two (each cost tens of us of CPU on a VM).
Before a spun arrival it still wakes for completions: sleeping through them
there doubled the median delay of batches that found their worker idle
(docs/benchmarks.md). A sleeping process wakes late (on a VM by 0.05-0.3 ms,
more on a busy host), and a request's latency counts from its
scheduled arrival, so when the next arrival might start at once (a worker of
its class is idle, or the lower bound of its in-flight work -- each batch at
least 0.9 x its fastest warm-up time, from the later of its hand-over and the
last result -- ends within the margin; see :meth:`LoadRun._could_start`) the
loop sleeps only until shortly before it and spins (``select`` with no
timeout, so completions are still taken) for the rest: a running estimate of
the wake-up lateness (:class:`WakeMargin`), at most :data:`SPIN_MAX_S` per
arrival and :data:`SPIN_SHARE` of the run's time in all (beyond it the loop
sleeps to each arrival), so that the load generator stays cheap at high
rates. An arrival that cannot start at once (its worker busy beyond it) is
slept to in one go: its release time cannot change its start. Timer slack is
1 ns while the load runs (Linux ``PR_SET_TIMERSLACK``; the default 50 us would
add to every wake-up). Hand-offs and results are fixed-size frames
(:data:`~recstack.serving.worker.BATCH`, :data:`~recstack.serving.worker.RESULT`)
written and read on the pipe's descriptor directly (no pickling per request;
all waiting results in one ``os.read``), and lateness goes into its
histogram in bulk after the loop. ``select``, not ``epoll``: Python rounds
epoll and poll timeouts to milliseconds. Python's cyclic GC is left on: the
loop keeps no new container objects, and no collection ran during 3-s runs at
1,000 and 20,000 req/s (docs/benchmarks.md).

A worker that dies is replaced (a fresh process; it serves once it says
ready); the requests of its in-flight batches count as failed. SIGINT (or
``stop()``) stops releasing arrivals; what was released is drained until the
deadline and the record is marked stopped. The deadline is the end of the
schedule plus ``grace_s``: requests unfinished then are late.
"""

from __future__ import annotations

import contextlib
import math
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
SPIN_MAX_S = 200e-6  # the most the loop spins before an arrival
SPIN_MIN_S = 5e-6
SPIN_SHARE = 0.03  # spinning stops (the loop sleeps to each arrival) once it took this share of the run
MIN_SERVICE_SHARE = 0.9  # a batch's service is taken to last at least this share of its fastest warm-up time
READ_CHUNK = 1 << 16  # bytes per os.read of a worker's pipe (many result frames)
HEADER_LEN = 4  # Connection framing: a 4-byte big-endian payload length


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
    last_end: float = -math.inf  # run time of the last result's end
    min_service_s: float = 0.0  # a lower bound of one batch's service (0.9 x the fastest warm-up batch)


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
    times = [t for t in (w.info.get("service_s_by_size") or {}).values() if t > 0]
    w.min_service_s = MIN_SERVICE_SHARE * min(times) if times else 0.0


@dataclass
class RunRecord:
    """What one load run observed (times in seconds from the run's start)."""

    plan: Plan
    t_start: np.ndarray  # per batch; NaN if never started (or its result never came)
    t_end: np.ndarray
    t_sent: np.ndarray  # per batch: when the dispatcher handed it to a worker
    batch_worker: np.ndarray  # worker id per batch (-1: never dispatched)
    request_failed: np.ndarray  # bool per request: a batch was on a worker that died
    released: int  # requests released (all of them unless stopped)
    deadline_s: float
    elapsed_s: float  # start to the end of the loop
    stopped: str | None  # "SIGINT" / "stop" when stopped early
    lateness: HdrHistogram  # release lateness (us)
    loadgen_cpu_s: float  # the dispatcher's CPU time during the run
    worker_stats: list[dict[str, Any]]
    deaths: int


PR_SET_TIMERSLACK, PR_GET_TIMERSLACK = 29, 30
TIMER_SLACK_NS = 1


@contextlib.contextmanager
def _tight_timers() -> Iterator[None]:
    """Linux: 1 ns timer slack for this thread while the load runs (default 50 us), so that ``select``
    wakes the dispatcher at its timeout rather than up to 50 us after; best effort elsewhere."""
    libc = None
    old = None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        old = libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)
        if old <= 0 or libc.prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0) != 0:
            old = None
    except (OSError, AttributeError):
        old = None
    try:
        yield
    finally:
        if libc is not None and old:
            libc.prctl(PR_SET_TIMERSLACK, old, 0, 0, 0)


class WakeMargin:
    """How long before an arrival the dispatcher stops sleeping and spins: the mean plus three mean
    deviations of how late ``select`` woke past its timeout (exponentially weighted over about the last
    32 sleeps), within [:data:`SPIN_MIN_S`, :data:`SPIN_MAX_S`]."""

    WEIGHT = 1 / 32

    def __init__(self) -> None:
        self.mean, self.dev = 50e-6, 25e-6
        self.value = self._clamp()

    def _clamp(self) -> float:
        return min(SPIN_MAX_S, max(SPIN_MIN_S, self.mean + 3 * self.dev))

    def observe(self, late_s: float) -> None:
        d = late_s - self.mean
        self.mean += self.WEIGHT * d
        self.dev += self.WEIGHT * (abs(d) - self.dev)
        self.value = self._clamp()


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
                 announce: Callable[[], None] | None = None) -> None:
        self.plan, self.pool, self.grace_s, self.depth = plan, pool, grace_s, depth
        self.announce = announce  # called once when the load starts (the CLI's "load started" line)
        nb = plan.batch_size.size
        self.t_start = np.full(nb, np.nan)
        self.t_end = np.full(nb, np.nan)
        self.t_sent = np.full(nb, np.nan)
        self.batch_worker = np.full(nb, -1, dtype=np.int64)
        self.failed = np.zeros(plan.requests, dtype=bool)
        self.queues: dict[int, deque[int]] = {CPU: deque(), ACCEL: deque()}
        self.stop_flag = SigintFlag()
        self.deaths = 0
        self.lateness = new_histogram()
        self._fd_version = -1
        self._sizes: list[int] = plan.batch_size.tolist()
        self._batch_request: list[int] = plan.batch_request.tolist()
        self._inflight = 0  # batches on live workers, all together
        self._fds: dict[int, tuple[Worker, bool]] = {}
        self._fd_list: list[int] = []  # pipes and sentinels
        self._sentinels: list[int] = []
        self.margin = WakeMargin()
        self.spun_s = 0.0  # time spent spinning before arrivals

    def stop(self) -> None:
        self.stop_flag.reason = self.stop_flag.reason or "stop"

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> RunRecord:
        with self.stop_flag.installed(), _tight_timers():
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
            w.busy_s, w.served, w.last_end = 0.0, 0, -math.inf
        cpu0 = time.process_time()
        if self.announce is not None:
            self.announce()
        self.t0 = t0 = clock() + 0.01
        i = 0
        stop_at: float | None = None
        late: list[int] = []  # release lateness per request (us), into the histogram after the loop
        while True:
            now = clock() - t0
            if self.stop_flag.reason and stop_at is None:
                stop_at = now
                deadline = min(deadline, now + self.grace_s)
            if stop_at is None:
                while i < n and arr[i] <= now:
                    late.append(int((now - arr[i]) * 1e6))
                    for b in range(first[i], first[i + 1]):
                        self.queues[bcls[b]].append(b)
                    i += 1
            queued = self.queues[CPU] or self.queues[ACCEL]
            if queued:
                self._take_results()  # results the loop slept through free room first
                self._hand_out()
                queued = self.queues[CPU] or self.queues[ACCEL]
            if (i >= n or stop_at is not None) and not self._inflight and not queued:
                break
            if now >= deadline or self.stop_flag.count > 1:
                break
            if i < n and stop_at is None:
                self._approach(arr[i], now, bcls[first[i]], results=bool(queued))
            else:
                self._wait(min(max(deadline - now, 0.0), MAX_WAIT_S))
        elapsed = clock() - t0
        self._record_lateness(late)
        cpu = time.process_time() - cpu0
        stats = self._worker_stats()
        self._collect_stragglers()
        return RunRecord(
            plan, self.t_start, self.t_end, self.t_sent, self.batch_worker, self.failed, i, deadline, elapsed,
            self.stop_flag.reason, self.lateness, cpu, stats, self.deaths,
        )

    def _record_lateness(self, late: list[int]) -> None:
        """Into the histogram in bulk: one ``record_value`` per distinct microsecond value (at least 1 us)."""
        if not late:
            return
        values, counts = np.unique(np.maximum(np.asarray(late, dtype=np.int64), 1), return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True):
            self.lateness.record_value(v, c)

    def _could_start(self, cls: int, wake: float) -> bool:
        """Whether a batch of class ``cls`` arriving at ``wake`` might start within the wake margin of it: a
        worker of its class is idle, or its in-flight batches may all have ended by then (each lasts at
        least its ``min_service_s``, from the later of its hand-over and the last result's end: a lower
        bound, so results not yet read count as possibly done). Only then can the release time decide the
        batch's start, and so is it worth spinning for."""
        horizon = wake + self.margin.value
        for w in self.pool.workers:
            if not (w.alive and w.ready and w.cls == cls):
                continue
            if not w.inflight:
                return True
            start = max(w.last_end, self.t_sent[w.inflight[0]])
            if start + len(w.inflight) * w.min_service_s <= horizon:
                return True
        return False

    def _approach(self, wake: float, now: float, cls: int, *, results: bool) -> None:
        """Towards an arrival at ``wake`` (run time). If it might start at once (:meth:`_could_start`) and
        spinning has not had its share of the run: sleep until the wake margin before it (woken by results
        too: a dispatcher that slept through them woke later, see docs/benchmarks.md), take the results that
        came, and spin to it; else sleep to it in one go, woken by results only when ``results`` (a batch is
        queued for room). Returns early when a watched descriptor has news (the loop then looks again)."""
        spin = self.spun_s <= SPIN_SHARE * max(now, 1.0) and self._could_start(cls, wake)
        sleep = wake - now - (self.margin.value if spin else 0.0)
        if sleep > 0:
            timeout = min(sleep, MAX_WAIT_S)
            if not self._wait(timeout, results=results or spin):
                self.margin.observe(time.perf_counter() - self.t0 - now - timeout)
            return
        if not spin:
            return
        self._take_results()
        clock, t0 = time.perf_counter, self.t0
        try:
            while clock() - t0 < wake:
                if self._wait(0.0):
                    return
        finally:
            self.spun_s += clock() - t0 - now

    def _hand_out(self) -> None:
        """Breadth first: each queued batch to the worker of its class holding the fewest (below ``depth``;
        the first such worker on ties), so every idle worker gets a batch before any gets its second."""
        for cls, q in self.queues.items():
            while q:
                best = None
                for w in self.pool.workers:
                    if w.cls == cls and w.alive and w.ready and len(w.inflight) < self.depth and (
                            best is None or len(w.inflight) < len(best.inflight)):
                        best = w
                if best is None or not self._send_next(best):
                    break

    def _send_next(self, w: Worker) -> bool:
        """Hand the next live batch of ``w``'s queue to ``w``; whether the loop may go on handing out."""
        q = self.queues[w.cls]
        req, failed = self._batch_request, self.failed
        while q:
            b = q.popleft()
            if failed[req[b]]:
                continue  # its request already failed: do not spend a worker on it
            sent = time.perf_counter()  # before the send: the worker may start before the write returns
            try:
                os.write(w.fd, BATCH.pack(BATCH_LEN, b, self._sizes[b], b, sent))
            except OSError:
                q.appendleft(b)
                self._died(w)
                return True  # another worker may take it
            w.inflight.append(b)
            self._inflight += 1
            self.batch_worker[b] = w.wid
            self.t_sent[b] = sent - self.t0
            return True
        return False

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
            _, _, b, ts, te = RESULT.unpack(data)
            self._result(w, b, ts, te)
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
                _, b, ts, te = RESULT_BODY.unpack_from(buf, body)
                self._result(w, b, ts, te)
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

    def _result(self, w: Worker, b: int, ts: float, te: float) -> None:
        if w.inflight and w.inflight[0] == b:
            w.inflight.popleft()
            self._inflight -= 1
        self.t_start[b] = ts - self.t0
        self.t_end[b] = w.last_end = te - self.t0
        w.busy_s += te - ts
        w.served += 1

    def _died(self, w: Worker) -> None:
        if not w.alive:
            return
        w.alive = False
        self.pool.version += 1
        self.deaths += 1
        for b in w.inflight:
            self.failed[self._batch_request[b]] = True
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
        saved = self.t_start.copy(), self.t_end.copy()
        while any(w.inflight or not w.ready for w in self.pool.workers if w.alive) and time.monotonic() < end:
            self._wait(MAX_WAIT_S)
        self.t_start, self.t_end = saved  # results after the loop ended are not part of this run
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
