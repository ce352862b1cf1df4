"""The diff's ranks view: two profiles' ranks side by side, when at least one of them ran several ranks.

``rank_comparison(a, b)`` (``DiffResult.ranks``; None when neither is multi-rank):

* ``sides``: per side (``A``, ``B``) its world size, sharding, critical rank and
  per-rank figures (``distributed.per_rank``: step, compute, communication and
  its split into waiting for the last rank, transfer and other); a
  single-process side is one rank, its whole tree;
* ``views``: what the page's rank selector chooses between: ``critical`` (each
  side's critical path: the top-level tree, the rank with the most compute)
  and ``rank<i>`` (rank i of A against rank i of B), each a list of stages with
  A's and B's time per step (measured) and ``delta_s`` = B - A, ``rel`` = delta / A;
* ``imbalance``: each imbalance ratio (max / mean over ranks) of A and B and
  their difference; the longest and mean waits in seconds.

Every figure is the profiles' own or a difference of two of them; nothing is re-measured.
"""

from __future__ import annotations

from typing import Any

from recstack.tree import Profile

_RANK_KEYS = ("time_s", "compute_s", "communication_s", "wait_s", "peer_wait_s", "transfer_measured_s",
              "communication_other_s", "shards", "lookups", "bytes_requested")


def _side(p: Profile) -> dict[str, Any]:
    dist = p.distributed
    if not isinstance(dist, dict):
        stages = {c.name: c.time_s for c in p.root.children}
        return {"world_size": 1, "sharding": None, "critical_rank": 0, "oversubscribed": False,
                "per_rank": [{"rank": 0, "time_s": p.root.time_s, "stages": stages}]}
    return {"world_size": dist["world_size"], "sharding": dist["sharding"], "critical_rank": dist["critical_rank"],
            "oversubscribed": bool(dist.get("oversubscribed")),
            "per_rank": [{"rank": r["rank"], **{k: r.get(k) for k in _RANK_KEYS}, "stages": dict(r["stages"])}
                         for r in dist["per_rank"]]}


def _delta(a: float | None, b: float | None) -> tuple[float | None, float | None]:
    if a is None or b is None:
        return None, None
    return b - a, ((b - a) / a if a else None)


def _stage_rows(sa: dict[str, float] | None, sb: dict[str, float] | None) -> list[dict[str, Any]]:
    sa, sb = sa or {}, sb or {}
    rows = []
    for name in list(sa) + [s for s in sb if s not in sa]:
        a, b = sa.get(name), sb.get(name)
        d, rel = _delta(a, b)
        rows.append({"stage": name, "a": a, "b": b, "delta_s": d, "rel": rel})
    return rows


def _rank_stages(side: dict[str, Any], rank: int) -> dict[str, float] | None:
    row = next((r for r in side["per_rank"] if r["rank"] == rank), None)
    if row is None:
        return None
    return {"run": row["time_s"], **row["stages"]}


def _imbalance(p: Profile) -> dict[str, float]:
    imb = (p.distributed or {}).get("imbalance") or {}
    out = {f"stage {k}": v for k, v in (imb.get("by_stage") or {}).items()}
    out.update({f"total {k}": v for k, v in (imb.get("totals") or {}).items()})
    return out


def rank_comparison(a: Profile, b: Profile) -> dict[str, Any] | None:
    """See the module docstring."""
    if not (a.distributed or b.distributed):
        return None
    sa, sb = _side(a), _side(b)
    crit = _stage_rows({"run": a.root.time_s, **{c.name: c.time_s for c in a.root.children}},
                       {"run": b.root.time_s, **{c.name: c.time_s for c in b.root.children}})
    views = [{"key": "critical", "label": f"critical path (A rank {sa['critical_rank']}, B rank {sb['critical_rank']})",
              "rows": crit}]
    for r in range(max(sa["world_size"], sb["world_size"])):
        views.append({"key": f"rank{r}", "label": f"rank {r}",
                      "rows": _stage_rows(_rank_stages(sa, r), _rank_stages(sb, r))})
    ia, ib = _imbalance(a), _imbalance(b)
    imbalance = []
    for k in list(ia) + [x for x in ib if x not in ia]:
        d, _rel = _delta(ia.get(k), ib.get(k))
        imbalance.append({"figure": k, "a": ia.get(k), "b": ib.get(k), "delta": d})
    waits = {}
    for key in ("max_wait_s", "mean_wait_s"):
        va = ((a.distributed or {}).get("imbalance") or {}).get(key)
        vb = ((b.distributed or {}).get("imbalance") or {}).get(key)
        waits[key] = {"a": va, "b": vb, "delta_s": _delta(va, vb)[0]}
    return {"sides": {"A": sa, "B": sb}, "views": views, "imbalance": imbalance, "waits": waits}
