"""A serving worker process: builds its model (or the spin model) once, then serves batches.

Protocol over one duplex pipe (:func:`multiprocessing.Pipe`):

* the worker sends ``("ready", pid, info)`` when its model and input pool are
  built and warmed up, or ``("error", message)`` and exits;
* the dispatcher sends one :data:`BATCH` frame per batch (``batch_id, size,
  slot, t_sent, t_due``; ``t_sent``: when it was handed over, ``t_due``: its
  request's scheduled arrival, which may be later), or ``None`` to stop;
* the worker answers every batch with one :data:`RESULT` frame (``b"R",
  batch_id, t_release, t_start, t_end, spun``), times from ``time.perf_counter``
  (CLOCK_MONOTONIC on Linux: one clock for all processes of the host, so the
  dispatcher compares them with its own), taken in the worker, where the
  events happen.

The per-batch frames are fixed-size ``struct`` records in
:class:`multiprocessing.connection.Connection`'s own framing (a 4-byte
big-endian length, then the payload), so that neither side pays pickling
per request and each reads all waiting frames in one ``os.read`` (the
dispatcher writes all the batches it hands a worker at once in one
``os.write``),
while the pickled control messages (ready, error, stop) share the pipe: a
pickle starts with ``0x80``, a result frame with ``R``.

A batch's service starts when it is in the worker's hands and due: handed
over (``t_sent``), arrived (``t_due``) *and* the worker free (done answering
the previous batch), the latest of the three. A batch the worker holds
before it is due (the dispatcher's lookahead) is waited for by the worker,
idle: it sleeps, then spins, to ``t_due`` (:class:`~recstack.serving.timing.Waiter`),
and the batch starts when that wait ended (its release: ``t_release``; a
late wake-up shows as queueing, ``spun`` is the spin it took). Otherwise
``t_release`` is the later of ``t_sent`` and ``t_due``. The worker's
wake-up, receiving and answering are thus part
of a batch's service, not of its queueing: the spin model's D covers them, so
that its batches start exactly D apart in a busy period and take D from the
hand-over otherwise, as a deterministic server's do (unless they take longer
than D, as on a starved host: then the service time is what it took). An idle
worker polls its pipe for :data:`POLL_S` before it blocks, so that a batch
handed over soon after the last one is taken without a process wake-up.

Workers ignore SIGINT: Ctrl-C reaches the whole process group, and the
dispatcher, not the workers, decides how to stop (drain, then a partial result).
This module imports no torch at import time: spin workers start in ~0.1 s.
"""

from __future__ import annotations

import os
import signal
import struct
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from recstack.serving.timing import Waiter, tight_timers

POOL_SLOTS = 4  # distinct input batches per batch size (requests cycle through them)
WARMUP_SIZES = 24  # batch sizes run once each before "ready" (the largest always, and a spread)
POLL_S = 100e-6  # an idle worker polls its pipe this long before it blocks in recv
READ_CHUNK = 1 << 16  # bytes per os.read of a pipe (many frames)
HEADER_LEN = 4  # Connection's framing: a 4-byte big-endian payload length
BATCH = struct.Struct("!iqqqdd")  # frame: payload length, batch id, size, slot, t_sent, t_due
BATCH_BODY = struct.Struct("!qqqdd")  # its payload, as the worker receives it
RESULT = struct.Struct("!icqdddd")  # frame: payload length, b"R", batch id, t_release, t_start, t_end, spun
RESULT_BODY = struct.Struct("!cqdddd")
BATCH_LEN, RESULT_LEN = BATCH_BODY.size, RESULT_BODY.size
RESULT_TAG = ord("R")


@dataclass(frozen=True)
class WorkerSetup:
    """Everything a worker needs to build its server (picklable: sent to a spawned process)."""

    kind: str  # "spin" or "model"
    sizes: tuple[int, ...]  # the batch sizes it will serve
    service_s: float = 0.0  # spin: per batch
    per_sample_s: float = 0.0  # spin: per candidate
    run_config: dict[str, Any] = field(default_factory=dict)  # model: RunConfig fields
    device: str = "cpu"
    threads: int | None = None


class SpinServer:
    """Busy-waits ``service_s + per_sample_s * size``: a deterministic service time (M/D/c validation)."""

    def __init__(self, setup: WorkerSetup) -> None:
        self.service_s = setup.service_s
        self.per_sample_s = setup.per_sample_s

    def info(self) -> dict[str, Any]:
        return {"kind": "spin", "service_s": self.service_s, "per_sample_s": self.per_sample_s}

    def run(self, size: int, slot: int, start: float | None = None) -> None:
        """Busy until ``start`` (default: now) plus the service time."""
        end = (time.perf_counter() if start is None else start) + self.service_s + self.per_sample_s * size
        while time.perf_counter() < end:
            pass


