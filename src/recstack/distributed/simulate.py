"""shard-sim: predict per-rank time and imbalance for K ranks from a measured profile and the communication model.

From the profile (single- or multi-rank), per step at the profile's batch size B per rank:

* embedding cost per requested byte ``c`` = embedding time without communication
  (the embedding stage, plus backward's embedding part in training) / requested bytes,
  summed over the measured ranks (measured / computed);
* dense time ``D`` per rank = the rest of the rank's compute (measured, mean over
  ranks): every rank keeps B samples, so it does not change with K;
* per table: lookups per sample, dim (``embedding_tables``).

For K ranks (global batch K x B), the shards and their requested bytes:

* ``table_wise``: one shard per table, ``lookups/sample x B x K x dim x 4``, placed
  largest first on the least-loaded rank (greedy, as TorchRec's partitioner);
* ``column_wise``: each table cut into ``min(K, dim / 4)`` column shards, placed the same way;
* ``row_wise``: each table cut into K row shards, each serving 1/K of the lookups;
* ``data_parallel``: every rank looks up its own B samples in a full replica.

Rank r's compute is ``c x bytes_r + D``; its transfer the modelled time of
each phase (:mod:`recstack.distributed.comm_model`; data parallel sends no
embeddings but all-reduces the tables' gradients in training). Collectives
synchronise the ranks, so the step takes ``max_r compute_r + max_r transfer_r +
F`` and rank r waits ``max compute - compute_r``. ``F`` is the communication
time that is neither transfer nor compute imbalance: the rank that waits least,
its communication minus the replay of the model's own collectives
(``distributed.collective_replay``; profiles from before the replay: minus the
collective pass's in-model transfer): the Python/TorchRec work around the
collectives and the skew every rank waits even when balanced; it is kept constant in K (a stated
assumption: both are per-collective costs, and the collectives per step do not
change with K for table- and column-wise sharding). The communication model is the
replay (at another K: the machine file's benchmark calibrated by the replay at the
recorded sizes), else the benchmark, else the profile's own communication phases
(one point per phase: latency below its size, its bandwidth above).
"""

from __future__ import annotations

import heapq
from typing import Any

from recstack.config.run import SHARDING_TYPES
from recstack.distributed.comm_model import (
    EMB_BYTES,
    PHASE_COLLECTIVE,
    benchmark_of,
    collectives_time,
    peer_scale,
    phase_messages,
    phase_time,
)
from recstack.distributed.communication import COMM_STAGE
from recstack.distributed.imbalance import embedding_compute_s
from recstack.errors import ConfigError
from recstack.schema.documents import check
from recstack.schema.shard_sim_model import ShardSimPrediction
from recstack.tree import Node, Profile

SIM_SHARDINGS = tuple(s for s in SHARDING_TYPES if s != "table_row_wise")
RANKS_MAX = 1024


def measured_costs(prof: Profile) -> dict[str, Any]:
    """What the simulation takes from a profile (see the module docstring)."""
    tables = prof.embedding_tables or []
    if not tables:
        raise ConfigError("the profile has no embedding_tables (a zoo model's profile has)", field="PROFILE")
    dist = prof.distributed
    roots = [Node.from_dict(r["root"]) for r in prof.ranks if r.get("root")] if dist else [prof.root]
    emb = [embedding_compute_s(r) for r in roots]
    comm = [_stage(r, COMM_STAGE) for r in roots]
    if dist:
        bytes_req = [pr["bytes_requested"] for pr in dist["per_rank"]]
        dense_bytes = float(dist.get("dense_param_bytes") or 0.0)
    else:
        bytes_req = [sum(t["bytes_requested"] for t in tables)]
        res = (prof.memory or {}).get("resident_by_stage") or {}
        dense_bytes = float(sum(v.get("parameters_bytes", 0) for k, v in res.items() if k != "embedding"))
    if sum(bytes_req) <= 0:
        raise ConfigError("the profile's tables requested no bytes; nothing to scale", field="PROFILE")
    return {
        "batch_size": int(prof.run.get("batch_size") or 1),
        "train": prof.run.get("mode") == "train",
        "world_size": int(dist["world_size"]) if dist else 1,
        "cost_per_byte_s": sum(emb) / sum(bytes_req),
        "dense_s": sum(r.time_s - e - c for r, e, c in zip(roots, emb, comm, strict=True)) / len(roots),
        "dense_param_bytes": dense_bytes,
        "tables": [{"table": t["table"], "dim": int(t["dim"]), "rows": int(t["rows"]),
                    "lookups_per_sample": float(t["pooling_factor"])} for t in tables],
        "measured_phases": _measured_phases(prof) if dist else None,
        "replay_phases": _replay_phases(dist),
        **_fixed_communication(dist),
    }


