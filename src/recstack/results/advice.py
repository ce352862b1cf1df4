"""The ``advice`` table beside the sweep points: ``recstack advise``'s measured what-ifs as candidates for
``recstack best`` and as the sweep report's advice section (an analysis: it computes, draws nothing).

An advice row holds an absolute figure, ``what_if_s``: the what-if's median seconds per sample over the
uninstrumented steps of its rounds (the timing pass the sweep's points use too; per sample whatever the
goal), so its throughput is ``1 / what_if_s`` and its step time ``what_if_s * batch_size`` of its
``what_if_config``. Its ``step_speedup`` is relative to that advise run's own baseline and is never
compared with a sweep point. A what-if is ranked beside a model's sweep points only when the figures are
comparable (:func:`comparable`); every other row is left out with its reason.
"""

from __future__ import annotations

import json
from typing import Any

from recstack.results.cells import num as _num
from recstack.results.cells import plain as _plain


def _json(v: Any) -> Any:
    """A JSON column's value (text in the store) as Python; text that is no JSON object reads as {}."""
    if isinstance(v, dict):
        return v
    try:
        got = json.loads(v) if isinstance(v, str) else None
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def advice_rows(advice: Any, model: str | None = None) -> list[dict[str, Any]]:
    """The advice table's rows (of ``model``) as plain dicts, JSON columns parsed; ``advice`` is
    :func:`recstack.results.load`'s DataFrame of the ``advice`` table, or None."""
    if advice is None or not len(advice):
        return []
    rows = [{k: _plain(v) for k, v in r.items()} for r in advice.to_dict("records")]
    for r in rows:
        for k in ("what_if_config", "change", "options"):
            r[k] = _json(r.get(k))
    return [r for r in rows if model is None or r.get("model") == model]


def figure(r: dict[str, Any]) -> dict[str, Any] | None:
    """The what-if as a configuration ``best`` can rank (its fields, ``throughput``, ``step_p50_s``, where
    it came from), or None when it holds no absolute figure."""
    per_sample, cfg = _num(r.get("what_if_s")), r["what_if_config"]
    batch = _num(cfg.get("batch_size"))
    if not per_sample or per_sample <= 0 or not batch:
        return None
    lo, hi, sp = _num(r.get("step_ci_low")), _num(r.get("step_ci_high")), _num(r.get("step_speedup"))
    told = f"{sp:.2f}x" if sp else "?"
    if lo is not None and hi is not None:
        told += f" [{lo:.2f}-{hi:.2f}]"
    return {**cfg, "throughput": 1.0 / per_sample,
            "step_p50_s": per_sample * batch, "step_p99_s": None, "config_hash": None,
            "contended": bool(r.get("contended")), "status": "ok", "host": r.get("host"),
            "source": "advise", "advice_id": r.get("advice_id"), "lever": r.get("name"),
            "from": f"advise run {r.get('advice_id')}: what-if {r.get('name')} ({told} over that run's "
                    "baseline, measured in its alternating rounds)",
            "what_if_config": cfg}


def comparable(r: dict[str, Any], points: list[dict[str, Any]], include_contended: bool) -> str | None:
    """Why the advice row ``r`` cannot be ranked beside ``points`` (the model's usable sweep points), or None.

    Comparable means: measured (an absolute time per sample), within its output tolerance, reproduced by its
    RunConfig alone (no factory option), not contended (unless asked), measured on a host the sweep points
    ran on, and at a scale, workload and mode that some sweep point has."""
    if r.get("verdict") == "unmeasured" or figure(r) is None:
        return "no measured time"
    if r.get("within_tolerance") is False:
        return "output beyond its tolerance"
    if r.get("options"):
        return "a factory option its RunConfig does not hold"
    if bool(r.get("contended")) and not include_contended:
        return "contended"
    if not points:
        return "no quiet sweep point to compare with"
    if r.get("host") not in {p.get("host") for p in points}:
        return f"another host ({r.get('host')})"
    cfg = r["what_if_config"]
    same = {(_num(p.get("scale")), p.get("workload"), p.get("mode")) for p in points}
    if (_num(cfg.get("scale")), cfg.get("workload"), cfg.get("mode")) not in same:
        return f"scale {cfg.get('scale')}, workload {cfg.get('workload')}, mode {cfg.get('mode')}: not in the sweep"
    return None


def candidates(rows: list[dict[str, Any]], points: list[dict[str, Any]],
               include_contended: bool) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The comparable what-ifs as rankable configurations, and the others' reasons -> counts."""
    ranked, left = [], {}
    for r in rows:
        why = comparable(r, points, include_contended)
        if why is None:
            ranked.append(figure(r))
        else:
            left[why] = left.get(why, 0) + 1
    return [c for c in ranked if c is not None], left


def advice_section(advice: Any) -> list[dict[str, Any]]:
    """The report's advice section: one row per what-if, per model and advise run, by rank; the figures as
    stored (the speedup and its interval are over that run's baseline)."""
    keep = ("advice_id", "created_at", "host", "model", "mode", "goal", "rank", "name", "lever_kind", "stage",
            "exact_change", "recommended", "winner", "verdict", "step_speedup", "step_ci_low", "step_ci_high",
            "base_s", "what_if_s", "contended", "reason")
    rows = [{k: (str(r.get(k)) if k == "created_at" and r.get(k) is not None else r.get(k)) for k in keep}
            | {"change": r["change"]} for r in advice_rows(advice)]
    return sorted(rows, key=lambda r: (str(r["model"]), str(r["created_at"]), str(r["advice_id"]), r["rank"] or 0))


__all__ = ["advice_rows", "advice_section", "candidates", "comparable", "figure"]