class ModelServer:
    """A zoo model built from the RunConfig with an input pool of pre-generated batches per size."""

    def __init__(self, setup: WorkerSetup) -> None:
        import torch

        from recstack.config.run import RunConfig
        from recstack.profiling.runner import ProfileOptions, Step
        from recstack.serving.pool import build_pool, to_device
        from recstack.workload import bind
        from recstack.zoo.build import build_for_run

        cfg = RunConfig.build(setup.run_config)
        self.torch = torch
        if setup.threads:
            torch.set_num_threads(setup.threads)
        net, spec = build_for_run(cfg, dense_dtype=True, mode="inference", batch_size=max(setup.sizes))
        self.device = setup.device
        if self.device == "cuda":
            net = net.to("cuda")
        bound = bind(spec, net.features(), net.num_dense, net.num_tasks)
        self.pool = {s: [to_device(b, self.device) for b in bs] for s, bs in build_pool(bound, setup.sizes,
                                                                                      POOL_SLOTS).items()}
        self.step = Step(net, ProfileOptions(cfg.updated(mode="inference")), None)
        self.name = net.cfg.name
        self.threads = torch.get_num_threads()
        for s in _warmup_sizes(setup.sizes):
            self.run(s, 0)
        self.run(max(setup.sizes), 1)

    def info(self) -> dict[str, Any]:
        return {"kind": "model", "model": self.name, "threads": self.threads, "device": self.device}

    def run(self, size: int, slot: int, start: float | None = None) -> None:
        batches = self.pool.get(size)
        if batches is None:  # a size the plan did not announce: prefixes of the largest (views), kept
            from recstack.serving.pool import head

            top = self.pool[max(self.pool)]
            batches = self.pool[size] = [head(b, size) for b in top]
        self.step.run(batches[slot % len(batches)])
        if self.device == "cuda":
            self.torch.cuda.synchronize()


def _warmup_sizes(sizes: tuple[int, ...]) -> list[int]:
    ordered = sorted(sizes)
    if len(ordered) <= WARMUP_SIZES:
        return ordered
    step = len(ordered) / WARMUP_SIZES
    return sorted({ordered[int(i * step)] for i in range(WARMUP_SIZES)} | {ordered[-1]})


def _service_times(server: SpinServer | ModelServer, sizes: tuple[int, ...]) -> dict[int, float]:
    """The fastest of 3 timed batches per warm-up size (after the warm-up; the fastest, so that a batch
    descheduled on a busy host does not count): the search's first capacity estimate."""
    out = {}
    for s in _warmup_sizes(sizes):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            server.run(s, 0)
            times.append(time.perf_counter() - t0)
        out[s] = min(times)
    return out


def make_server(setup: WorkerSetup) -> SpinServer | ModelServer:
    return SpinServer(setup) if setup.kind == "spin" else ModelServer(setup)


def worker_main(conn: Any, setup: WorkerSetup) -> None:
    """The worker process's entry point (see the module docstring for the protocol)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        server = make_server(setup)
    except BaseException as exc:  # reported to the dispatcher, which names it in one line
        text = str(exc).strip().splitlines()
        msg = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
        conn.send(("error", msg, traceback.format_exc(limit=4)))
        return
    info = server.info()
    info["service_s_by_size"] = _service_times(server, setup.sizes)
    conn.send(("ready", os.getpid(), info))
    with tight_timers():
        _serve(conn, server)


def _serve(conn: Any, server: SpinServer | ModelServer) -> None:
    """Batches until told to stop (see the module docstring for when each starts)."""
    clock = time.perf_counter
    waiter = Waiter(clock)
    fd = conn.fileno()
    frames = Frames(conn)
    free_at = clock()
    while True:
        try:
            data = frames.next(clock)
        except OSError:
            return
        if data is None or len(data) != BATCH_LEN:  # end of file, or the pickled None: stop
            return
        bid, size, slot, t_sent, t_due = BATCH_BODY.unpack(data)
        release, spun = max(t_sent, t_due), 0.0
        if release > clock():  # held before it is due: wait for its arrival, idle
            release, spun = waiter.until(release)
            t0 = release
        else:
            t0 = max(free_at, release)  # in the worker's hands, due, and the worker free
        server.run(size, slot, t0)
        free_at = clock()
        try:
            os.write(fd, RESULT.pack(RESULT_LEN, b"R", bid, release, t0, free_at, spun))
        except OSError:
            return


class Frames:
    """The dispatcher's messages on the pipe in :class:`multiprocessing.connection.Connection`'s framing (a
    4-byte big-endian length, then the payload), as many as are waiting in one ``os.read``: the dispatcher
    writes a lookahead's batches to a worker at once."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.fd = conn, conn.fileno()
        self.buf, self.pos = b"", 0

    def next(self, clock: Any) -> bytes | None:
        """The next payload (None at end of file); polls briefly, then blocks, when none is waiting."""
        while True:
            buf, pos = self.buf, self.pos
            if len(buf) - pos >= HEADER_LEN:
                end = pos + HEADER_LEN + int.from_bytes(buf[pos:pos + HEADER_LEN], "big")
                if len(buf) >= end:
                    self.pos = end
                    return buf[pos + HEADER_LEN:end]
            _poll_briefly(self.conn, clock)
            chunk = os.read(self.fd, READ_CHUNK)
            if not chunk:
                return None
            self.buf, self.pos = buf[pos:] + chunk, 0


def _poll_briefly(conn: Any, clock: Any) -> None:
    """Poll the pipe (no sleep) for up to :data:`POLL_S`; the caller then blocks in its read if nothing came.
    The window is short, so an idle worker costs little CPU."""
    end = clock() + POLL_S
    while clock() < end:
        if conn.poll():
            return
