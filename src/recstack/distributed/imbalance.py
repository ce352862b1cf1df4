"""Per-rank figures of a multi-rank profile, the imbalance between ranks, and the planner against the measurement.

Per rank (``distributed.per_rank[]``), every figure per step:

* ``stages``: each stage's time (measured; ``communication`` as moved out by
  :mod:`recstack.distributed.communication`);
* ``compute_s`` = run time - communication time; ``communication_s``;
  ``wait_s`` = communication_s - the smallest communication_s of all ranks
  (formula: a collective ends on every rank together, so what a rank spends in
  it beyond the rank that arrived last is waiting); ``transfer_s`` = the rest;
* ``shards``, ``tables``; ``lookups`` (a table-wise or column-wise shard looks
  up the IDs of every rank's batch, a data-parallel replica its own rank's);
  ``bytes_requested`` = lookups x shard columns x element size; ``bytes_unique``
  the same with distinct rows; ``table_bytes`` = shard rows x columns x element size
  (computed from one batch per rank).

``imbalance``: max / mean over ranks of every stage's time and of compute,
communication, lookups and bytes (1.0 = balanced).

``planner``: per shard the planner's estimate beside the measured time, with
``measured_s`` = the rank's embedding-stage time (in training plus the
embedding part of backward) split over its shards by requested bytes
(derived); ``error_by_sharding`` = sum measured / sum estimated per sharding type.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from recstack.distributed.communication import COMM_STAGE
from recstack.tree import Node


def shard_figures(shards: list[dict[str, Any]], tables: dict[str, dict[str, Any]],
                  global_tables: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each shard with its lookups and bytes (see the module docstring)."""
    out = []
    for sh in shards:
        t, g = tables.get(sh["table"]), global_tables.get(sh["table"])
        if t is None or g is None:
            out.append(dict(sh))
            continue
        elem = t["row_bytes"] / max(t["dim"], 1)
        rows, cols = (sh["size"] or [t["rows"], t["dim"]])[:2]
        src = t if sh.get("replica") else g
        row_frac = rows / max(t["rows"], 1)
        lookups = src["lookups"] * row_frac
        out.append({**sh, "rows": rows, "columns": cols, "lookups": lookups,
                    "unique_rows": src["unique_rows"] * row_frac,
                    "bytes_requested": lookups * cols * elem,
                    "bytes_unique": src["unique_rows"] * row_frac * cols * elem,
                    "table_bytes": rows * cols * elem})
    return out


def _stage_times(root: Node) -> dict[str, float]:
    return {c.name: c.time_s for c in root.children if c.level == "stage"}