def _replay_phases(dist: dict[str, Any] | None) -> dict[str, Any] | None:
    """Per phase the replay of the model's own collectives (``distributed.collective_replay``): its time
    (blocking, the slowest rank) and each collective's kind and bytes (the largest rank's)."""
    rep = (dist or {}).get("collective_replay")
    if not rep:
        return None
    out: dict[str, Any] = {}
    for row in rep["per_collective"]:
        ph = out.setdefault(row["phase"], {"replay_s": (rep["phases"].get(row["phase"]) or {}).get("replay_s"),
                                           "collectives": []})
        ph["collectives"].append({"collective": row["collective"], "bytes": float(max(row["bytes"]))})
    return {p: v for p, v in out.items() if v["replay_s"] is not None}


def _fixed_communication(dist: dict[str, Any] | None) -> dict[str, float]:
    """``comm_fixed_s``: what the communication of the rank that waits least holds besides the transfer the
    model predicts: min over ranks of communication_s minus the replay's transfer (all phases; the
    ``distributed.collective_replay``), else minus the rank's in-model transfer (the collective pass's
    ``transfer_measured_s``, profiles from before the replay). What it holds: TorchRec's work around the
    collectives, the skew every rank sees even when balanced (inside a step the ranks take turns being
    late), and the in-model transfer's excess over the replay (a woken peer, fresh output pages). 0 without
    a collective pass (single-rank profiles)."""
    rows = (dist or {}).get("per_rank") or []
    if _replay_phases(dist):
        replay_s = dist["collective_replay"]["total"]["replay_s"]
        return {"comm_fixed_s": max(0.0, min(r["communication_s"] for r in rows) - replay_s)}
    rows = [r for r in rows if r.get("transfer_measured_s") is not None]
    return {"comm_fixed_s": min(max(0.0, r["communication_s"] - r["transfer_measured_s"]) for r in rows)
            if rows else 0.0}


def _stage(root: Node, name: str) -> float:
    c = root.child(name)
    return c.time_s if c is not None else 0.0


def _measured_phases(prof: Profile) -> dict[str, Any] | None:
    """The critical rank's measured phases with their bytes: the fallback communication model."""
    crit = prof.root.child(COMM_STAGE)
    sizes = prof.distributed.get("communication_bytes") or {}
    if crit is None or not sizes:
        return None
    return {ph.name: {"bytes": sizes[ph.name], "time_s": ph.time_s} for ph in crit.children
            if sizes.get(ph.name, 0) > 0 and ph.time_s > 0}


