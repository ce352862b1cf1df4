"""This process's own threads over a window: CPU time and time spent runnable but not running.

Linux keeps, per thread, ``/proc/self/task/<tid>/schedstat``: nanoseconds on a
CPU, nanoseconds waiting on a run queue (runnable, not running) and the
number of time slices. Read before and after the timed steps, grouped by the
thread's name (``comm``: ``python`` for the main thread, ``pt_gloo_runloop``
for gloo's workers, ``gloo_tcp_loop`` for its socket thread, OpenMP's
workers), that says which of the process's threads used its cores and which
waited for one. A rank pinned to one core runs its Python, gloo's socket I/O
and gloo's workers on that core: a collective whose data has arrived still
waits until its worker thread gets the core (docs/distributed.md).

Where the kernel keeps no schedstat (built without ``CONFIG_SCHED_INFO``, or
not Linux), :func:`read_threads` returns None and the record says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

TASKS = "/proc/self/task"


@dataclass(frozen=True)
class ThreadStat:
    name: str
    run_ns: int
    wait_ns: int
    slices: int


def read_threads(task_dir: str = TASKS) -> dict[int, ThreadStat] | None:
    """Every live thread's schedstat by thread id; None where the kernel does not keep it."""
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return None
    out: dict[int, ThreadStat] = {}
    for tid in tids:
        try:
            with open(f"{task_dir}/{tid}/schedstat") as f:
                run, wait, slices = (int(x) for x in f.read().split()[:3])
            with open(f"{task_dir}/{tid}/comm") as f:
                name = f.read().strip()
        except (OSError, ValueError):
            continue  # the thread ended between the listing and the read, or no schedstat
        out[int(tid)] = ThreadStat(name, run, wait, slices)
    if not any(t.run_ns for t in out.values()):
        return None  # schedstat present but not kept (sched_info off): all zeros, nothing measured
    return out


def thread_usage(before: dict[int, ThreadStat] | None, after: dict[int, ThreadStat] | None,
                 wall_s: float) -> list[dict[str, Any]] | None:
    """Per thread name over the window: ``threads`` seen, ``cpu_s`` and ``runq_wait_s`` (summed over
    them), ``cores`` = cpu_s / wall, ``waiting_cores`` = runq_wait_s / wall and ``slices``; largest
    CPU first. A thread born in the window counts from zero (also when it took the id of one that ended:
    another name or counters that went back); one that ended in it is not seen."""
    if before is None or after is None or wall_s <= 0:
        return None
    by_name: dict[str, dict[str, Any]] = {}
    born = ThreadStat("", 0, 0, 0)
    for tid, now in after.items():
        was = before.get(tid, born)
        if was.name != now.name or now.run_ns < was.run_ns or now.slices < was.slices:
            was = born  # the id was reused by a thread born in the window (or renamed): count it from zero
        row = by_name.setdefault(now.name, {"name": now.name, "threads": 0, "cpu_s": 0.0, "runq_wait_s": 0.0,
                                            "slices": 0})
        row["threads"] += 1
        row["cpu_s"] += max(0, now.run_ns - was.run_ns) * 1e-9
        row["runq_wait_s"] += max(0, now.wait_ns - was.wait_ns) * 1e-9
        row["slices"] += max(0, now.slices - was.slices)
    for row in by_name.values():
        row["cores"] = row["cpu_s"] / wall_s
        row["waiting_cores"] = row["runq_wait_s"] / wall_s
    return sorted(by_name.values(), key=lambda r: -r["cpu_s"])