def per_rank_figures(roots: list[Node], shards: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    comms = [(_stage_times(r).get(COMM_STAGE, 0.0)) for r in roots]
    floor = min(comms) if comms else 0.0
    out = []
    for r, (root, shs) in enumerate(zip(roots, shards, strict=True)):
        comm = comms[r]
        out.append({
            "rank": r,
            "time_s": root.time_s,
            "stages": _stage_times(root),
            "compute_s": max(0.0, root.time_s - comm),
            "communication_s": comm,
            "wait_s": comm - floor,
            "transfer_s": floor,
            "shards": len(shs),
            "tables": len({s["table"] for s in shs}),
            "lookups": sum(s.get("lookups", 0.0) for s in shs),
            "bytes_requested": sum(s.get("bytes_requested", 0.0) for s in shs),
            "bytes_unique": sum(s.get("bytes_unique", 0.0) for s in shs),
            "table_bytes": sum(s.get("table_bytes", 0.0) for s in shs),
        })
    return out


COMM_THREADS = ("gloo", "pt_gloo", "nccl", "pt_nccl")  # thread names of the collectives' backends


def thread_figures(threads: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A rank's threads over its timing pass (:mod:`recstack.hardware.threads`, measured): the list, the
    cores its collective backend's threads used (``comm_thread_cores``) and how many of its threads were
    runnable but waiting for a core on average (``waiting_cores``); None where not measured."""
    if not threads:
        return {"threads": None, "comm_thread_cores": None, "waiting_cores": None}
    comm = sum(t["cores"] for t in threads if t["name"].startswith(COMM_THREADS))
    return {"threads": threads, "comm_thread_cores": comm, "waiting_cores": sum(t["waiting_cores"] for t in threads)}


def imbalance(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """max / mean over ranks (1.0: balanced) of every stage and of the per-rank totals."""
    def ratio(values: list[float]) -> float | None:
        mean = sum(values) / len(values) if values else 0.0
        return max(values) / mean if mean > 0 else None

    stages = sorted({s for pr in per_rank for s in pr["stages"]})
    by_stage = {s: ratio([pr["stages"].get(s, 0.0) for pr in per_rank]) for s in stages}
    totals = {k: ratio([pr[k] for pr in per_rank])
              for k in ("time_s", "compute_s", "communication_s", "lookups", "bytes_requested", "table_bytes")}
    waits = [pr["wait_s"] for pr in per_rank]
    return {"by_stage": {k: v for k, v in by_stage.items() if v is not None},
            "totals": {k: v for k, v in totals.items() if v is not None},
            "max_wait_s": max(waits) if waits else 0.0,
            "mean_wait_s": sum(waits) / len(waits) if waits else 0.0}


def embedding_compute_s(root: Node) -> float:
    """The rank's embedding work without its communication: the embedding stage, plus backward's embedding part."""
    emb = root.child("embedding")
    total = emb.time_s if emb else 0.0
    bw = root.child("backward")
    if bw is not None:
        part = bw.child("embedding")
        total += part.time_s if part else 0.0
    return total


def planner_vs_measured(roots: list[Node], shards: list[list[dict[str, Any]]],
                        estimates: list[dict[str, Any]], train: bool) -> dict[str, Any] | None:
    """Per shard: the planner's estimate and the measured time (derived, see the module docstring)."""
    if not estimates:
        return None
    rows = []
    for r, shs in enumerate(shards):
        total_bytes = sum(s.get("bytes_requested", 0.0) for s in shs) or 1.0
        emb_s = embedding_compute_s(roots[r])
        for s in shs:
            est = next((e for e in estimates if e["table"] == s["table"] and e["rank"] == r
                        and (s.get("offset") is None or e["offset"] == s["offset"])), None)
            if est is None:
                continue
            est_s = (est["fwd_compute_s"] or 0.0) + ((est["bwd_compute_s"] or 0.0) if train else 0.0)
            rows.append({"table": s["table"], "rank": r, "sharding": s["sharding"],
                         "estimated_s": est_s,
                         "estimated_comms_s": (est["fwd_comms_s"] or 0.0) + ((est["bwd_comms_s"] or 0.0)
                                                                              if train else 0.0),
                         "measured_s": emb_s * s.get("bytes_requested", 0.0) / total_bytes,
                         "estimated_storage_bytes": est["storage_bytes"],
                         "table_bytes": s.get("table_bytes")})
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        sums[row["sharding"]][0] += row["measured_s"]
        sums[row["sharding"]][1] += row["estimated_s"]
    comm_est = [sum(x["estimated_comms_s"] for x in rows if x["rank"] == r) for r in range(len(roots))]
    return {
        "shards": rows,
        "error_by_sharding": {k: (m / e if e > 0 else None) for k, (m, e) in sums.items()},
        "communication_by_rank": [{"rank": r, "estimated_s": comm_est[r],
                                   "measured_s": _stage_times(roots[r]).get(COMM_STAGE, 0.0)}
                                  for r in range(len(roots))],
        "method": "measured_s: the rank's embedding time (without communication) split over its shards by "
                  "requested bytes; estimated_s: TorchRec planner fwd (+bwd in training) compute",
    }