def _transfer(costs: dict[str, Any], collectives: dict[str, Any] | None, phase: str, messages: list[float],
              k: int) -> float:
    """A phase's modelled time at ``k`` ranks: the replay of the model's own collectives if the profile has
    it (at the profile's world size with its bytes; else the benchmark at ``messages`` times the replay /
    benchmark ratio at the recorded sizes: the replay calibrates the benchmark), the benchmark if there is
    one, else the profile's own measurement of the phase (its time below its bytes, its bandwidth above,
    scaled by the peers)."""
    rep = (costs.get("replay_phases") or {}).get(phase)
    if rep is not None:
        if k == costs["world_size"]:
            return rep["replay_s"]
        if collectives:
            at_w = collectives_time(collectives, [(benchmark_of(collectives, c["collective"]), c["bytes"])
                                                  for c in rep["collectives"]], costs["world_size"])
            at_k = phase_time(collectives, phase, messages, k)
            if at_w and at_k is not None:
                return rep["replay_s"] / at_w * at_k
        nbytes = sum(c["bytes"] for c in rep["collectives"])
        scale = peer_scale(PHASE_COLLECTIVE[phase], k, costs["world_size"])
        return rep["replay_s"] * max(1.0, sum(messages) / nbytes if nbytes else 1.0) * scale
    if collectives:
        return phase_time(collectives, phase, messages, k) or 0.0
    point = (costs.get("measured_phases") or {}).get(phase)
    if point is None:
        return 0.0
    scale = peer_scale(PHASE_COLLECTIVE[phase], k, costs["world_size"])
    return point["time_s"] * max(1.0, sum(messages) / point["bytes"]) * scale


