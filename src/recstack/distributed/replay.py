"""Collective replay: the model's own collective sequence issued again with bare ``torch.distributed`` calls.

The size-sweep benchmark (:mod:`recstack.hardware.collectives`) times one
even all-to-all of a given size; the model sends something else: per step,
TorchRec's input_dist issues several KJT all-to-alls (splits, lengths, values,
maybe weights) of data-dependent, uneven per-peer splits and int32/int64
dtypes, then the embedding output all-to-all or reduce-scatter, in training
the backward collectives. The collective timing pass
(:mod:`recstack.distributed.collective_timing`) records each of them per rank
and step (kind, dtype, element counts, per-peer splits, reduce op, whether it
was issued asynchronously). This module replays those records, on every rank,
in the same process group, twice:

* ``blocking``: one after another, each waited at once, as the timing pass
  runs them: per collective the same figure as the pass's transfer (the last
  rank's call until the slowest rank's finish), so ``pass / replay`` per
  collective says how much of the in-model transfer is the bytes themselves;
* ``issued``: as the model issues them: a run of consecutive asynchronous
  collectives of one phase is issued together, then waited in order (gloo
  may work on them at once); synchronous ones are waited at once.

Buffers are allocated before the timed loop (the replay measures the transfer
of these sizes, not TorchRec's output allocation). Each repeat replays every
recorded step once, each step after a barrier. The records come out in the
timing pass's format, so :func:`recstack.distributed.collective_timing.split`
reduces them the same way.
"""

from __future__ import annotations

import time
from typing import Any

REPEATS = 3  # replays of every recorded step
MODES = ("blocking", "issued", "skewed", "fresh")
MAX_DELAY_S = 0.05  # a skewed replay's longest spin before one collective


def _tensor(numel: int, dtype: str, *, touched: bool) -> Any:
    """An input (``touched``: written, as the model's compute wrote it) or output buffer (``torch.empty``, as
    TorchRec allocates it: large ones are fresh pages that fault in while the collective writes them)."""
    import torch

    make = torch.zeros if touched else torch.empty
    return make(max(0, numel), dtype=getattr(torch, dtype or "float32"))


def build(rec: dict[str, Any]) -> Any:
    """A callable that issues ``rec``'s collective again on fresh buffers of its sizes; returns its Work."""
    import torch.distributed as dist

    name, dtype = rec["collective"], rec["dtype"]
    ins = [_tensor(n, dtype, touched=True) for n in rec["in_numel"]]
    outs = [_tensor(n, dtype, touched=False) for n in rec["out_numel"]]
    if not ins or (name != "all_reduce" and not outs):
        raise ValueError(f"{name}: the record has no tensor sizes to replay")
    op = getattr(dist.ReduceOp, rec.get("op") or "SUM", dist.ReduceOp.SUM)
    if name == "all_to_all_single":
        return lambda: dist.all_to_all_single(outs[0], ins[0], rec["out_splits"], rec["in_splits"], async_op=True)
    if name == "reduce_scatter_tensor":
        return lambda: dist.reduce_scatter_tensor(outs[0], ins[0], op=op, async_op=True)
    if name == "all_gather_into_tensor":
        return lambda: dist.all_gather_into_tensor(outs[0], ins[0], async_op=True)
    if name == "reduce_scatter":
        return lambda: dist.reduce_scatter(outs[0], ins, op=op, async_op=True)
    if name == "all_gather":
        return lambda: dist.all_gather(outs, ins[0], async_op=True)
    if name == "all_reduce":
        return lambda: dist.all_reduce(ins[0], op=op, async_op=True)
    raise ValueError(f"no replay for collective {name!r}")


def _groups(step: list[dict[str, Any]], mode: str) -> list[list[int]]:
    """Indices issued together: in ``issued`` mode a run of async collectives of one phase, else one each."""
    out: list[list[int]] = []
    for i, rec in enumerate(step):
        prev = step[i - 1] if i else None
        if (mode == "issued" and out and rec["async"] and prev is not None and prev["async"]
                and prev["phase"] == rec["phase"]):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _spin(seconds: float) -> None:
    """Keep the core busy for ``seconds`` (as the model's compute does before a late rank's call)."""
    end = time.perf_counter() + min(seconds, MAX_DELAY_S)
    while time.perf_counter() < end:
        pass


def replay_step(step: list[dict[str, Any]], calls: list[Any], mode: str,
                delays: list[float] | None = None) -> list[dict[str, Any]]:
    """Issue one step's collectives (``calls`` built from ``step``); records in the timing pass's format.
    ``delays`` (``skewed`` mode): per collective, how long this rank computes before calling it."""
    out = [{k: rec[k] for k in ("collective", "phase", "bytes")} for rec in step]
    for group in _groups(step, mode):
        works = []
        for i in group:
            if delays:
                _spin(delays[i])
            call = build(step[i]) if mode == "fresh" else calls[i]  # fresh: new buffers, as TorchRec's calls
            out[i]["start"] = time.perf_counter()
            works.append(call())
            out[i]["issued"] = time.perf_counter()
        for i, work in zip(group, works, strict=True):
            work.wait()
            out[i]["finish"] = time.perf_counter()
    return out


