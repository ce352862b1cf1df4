"""Communication model: the bytes each communication phase sends, and its time from the collective benchmark.

Bytes per rank and step (computed; int64 IDs and lengths, fp32 embeddings):

* ``input_dist`` (KJT all-to-alls, one after another, as TorchRec runs them):
  the splits ``W x tables x 8``, the lengths ``B x tables x 8`` and the IDs
  ``sum_t lookups_t x 8`` of the rank's own batch;
* ``output_dist`` (pooled-embedding all-to-all): the rank's shards' outputs for
  every rank's samples: ``sum_shards B x W x columns x 4`` (data-parallel
  replicas send nothing);
* ``backward_all_to_all``: the same as ``output_dist`` (the gradients back);
* ``dense_all_reduce``: the dense parameters' bytes (DDP reduces every gradient).

Times come from the machine file's ``collectives`` (``recstack machine
--collectives``): the median time of one all-to-all or all-reduce at that
world size, interpolated linearly in log(bytes) - log(time) between measured
sizes; above the largest size time grows linearly with bytes (the largest
size's bandwidth); below the smallest it is the smallest size's time (latency).
A world size that was not measured is scaled from the nearest measured one
below it by the number of peers: all-to-all ``(K-1)/(W-1)``, ring all-reduce
``(2(K-1)/K) / (2(W-1)/W)`` (a stated assumption; measure more world sizes to
check it).
"""

from __future__ import annotations

import math
from typing import Any

PHASE_COLLECTIVE = {"input_dist": "all_to_all", "output_dist": "all_to_all",
                    "backward_all_to_all": "all_to_all", "dense_all_reduce": "all_reduce"}
ID_BYTES = 8
EMB_BYTES = 4


def phase_messages(*, local_lookups: float, tables: int, batch_size: int, world_size: int,
                   output_columns: float, dense_param_bytes: float, train: bool) -> dict[str, list[float]]:
    """The collectives each phase runs, as the bytes of each (see the module docstring); ``output_columns``
    is the sum of the columns of the rank's sharded (not replicated) shards."""
    out = {"input_dist": [world_size * tables * ID_BYTES, batch_size * tables * ID_BYTES, local_lookups * ID_BYTES],
           "output_dist": [batch_size * world_size * output_columns * EMB_BYTES]}
    if train:
        out["backward_all_to_all"] = list(out["output_dist"])
        out["dense_all_reduce"] = [dense_param_bytes]
    return out


def phase_bytes(**kw: Any) -> dict[str, float]:
    """Bytes one rank sends per phase per step: the sum of :func:`phase_messages`."""
    return {p: float(sum(m)) for p, m in phase_messages(**kw).items()}


def collectives_time(collectives: dict[str, Any], calls: list[tuple[str, float]], world_size: int) -> float | None:
    """The benchmark's time of ``calls`` ((kind, bytes) each) one after another (gloo runs them in turn);
    None when the benchmark lacks one of them."""
    times = [collective_time(collectives, kind, b, world_size) for kind, b in calls]
    return None if any(t is None for t in times) else float(sum(t for t in times if t is not None))


def benchmark_of(collectives: dict[str, Any] | None, collective: str) -> str:
    """The size-sweep benchmark a recorded collective is compared with: its own kind where the machine file
    measured it (reduce-scatter since the benchmark has one), else the all-to-all."""
    name = {"all_to_all_single": "all_to_all", "all_reduce": "all_reduce", "reduce_scatter_tensor": "reduce_scatter",
            "reduce_scatter": "reduce_scatter"}.get(collective, "all_to_all")
    by_ws = (collectives or {}).get("by_world_size") or {}
    have = {k for v in by_ws.values() for k, rows in v.items() if rows}
    return name if name in have else "all_to_all"


def phase_time(collectives: dict[str, Any], phase: str, messages: list[float], world_size: int) -> float | None:
    """Modelled time of a phase: its collectives one after another."""
    return collectives_time(collectives, [(PHASE_COLLECTIVE[phase], b) for b in messages], world_size)


def _interp(rows: list[dict[str, Any]], nbytes: float) -> float:
    pts = sorted((float(r["bytes"]), float(r["time_s"])) for r in rows if r["time_s"] > 0)
    if nbytes <= pts[0][0]:
        return pts[0][1]
    if nbytes >= pts[-1][0]:
        return pts[-1][1] * nbytes / pts[-1][0]
    for (b0, t0), (b1, t1) in zip(pts, pts[1:], strict=False):
        if b0 <= nbytes <= b1:
            f = (math.log(nbytes) - math.log(b0)) / (math.log(b1) - math.log(b0))
            return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))
    return pts[-1][1]


def peer_scale(collective: str, k: int, w: int) -> float:
    if k == w:
        return 1.0
    if collective == "all_reduce":
        return (2 * (k - 1) / k) / (2 * (w - 1) / w)
    return (k - 1) / (w - 1)


def collective_time(collectives: dict[str, Any], collective: str, nbytes: float, world_size: int) -> float | None:
    """Modelled time of one ``collective`` of ``nbytes`` at ``world_size`` (None: nothing measured)."""
    by_ws = {int(k): v for k, v in (collectives.get("by_world_size") or {}).items() if v.get(collective)}
    if not by_ws or nbytes <= 0:
        return None if not by_ws else 0.0
    below = [w for w in by_ws if w <= world_size]
    w = max(below) if below else min(by_ws)
    return _interp(by_ws[w][collective], nbytes) * peer_scale(collective, world_size, w)


def is_latency_bound(collectives: dict[str, Any], collective: str, nbytes: float, world_size: int) -> bool:
    """At most twice the smallest measured message's time: the fixed cost dominates, not the bytes."""
    t = collective_time(collectives, collective, nbytes, world_size)
    floor = collective_time(collectives, collective, 1.0, world_size)
    return t is not None and floor is not None and t <= 2 * floor


def classify(messages: dict[str, list[float]], measured: dict[str, float], collectives: dict[str, Any] | None,
             world_size: int) -> list[dict[str, Any]] | None:
    """Every measured phase against the benchmark: measured / modelled time, and latency vs bandwidth
    (latency: every collective of the phase at most twice the smallest message's time)."""
    if not collectives or not collectives.get("by_world_size"):
        return None
    out = []
    for phase, coll in PHASE_COLLECTIVE.items():
        if phase not in measured or phase not in messages:
            continue
        bench = phase_time(collectives, phase, messages[phase], world_size)
        latency = all(is_latency_bound(collectives, coll, b, world_size) for b in messages[phase])
        out.append({"phase": phase, "collective": coll, "bytes": float(sum(messages[phase])),
                    "collectives": len(messages[phase]), "measured_s": measured[phase], "benchmark_s": bench,
                    "ratio": measured[phase] / bench if bench else None,
                    "bound": None if bench is None else ("latency" if latency else "bandwidth")})
    return out
