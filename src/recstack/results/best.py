"""The best configuration per model in a store's points (an analysis: it computes, draws nothing).

Per model, over the points with status ``ok`` that were not contended
(contended ones are left out and counted, unless asked for):

* ``best``: the highest ``throughput`` (``by="throughput"``) or the lowest
  ``step_p50_s`` (``by="latency"``);
* ``best_under_target``: the same among points whose ``step_p99_s`` is at most
  the target (only when a target is given; None when no point meets it);
* ``speedup_vs_worst``: best over the worst point by the same measure
  (throughput ratio, or inverse p50 ratio for latency);
* ``speedup_vs_default``: best over the default configuration, the point whose
  deployment fields (:data:`DEPLOYMENT_FIELDS`) are RunConfig's defaults
  (same scale and workload as the best where there is a choice); None when the
  grid does not hold it.

A model whose ``ok`` points are **mostly contended** (more than half,
:data:`MOSTLY`) gets ``mostly_contended`` and a ``warning`` naming the counts,
and no best at all: the few quiet points that remain are not a fair sample of
the grid (a 4-point sweep with 3 left out once presented its slowest cell as
the best). ``include_contended`` ranks every point, and keeps the warning.

Given the store's ``advice`` table, the measured what-ifs of ``recstack advise`` are ranked beside the points
where their figures are comparable (same host, scale, workload and mode as a usable point, not contended:
:func:`recstack.results.advice.comparable`); each ranked configuration says its ``source`` (``sweep`` or
``advise``) and ``from``; ``advice_ranked`` and ``advice_left_out`` (reason -> count) say what was used.
"""

from __future__ import annotations

import math
from typing import Any

from recstack.config.run import RunConfig
from recstack.errors import ConfigError
from recstack.results.advice import advice_rows, candidates

DEPLOYMENT_FIELDS = ("batch_size", "threads", "backend", "table_dtype", "dtype", "mode")
SHOWN_FIELDS = ("scale", "workload", *DEPLOYMENT_FIELDS)
BY = ("throughput", "latency")
MOSTLY = 0.5  # a share of contended ok points above this withholds the best


def _clean(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v.item() if hasattr(v, "item") else v


def describe(row: dict[str, Any]) -> dict[str, Any]:
    """A ranked configuration: its fields, figures and ``source`` (``sweep``: a point, ``advise``: a what-if
    of the ``advice`` table, with its ``advice_id``, ``lever`` and ``what_if_config``) and ``from`` (in words)."""
    out = {f: _clean(row.get(f)) for f in SHOWN_FIELDS}
    for k in ("throughput", "step_p50_s", "step_p99_s", "config_hash", "contended"):
        out[k] = _clean(row.get(k))
    if row.get("source") == "advise":
        return out | {k: row[k] for k in ("source", "from", "advice_id", "lever", "what_if_config")}
    sweep = _clean(row.get("sweep_id"))
    return out | {"source": "sweep", "from": f"sweep {sweep}, point {_clean(row.get('point_id'))}" if sweep
                  else f"sweep point {_clean(row.get('point_id'))}"}


def _score(row: dict[str, Any], by: str) -> float:
    """Higher is better for both measures."""
    if by == "throughput":
        return float(row["throughput"] or 0.0)
    p50 = row["step_p50_s"]
    return 1.0 / p50 if p50 else 0.0


def is_default(row: dict[str, Any]) -> bool:
    for f in DEPLOYMENT_FIELDS:
        d = RunConfig.model_fields[f].default
        v = _clean(row.get(f))
        if v != d:
            return False
    return True


def best(points: Any, *, model: str | None = None, p99: float | None = None, by: str = "throughput",
         include_contended: bool = False, advice: Any = None) -> list[dict[str, Any]]:
    """One dict per model (``model``, ``best``, ``best_under_target``, ``speedup_vs_worst``,
    ``speedup_vs_default``, counts); ``points`` is :func:`recstack.results.load`'s DataFrame, ``advice``
    (optional) the ``advice`` table's: its comparable what-ifs are ranked beside the points
    (:mod:`recstack.results.advice`)."""

    if by not in BY:
        raise ConfigError(f"must be one of {', '.join(BY)} (got {by!r})", field="--by")
    if p99 is not None and not p99 > 0:
        raise ConfigError(f"must be a positive number of seconds (got {p99!r})", field="--p99")
    rows = points.to_dict("records")
    models = sorted({r["model"] for r in rows})
    if model is not None:
        if model not in models:
            raise ConfigError(f"no points of model {model!r} in the store (it holds {', '.join(models) or 'none'})",
                              field="--model")
        models = [model]
    adv = advice_rows(advice)
    return [_best_of(m, [r for r in rows if r["model"] == m], p99, by, include_contended,
                     [a for a in adv if a.get("model") == m]) for m in models]


def _best_of(model: str, rows: list[dict[str, Any]], p99: float | None, by: str,
             include_contended: bool, advice: list[dict[str, Any]]) -> dict[str, Any]:

    ok = [r for r in rows if r["status"] == "ok" and _score(r, by) > 0]
    contended = [r for r in ok if bool(_clean(r.get("contended")))]
    usable = ok if include_contended else [r for r in ok if not bool(_clean(r.get("contended")))]
    mostly = bool(ok) and len(contended) > MOSTLY * len(ok)
    out: dict[str, Any] = {
        "model": model, "by": by, "p99_target_s": p99, "points": len(rows), "ok": len(ok),
        "failed": sum(r["status"] != "ok" for r in rows),
        "contended_left_out": 0 if include_contended else len(contended),
        "best": None, "best_under_target": None, "speedup_vs_worst": None, "speedup_vs_default": None,
        "default": None, "mostly_contended": mostly, "warning": None,
        "advice_rows": len(advice), "advice_ranked": 0, "advice_left_out": {},
    }
    if mostly:
        out["warning"] = (
            f"{model}: {len(contended)} of {len(ok)} successful points ran contended (other work shared the host): "
            + ("they are ranked as asked (--include-contended), but their times are not to be trusted"
               if include_contended else "no best is presented, since the few quiet points are no fair sample; "
               "re-run the sweep on a quiet host (or --include-contended to rank them anyway)"))
        if not include_contended:
            return out
    what_ifs, out["advice_left_out"] = candidates(advice, usable, include_contended)
    out["advice_ranked"] = len(what_ifs)
    if not usable:
        return out
    ranked = sorted(usable + what_ifs, key=lambda r: _score(r, by), reverse=True)
    top, worst = ranked[0], ranked[-1]
    out["best"] = describe(top)
    out["speedup_vs_worst"] = _score(top, by) / _score(worst, by)
    if p99 is not None:
        under = [r for r in ranked if r["step_p99_s"] is not None and r["step_p99_s"] <= p99]
        out["best_under_target"] = describe(under[0]) if under else None
    defaults = [r for r in usable + what_ifs if is_default(r)]
    if defaults:
        same = [r for r in defaults if r.get("scale") == top.get("scale") and r.get("workload") == top.get("workload")]
        d = (same or defaults)[0]
        out["default"] = describe(d)
        out["speedup_vs_default"] = _score(top, by) / _score(d, by)
    return out


__all__ = ["BY", "DEPLOYMENT_FIELDS", "MOSTLY", "best", "describe", "is_default"]