def skew(all_ranks: list[list[list[dict[str, Any]]]], rank: int) -> list[list[float]]:
    """Per step and collective: what ``rank`` did in the model before calling it, since its previous
    collective finished (before the first: how much later than the earliest rank it called it)."""
    out = []
    for s, step in enumerate(all_ranks[rank]):
        gaps = [step[0]["start"] - min(r[s][0]["start"] for r in all_ranks)] if step else []
        gaps += [rec["start"] - prev["finish"] for prev, rec in zip(step, step[1:], strict=False)]
        out.append([max(0.0, d) for d in gaps])
    return out


def replay(steps: list[list[dict[str, Any]]], mode: str, repeats: int = REPEATS,
           delays: list[list[float]] | None = None) -> list[list[dict[str, Any]]]:
    """This rank's recorded ``steps`` replayed ``repeats`` times (all ranks call it with their own records;
    ``delays`` per step for the ``skewed`` mode, see :func:`skew`); returns every rank's records, one list
    per replayed step."""
    import torch.distributed as dist

    calls = [[build(rec) for rec in step] for step in steps]
    for step, c in zip(steps, calls, strict=True):  # warm-up: gloo's first use of a size sets up its buffers
        dist.barrier()
        replay_step(step, c, mode)
    mine = []
    for _ in range(repeats):
        for s, (step, c) in enumerate(zip(steps, calls, strict=True)):
            dist.barrier()
            mine.append(replay_step(step, c, mode, delays[s] if delays else None))
    dist.barrier()
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, mine)
    return out


def per_collective(all_ranks: list[list[list[dict[str, Any]]]]) -> list[float]:
    """Per collective index of a step: the median over steps of (slowest rank's finish - last rank's call)."""
    world, steps = len(all_ranks), min(len(r) for r in all_ranks)
    n = len(all_ranks[0][0]) if steps else 0
    out = []
    for i in range(n):
        ts = sorted(max(all_ranks[r][s][i]["finish"] for r in range(world))
                    - max(all_ranks[r][s][i]["start"] for r in range(world)) for s in range(steps))
        out.append(max(0.0, ts[len(ts) // 2]))
    return out


def compare(recorded: list[list[list[dict[str, Any]]]], replays: dict[str, list[list[list[dict[str, Any]]]]]
            ) -> dict[str, Any]:
    """The pass's transfer against the replays, per collective (step 0's sizes; times medians over steps)
    and per phase (the union of the phase's collectives, median over steps, as
    :func:`~recstack.distributed.collective_timing.split` takes it)."""
    from recstack.distributed.collective_timing import split

    world = len(recorded)
    model = per_collective(recorded)
    rep = {m: per_collective(r) for m, r in replays.items()}
    rows = []
    for i, rec in enumerate(recorded[0][0]):
        pass_s, blocking = model[i], rep["blocking"][i]
        rows.append({"index": i, "collective": rec["collective"], "phase": rec["phase"], "dtype": rec["dtype"],
                     "async": rec["async"], "bytes": [recorded[r][0][i]["bytes"] for r in range(world)],
                     "in_splits": [recorded[r][0][i]["in_splits"] for r in range(world)],
                     "transfer_s": pass_s, "replay_s": blocking, "replay_skewed_s": rep["skewed"][i] if "skewed" in rep
                     else None, "replay_fresh_s": rep["fresh"][i] if "fresh" in rep else None, "issue_s": _median_issue(recorded, i), "replay_issue_s": _median_issue(
                         replays["blocking"], i),
                     "ratio": pass_s / blocking if blocking > 0 else None})
    phases: dict[str, Any] = {}
    model_ph = split(recorded)["phases"]
    rep_ph = {m: split(r)["phases"] for m, r in replays.items()}
    for phase, got in model_ph.items():
        b = rep_ph["blocking"].get(phase, {}).get("transfer_s")
        phases[phase] = {"transfer_s": got["transfer_s"], "replay_s": b,
                         "replay_issued_s": rep_ph.get("issued", {}).get(phase, {}).get("transfer_s"),
                         "replay_skewed_s": rep_ph.get("skewed", {}).get(phase, {}).get("transfer_s"),
                         "replay_fresh_s": rep_ph.get("fresh", {}).get(phase, {}).get("transfer_s"),
                         "collectives": len(got["collectives"]),
                         "ratio": got["transfer_s"] / b if b else None}
    got_s = sum(p["transfer_s"] for p in phases.values())
    rep_s = sum(p["replay_s"] or 0.0 for p in phases.values())
    total = {"transfer_s": got_s, "replay_s": rep_s, "ratio": got_s / rep_s if rep_s > 0 else None}
    return {"per_collective": rows, "phases": phases, "total": total}


def _median_issue(all_ranks: list[list[list[dict[str, Any]]]], i: int) -> float | None:
    """Median over ranks and steps of the time inside the ``torch.distributed`` call before it returned."""
    ts = sorted(rec[i]["issued"] - rec[i]["start"] for r in all_ranks for rec in r if rec[i].get("issued"))
    return ts[len(ts) // 2] if ts else None
