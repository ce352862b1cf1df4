"""Collective timing pass: each collective's own start and finish on every rank, split into waiting and transfer.

The communication stage (:mod:`recstack.distributed.communication`) holds the
op pass's time of TorchRec's collective ranges on the rank's main thread. That
time contains three things: waiting for the peers to reach the collective (skew:
the slowest rank is still computing), the transfer itself, and Python/TorchRec
work around it (building the awaitables, splits, re-layout). This pass, run
after the normal passes for a few steps, measures the first two directly:

* every ``torch.distributed`` collective TorchRec calls from Python
  (``all_to_all_single``, ``reduce_scatter_tensor``, ``all_gather_into_tensor``,
  ``reduce_scatter``, ``all_gather``, ``all_reduce``) is wrapped and made
  blocking: the wrapper waits for its ``Work`` at once. Its start is the call,
  its finish the wait's return, its bytes the input tensor's (what the
  collective benchmark's ``bytes`` means); ``issued`` is the call's return,
  and :func:`describe` adds what :mod:`recstack.distributed.replay` needs to
  issue it again (dtype, element counts, per-peer splits, op, async). Blocking is what makes the transfer
  comparable with the benchmark: TorchRec issues some collectives
  asynchronously and computes while they run, and on a host with a core per
  rank that compute shares the core with gloo's thread, so an overlapped
  transfer is slower than the same bytes alone (measured: 4-17x the
  benchmark in flight under load, benchmarks/LOG.md); the pass measures each
  transfer as the benchmark does, with the rank asleep in the wait;
* every rank runs the same collectives in the same order, so collective ``i``
  of a step is the same collective on every rank; the ranks' times come from
  ``time.perf_counter`` (CLOCK_MONOTONIC: one clock for every process on a
  host; ranks on several hosts would need a clock offset, not handled here);
* for rank ``r`` and collective ``i``: ``arrive_i = max over ranks of start_i``
  (nothing can move before the last rank has called it); waiting is
  ``[start_i(r), arrive_i]`` and transfer ``[arrive_i, finish_i(r)]``; per phase
  the intervals' unions (collectives that overlap count once), so
  ``wait_s + transfer_s`` is the wall time the rank had a collective of the
  phase in flight.

The phase of a collective comes from its Python caller (TorchRec's classes:
``KJTAllToAll*`` input_dist, ``*Pooled*``/``ReduceScatter*`` forward output_dist,
their ``backward`` the backward all-to-all). DDP's gradient all-reduce is
issued from C++ (the reducer) and is not seen: ``dense_all_reduce`` has no
split.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

_INPUT_ARG = {"all_to_all_single": ("input", 1), "reduce_scatter_tensor": ("input", 1),
              "all_gather_into_tensor": ("input_tensor", 1), "reduce_scatter": ("input_list", 1),
              "all_gather": ("tensor", 1), "all_reduce": ("tensor", 0)}
STEPS = 10  # steps timed per rank


def _nbytes(x: Any) -> int:
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(t) for t in x)
    return int(x.numel() * x.element_size()) if hasattr(x, "numel") else 0


_SIGNATURES = {  # positional parameters of each wrapped collective, as torch.distributed declares them
    "all_to_all_single": ("output", "input", "output_split_sizes", "input_split_sizes", "group", "async_op"),
    "reduce_scatter_tensor": ("output", "input", "op", "group", "async_op"),
    "all_gather_into_tensor": ("output_tensor", "input_tensor", "group", "async_op"),
    "reduce_scatter": ("output", "input_list", "op", "group", "async_op"),
    "all_gather": ("tensor_list", "tensor", "group", "async_op"),
    "all_reduce": ("tensor", "op", "group", "async_op"),
}
_OUTPUT_ARG = {"all_to_all_single": "output", "reduce_scatter_tensor": "output",
               "all_gather_into_tensor": "output_tensor", "reduce_scatter": "output", "all_gather": "tensor_list",
               "all_reduce": "tensor"}


def _numels(x: Any) -> list[int]:
    if isinstance(x, (list, tuple)):
        return [int(t.numel()) for t in x]
    return [int(x.numel())] if hasattr(x, "numel") else []


def describe(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """What a replay needs to issue the same collective again: element counts of the input and output
    (one per tensor of a list), dtype, per-peer split sizes (all_to_all_single), reduce op and whether the
    caller issued it asynchronously."""
    bound = dict(zip(_SIGNATURES[name], args, strict=False)) | kwargs
    x = bound.get(_INPUT_ARG[name][0])
    first = x[0] if isinstance(x, (list, tuple)) and x else x
    op = bound.get("op")

    def splits(v: Any) -> list[int] | None:
        return None if v is None else [int(n) for n in v]

    return {"dtype": str(getattr(first, "dtype", "")).removeprefix("torch."), "in_numel": _numels(x),
            "out_numel": _numels(bound.get(_OUTPUT_ARG[name])), "in_splits": splits(bound.get("input_split_sizes")),
            "out_splits": splits(bound.get("output_split_sizes")), "async": bool(bound.get("async_op", False)),
            "op": None if op is None else str(op).rsplit(".", 1)[-1]}


def phase_of_caller(collective: str, qualnames: list[str]) -> str:
    """The communication phase of a collective from the qualified names of its Python callers."""
    joined = " ".join(qualnames)
    if ".backward" in joined:
        return "dense_all_reduce" if collective == "all_reduce" else "backward_all_to_all"
    if "KJT" in joined or "input_dist" in joined or "Splits" in joined:
        return "input_dist"
    if "Pooled" in joined or "ReduceScatter" in joined or "output_dist" in joined or "Sequence" in joined:
        return "output_dist"
    return "other_collectives"


def _callers(depth: int = 12) -> list[str]:
    f = sys._getframe(3)
    out = []
    while f is not None and len(out) < depth:
        out.append(f.f_code.co_qualname)
        f = f.f_back
    return out


@contextlib.contextmanager
def _patched(wrap: Any) -> Iterator[None]:
    """``torch.distributed``'s Python collectives replaced by ``wrap(name, fn)`` for the duration."""
    import torch.distributed as dist

    saved = {name: getattr(dist, name) for name in _INPUT_ARG}
    for name, fn in saved.items():
        setattr(dist, name, wrap(name, fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(dist, name, fn)


@contextlib.contextmanager
def recording(records: list[dict[str, Any]]) -> Iterator[None]:
    """Wrap the Python collectives for the duration; each call appends ``{collective, phase, bytes, start,
    finish}`` to ``records`` (``finish`` is filled in when the collective completes)."""

    def wrap(name: str, fn: Any) -> Any:
        kw, pos = _INPUT_ARG[name]

        def timed(*args: Any, **kwargs: Any) -> Any:
            x = kwargs.get(kw, args[pos] if len(args) > pos else None)
            rec = {"collective": name, "phase": phase_of_caller(name, _callers()), "bytes": _nbytes(x),
                   **describe(name, args, kwargs), "start": time.perf_counter(), "finish": None}
            records.append(rec)
            work = fn(*args, **kwargs)
            rec["issued"] = time.perf_counter()
            if work is not None and hasattr(work, "wait"):
                work.wait()  # blocking, as the benchmark runs it: the rank sleeps while gloo's thread works
            rec["finish"] = time.perf_counter()
            return work

        return timed

    with _patched(wrap):
        yield


WAIT_RANGE = "c10d::Work.wait"  # the op pass's range around a collective's wait (communication.py finds it)


class _WaitedWork:
    """A collective's ``Work`` whose ``wait()`` is a profiler range while torch.profiler runs: the op pass
    then sees the time the rank's main thread is blocked in gloo (otherwise the self time of TorchRec's
    awaitable ranges, indistinguishable from its Python). Anything else goes to the wrapped Work, and it
    passes ``isinstance(w, dist.Work)`` (its ``__class__`` is the Work's), which TorchRec checks before waiting."""

    __slots__ = ("_work",)

    def __init__(self, work: Any) -> None:
        self._work = work

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        if not torch._C._autograd._profiler_enabled():
            return self._work.wait(*args, **kwargs)
        from recstack.profiling.oppass import profiler_range

        with profiler_range(WAIT_RANGE):
            return self._work.wait(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)

    @property  # type: ignore[misc]
    def __class__(self) -> Any:  # noqa: D105 - TorchRec checks isinstance(work, dist.Work) before waiting
        return type(self._work)


@contextlib.contextmanager
def waits_recorded() -> Iterator[None]:
    """While torch.profiler runs, the Python collectives' ``Work`` objects record their waits (see
    :class:`_WaitedWork`) and a synchronous call (it waits inside) is one ``c10d::<function>`` range."""

    def wrap(name: str, fn: Any) -> Any:
        at = _SIGNATURES[name].index("async_op")  # read per call without describe(): it is on TorchRec's path

        def waited(*args: Any, **kwargs: Any) -> Any:
            import torch

            if not torch._C._autograd._profiler_enabled():
                return fn(*args, **kwargs)
            if not kwargs.get("async_op", args[at] if len(args) > at else False):  # it waits inside: one range
                from recstack.profiling.oppass import profiler_range

                with profiler_range(f"c10d::{name}"):
                    return fn(*args, **kwargs)
            work = fn(*args, **kwargs)
            return _WaitedWork(work) if work is not None and hasattr(work, "wait") else work

        return waited

    with _patched(wrap):
        yield


def time_collectives(step: Any, batches: list[Any], steps: int = STEPS) -> list[list[dict[str, Any]]]:
    """Run ``steps`` steps with the collectives recorded; returns every rank's records (all ranks call it)."""
    import torch.distributed as dist

    records: list[dict[str, Any]] = []
    marks = []
    for i in range(steps):
        dist.barrier()  # each step starts together: skew inside a step is the step's own
        marks.append(len(records))
        with recording(records):
            step.run(batches[i % len(batches)])
    dist.barrier()  # every rank has finished its steps before the records are exchanged
    per_step = [records[a:b] for a, b in zip(marks, marks[1:] + [len(records)], strict=True)]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, per_step)
    return out


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def split(all_ranks: list[list[list[dict[str, Any]]]]) -> dict[str, Any]:
    """Per rank and phase, mean per step: ``wait_s`` (a peer not there yet), ``transfer_s`` (all there, until
    done), the collectives and their bytes; per phase (``phases``) the slowest rank's transfer (median over
    steps of the union of [last rank's call, slowest rank's finish] over the phase's collectives: what the
    benchmark times) and each collective with every rank's bytes. Ranks whose records do not line up raise
    ValueError."""
    world = len(all_ranks)
    steps = min(len(r) for r in all_ranks)
    per_rank: list[dict[str, Any]] = [{"rank": r, "phases": {}} for r in range(world)]
    slowest: dict[str, list[dict[str, Any]]] = {}
    last_to_slowest: dict[str, list[float]] = {}
    for s in range(steps):
        recs = [all_ranks[r][s] for r in range(world)]
        if len({len(x) for x in recs}) != 1 or any(
                len({x[i]["collective"] for x in recs}) != 1 for i in range(len(recs[0]))):
            raise ValueError(f"step {s}: the ranks ran different collectives")
        arrive = [max(x[i]["start"] for x in recs) for i in range(len(recs[0]))]
        for r in range(world):
            by_phase: dict[str, list[int]] = {}
            for i, rec in enumerate(recs[r]):
                by_phase.setdefault(rec["phase"], []).append(i)
            for phase, idx in by_phase.items():
                acc = per_rank[r]["phases"].setdefault(phase, {"wait_s": 0.0, "transfer_s": 0.0, "collectives": 0,
                                                               "bytes": 0.0})
                busy = _union([(recs[r][i]["start"], recs[r][i]["finish"]) for i in idx])
                moving = _union([(arrive[i], recs[r][i]["finish"]) for i in idx if recs[r][i]["finish"] > arrive[i]])
                acc["transfer_s"] += moving / steps
                acc["wait_s"] += max(0.0, busy - moving) / steps
                acc["collectives"] += len(idx)
                acc["bytes"] += sum(recs[r][i]["bytes"] for i in idx) / steps
        if s == 0:
            for i, rec in enumerate(recs[0]):
                slowest.setdefault(rec["phase"], []).append({"collective": rec["collective"], "bytes": [
                    x[i]["bytes"] for x in recs]})
        for phase in slowest:  # from the last rank's call to the slowest rank's finish; overlaps count once
            idx = [i for i, rec in enumerate(recs[0]) if rec["phase"] == phase]
            last_to_slowest.setdefault(phase, []).append(_union([(arrive[i], max(x[i]["finish"] for x in recs))
                                                        for i in idx]))
    for pr in per_rank:  # whole counts summed over the steps, then their mean (no residue from adding 1/steps)
        for acc in pr["phases"].values():
            acc["collectives"] /= steps
    phases = {p: {"transfer_s": sorted(ts)[len(ts) // 2], "collectives": slowest[p]} for p, ts in last_to_slowest.items()}
    return {"steps": steps, "per_rank": per_rank, "phases": phases}


def stage_split(timing: dict[str, Any], roots: list[Any]) -> list[dict[str, Any]]:
    """Per rank and phase the communication stage's time beside the pass's split: ``stage_s`` (the op pass's
    phase time, measured), ``wait_s`` and ``transfer_s`` (this pass, measured) and ``other_s`` = stage_s -
    wait_s - transfer_s (Python/TorchRec work around the collectives; clamped at 0, since an async
    collective may overlap the rank's compute and so be in flight longer than the stage shows)."""
    out = []
    for pr, root in zip(timing["per_rank"], roots, strict=True):
        comm = root.child("communication")
        stage = {c.name: c.time_s for c in comm.children} if comm is not None else {}
        phases = {}
        for phase in sorted(set(stage) | set(pr["phases"])):
            got = pr["phases"].get(phase)
            s = stage.get(phase, 0.0)
            row = {"stage_s": s, "wait_s": None, "transfer_s": None, "other_s": None, "collectives": 0.0,
                   "bytes": 0.0}
            if got is not None:
                row.update(got)
                row["other_s"] = max(0.0, s - got["wait_s"] - got["transfer_s"])
            phases[phase] = row
        out.append({"rank": pr["rank"], "phases": phases})
    return out


def transfer_vs_benchmark(timing: dict[str, Any], collectives: dict[str, Any] | None,
                          world_size: int) -> dict[str, dict[str, Any]]:
    """Per phase: the slowest rank's transfer (see :func:`split`) against (a) the size-sweep benchmark at each
    collective's own bytes (the largest rank's input), summed (gloo runs them one after another; named in
    ``transfer_benchmark``), and (b) the replay of the model's own collectives (``timing["replay"]``, see
    :mod:`recstack.distributed.replay`); ratio = transfer / benchmark."""
    from recstack.distributed.comm_model import benchmark_of, collectives_time

    replay = (timing.get("replay") or {}).get("phases") or {}
    out = {}
    for phase, got in timing["phases"].items():
        rows, transfer = got["collectives"], got["transfer_s"]
        names = sorted({benchmark_of(collectives, r["collective"]) for r in rows})
        bench = collectives_time(collectives, [(benchmark_of(collectives, r["collective"]), max(r["bytes"]))
                                               for r in rows], world_size) if collectives else None
        rep = replay.get(phase, {}).get("replay_s")
        out[phase] = {"transfer_s": transfer, "collectives": len(rows), "bytes": float(sum(max(r["bytes"])
                                                                                          for r in rows)),
                      "transfer_benchmark_s": bench, "transfer_ratio": transfer / bench if bench else None,
                      "transfer_benchmark": "size sweep: " + "+".join(names),
                      "replay_s": rep, "replay_ratio": replay.get(phase, {}).get("ratio")}
    return out