def _shards(costs: dict[str, Any], sharding: str, k: int) -> list[dict[str, Any]]:
    b = costs["batch_size"]
    out = []
    for t in costs["tables"]:
        lookups = t["lookups_per_sample"] * b * k
        if sharding == "table_wise":
            out.append({"table": t["table"], "columns": t["dim"], "bytes": lookups * t["dim"] * EMB_BYTES})
        elif sharding == "column_wise":
            n = max(1, min(k, t["dim"] // 4))
            for i in range(n):
                cols = t["dim"] // n + (1 if i < t["dim"] % n else 0)
                out.append({"table": t["table"], "columns": cols, "bytes": lookups * cols * EMB_BYTES})
        elif sharding == "row_wise":
            for _ in range(k):
                out.append({"table": t["table"], "columns": t["dim"], "bytes": lookups / k * t["dim"] * EMB_BYTES,
                            "fixed_rank": len(out) % k})
    return out


def _place(shards: list[dict[str, Any]], k: int) -> list[list[dict[str, Any]]]:
    """Largest shard first onto the least-loaded rank; row-wise shards sit one per rank."""
    ranks: list[list[dict[str, Any]]] = [[] for _ in range(k)]
    heap = [(0.0, r) for r in range(k)]
    for sh in sorted(shards, key=lambda s: -s["bytes"]):
        if "fixed_rank" in sh:
            ranks[sh["fixed_rank"]].append(sh)
            continue
        load, r = heapq.heappop(heap)
        ranks[r].append(sh)
        heapq.heappush(heap, (load + sh["bytes"], r))
    return ranks


def simulate(costs: dict[str, Any], k: int, sharding: str, collectives: dict[str, Any] | None) -> dict[str, Any]:
    """Per-rank predicted times for ``k`` ranks (:class:`recstack.schema.shard_sim_model.ShardSimPrediction`;
    the module docstring gives the model)."""
    if sharding not in SIM_SHARDINGS:
        raise ConfigError(f"must be one of {', '.join(SIM_SHARDINGS)} (got {sharding!r})", field="--sharding")
    if k > 1 and not collectives and not costs.get("measured_phases") and not costs.get("replay_phases"):
        raise ConfigError("no communication model: give a machine file with collectives (recstack machine "
                          "--collectives) or a multi-rank profile measured against one", field="--machine")
    b, train = costs["batch_size"], costs["train"]
    tables = costs["tables"]
    if sharding == "data_parallel":
        local = sum(t["lookups_per_sample"] * b * t["dim"] * EMB_BYTES for t in tables)
        placed: list[list[dict[str, Any]]] = [[{"table": t["table"], "columns": 0, "bytes": 0.0} for t in tables]
                                              for _ in range(k)]
        emb_bytes = [local] * k
    else:
        placed = _place(_shards(costs, sharding, k), k)
        emb_bytes = [sum(s["bytes"] for s in shs) for shs in placed]
    table_grad_bytes = sum(t["rows"] * t["dim"] * EMB_BYTES for t in tables) if sharding == "data_parallel" else 0
    rows = []
    for r in range(k):
        phases = phase_messages(local_lookups=sum(t["lookups_per_sample"] * b for t in tables), tables=len(tables),
                             batch_size=b, world_size=k, output_columns=sum(s["columns"] for s in placed[r]),
                             dense_param_bytes=costs["dense_param_bytes"] + table_grad_bytes, train=train)
        if sharding == "data_parallel":
            phases = {p: v for p, v in phases.items() if p == "dense_all_reduce"}
        transfer = 0.0 if k == 1 else sum(_transfer(costs, collectives, p, m, k) for p, m in phases.items())
        compute = costs["cost_per_byte_s"] * emb_bytes[r] + costs["dense_s"]
        rows.append({"rank": r, "shards": len(placed[r]), "embedding_bytes": emb_bytes[r],
                     "embedding_s": costs["cost_per_byte_s"] * emb_bytes[r], "dense_s": costs["dense_s"],
                     "compute_s": compute, "transfer_s": transfer,
                     "phase_bytes": {p: float(sum(m)) for p, m in phases.items()}})
    max_compute = max(x["compute_s"] for x in rows)
    max_transfer = max(x["transfer_s"] for x in rows)
    fixed = 0.0 if k == 1 else costs.get("comm_fixed_s", 0.0)
    for x in rows:
        x["wait_s"] = max_compute - x["compute_s"]
        x["communication_s"] = max_transfer + fixed + x["wait_s"]  # what the rank's communication stage would hold
        x["time_s"] = max_compute + max_transfer + fixed
    mean_compute = sum(x["compute_s"] for x in rows) / k
    return check(ShardSimPrediction, {"ranks": k, "sharding": sharding, "step_s": max_compute + max_transfer + fixed,
            "communication_fixed_s": fixed,
            "imbalance_compute": max_compute / mean_compute if mean_compute > 0 else None,
            "max_wait_s": max(x["wait_s"] for x in rows),
            "comm_model": _model_name(costs, collectives, k),
            "per_rank": rows})


def _model_name(costs: dict[str, Any], collectives: dict[str, Any] | None, k: int) -> str:
    if costs.get("replay_phases"):
        if k == costs["world_size"]:
            return "the profile's replay of its own collectives"
        return ("the machine's collective benchmark, calibrated by the profile's replay" if collectives else
                "the profile's replay of its own collectives, scaled by bytes and peers")
    return "machine collectives" if collectives else "the profile's own communication phases"


def compare(prediction: dict[str, Any], prof: Profile) -> dict[str, Any] | None:
    """Predicted against measured per rank, when the profile ran at the predicted world size."""
    dist = prof.distributed
    if not dist or dist["world_size"] != prediction["ranks"]:
        return None
    meas = sorted(dist["per_rank"], key=lambda x: x["compute_s"])
    pred = sorted(prediction["per_rank"], key=lambda x: x["compute_s"])  # ranks matched by their compute order
    rows = [{"rank": m["rank"], **{f"{k}_measured_s": m[k] for k in ("time_s", "compute_s", "communication_s")},
             **{f"{k}_predicted_s": p[k] for k in ("time_s", "compute_s", "communication_s")},
             # the communication's terms side by side: the wait for a slower rank's compute, the transfer
             "wait_measured_s": m.get("wait_s"), "wait_predicted_s": p["wait_s"],
             "transfer_measured_s": m.get("transfer_measured_s"), "transfer_predicted_s": p["transfer_s"],
             "fixed_predicted_s": prediction.get("communication_fixed_s")}
            for m, p in zip(meas, pred, strict=True)]
    for r in rows:
        for k in ("time_s", "compute_s", "communication_s"):
            m = r[f"{k}_measured_s"]
            r[f"{k}_error"] = (r[f"{k}_predicted_s"] - m) / m if m > 0 else None
    return {"per_rank": rows}


def profile_sharding(prof: Any) -> str:
    """The sharding the profile was measured with (``table_wise`` when it names none this simulator knows)."""
    sharding = (prof.distributed or {}).get("sharding", "table_wise")
    return sharding if sharding in ("table_wise", "column_wise", "row_wise", "data_parallel") else "table_wise"
