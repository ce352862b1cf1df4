"""Decode and collect a large trace in parts, one process per core: the same Collector as one pass.

Decoding and collecting cost about 2 us per event in Python, so a plain (not gzipped) trace of more
than :data:`MIN_PART` bytes per part is cut into as many parts as there are cores (at most
:data:`MAX_PARTS`) at event boundaries (:func:`recstack.traceimport.decode.plan_parts`); each forked
child maps the file, collects its part into its own :class:`Collector` and sends it back (columns
and the distinct names, shapes and types: small beside the events), and the parent, which collects
the first part meanwhile, merges them in file order (:meth:`Collector.merge`), so ids, columns and
counts are those of one sequential pass. A gzipped or small trace, or a host with one core, is
read in one pass; so is a trace one of whose parts does not decode (damage inside the array: the one
pass then reads as far as the events are complete, or reports the bad field, as without parts).
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from recstack.errors import DataError
from recstack.traceimport.collect import Collector
from recstack.traceimport.decode import Header, Truncation, header_of, plan_parts, stream_events, stream_part

if TYPE_CHECKING:
    from recstack.traceimport.module_map import ModuleMap

MIN_PART = 64 << 20  # bytes of trace per part, at least (below, a fork costs more than it saves)
MAX_PARTS = 8


def parts_for(path: Path) -> int:
    """How many parts to read ``path`` in (1: one pass)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_PARTS, path.stat().st_size // MIN_PART))


def _can_fork() -> bool:
    import multiprocessing  # here: ~10 ms of start-up that a one-pass import (every gzipped trace) never needs

    return "fork" in multiprocessing.get_all_start_methods()


def collect_trace(path: Path, step_range: str | None, module_map: ModuleMap | None, parts: int | None = None,
                  min_part: int = MIN_PART) -> tuple[Collector, Header, Truncation | None]:
    """The trace's events collected (in ``parts`` parts of ``min_part`` bytes at least; default
    :func:`parts_for`), its header, any truncation."""
    n = parts_for(path) if parts is None else parts
    starts = plan_parts(path, n, min_part) if n > 1 else []  # [] for a gzipped trace: read in one pass
    if len(starts) >= 2 and _can_fork():
        try:
            return _in_parts(path, starts, step_range, module_map)
        except DataError:
            pass  # a part that does not decode (damage inside the array): one pass says how much is readable
    c = Collector(step_range=step_range, module_map=module_map)
    header, trunc = stream_events(path, c.add)
    return c, header, trunc


def _in_parts(path: Path, starts: list[int], step_range: str | None,
              module_map: ModuleMap | None) -> tuple[Collector, Header, Truncation | None]:
    """Collect the parts beginning at ``starts``: the first here, the others in forked children."""
    import multiprocessing

    c = Collector(step_range=step_range, module_map=module_map)
    ctx = multiprocessing.get_context("fork")
    children = []
    try:
        for i in range(1, len(starts)):
            recv, send = ctx.Pipe(duplex=False)
            stop = starts[i + 1] if i + 1 < len(starts) else None
            proc = ctx.Process(target=_child, args=(send, path, starts[i], stop, step_range, module_map),
                               daemon=True)
            proc.start()
            send.close()
            children.append((proc, recv))
        stream_part(path, starts[0], starts[1], c.add)
        suffix, trunc = b"", None
        for proc, recv in children:
            kind, *rest = recv.recv()
            proc.join()
            if kind == "error":
                raise DataError(rest[0]) if rest[1] else RuntimeError(f"trace part reader failed:\n{rest[0]}")
            part, suffix, trunc = rest
            c.merge(part)
    finally:
        for proc, _recv in children:
            if proc.is_alive():
                proc.kill()
                proc.join()
    if trunc is not None:  # the last part's count is its own: the trace's is every complete event before the cut
        trunc = Truncation(c.events, trunc.bytes_read, trunc.bytes_total)
    return c, header_of(path, suffix, trunc is not None), trunc


def _child(send, path: Path, start: int, stop: int | None, step_range: str | None,  # noqa: ANN001
           module_map: ModuleMap | None) -> None:
    try:
        part = Collector(step_range=step_range, module_map=module_map)
        suffix, trunc = stream_part(path, start, stop, part.add)
        send.send(("ok", part, suffix, trunc))
    except DataError as exc:
        send.send(("error", str(exc), True))
    except BaseException:  # noqa: BLE001 (reported to the parent, which raises it)
        send.send(("error", traceback.format_exc(), False))
    finally:
        send.close()
