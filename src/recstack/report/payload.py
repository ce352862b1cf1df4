"""Turn a Profile into the plain-data payload that the HTML report's script renders.

Contract: :func:`report_payload` is pure (no I/O) and returns JSON-safe data
(no NaN or infinity: they become ``None``). Optional sections (cost figures,
roofline ceilings, embedding tables, uncovered ops) are ``None`` when the
profile lacks them, and the page says so instead of drawing empty charts.
Figures are never computed in the page beyond ratios and unit scaling; the
provenance of every figure is stated here (``provenance_defaults``) unless a
node carries its own ``provenance`` extra, which wins.
"""

from __future__ import annotations

import math
from typing import Any

from recstack.tree import Node, Profile

MAX_SHAPES = 48
"""Shapes listed per op in the page (the count of distinct shapes is always exact)."""

# Where each figure comes from when a node does not say so itself (``provenance`` extra).
PROVENANCE_DEFAULTS: dict[str, dict[str, str]] = {
    "time_s": {
        "run": "measured",
        "stage": "measured",
        "module": "apportioned",
        "op": "apportioned",
        "kernel": "apportioned",
    },
    "self_time_s": {"*": "derived"},
    "calls": {"*": "measured"},
    "share": {"*": "derived"},
    "flops": {"*": "formula"},
    "bytes": {"*": "formula"},
    "bytes_read": {"*": "formula"},
    "bytes_written": {"*": "formula"},
    "intensity": {"*": "derived"},
    "achieved_flops_per_s": {"*": "derived"},
    "achieved_bytes_per_s": {"*": "derived"},
    "ceiling_flops_per_s": {"*": "derived"},
    "fraction_of_ceiling": {"*": "derived"},
    "time_s_p10": {"*": "measured"},
    "time_s_p90": {"*": "measured"},
}

PROVENANCE_KINDS: dict[str, str] = {
    "measured": "timed directly (timing pass, median over steps) or counted",
    "apportioned": "stage time split over modules/ops in proportion to the op pass (torch.profiler)",
    "formula": "computed by the cost model from op shapes and dtypes",
    "derived": "arithmetic on other figures (ratios, shares, differences)",
}

_COMPUTE_KEYS = ("peak_flops_per_s", "peak_flops", "compute_flops_per_s", "flops_per_s", "peak_compute_flops_per_s")
_BANDWIDTH_LISTS = ("bandwidths", "bandwidths_bytes_per_s", "memory_bandwidths", "bandwidth")
_VALUE_KEYS = ("bytes_per_s", "flops_per_s", "value", "peak", "median", "p50", "mean")


def clean(obj: Any) -> Any:
    """A JSON-safe copy: NaN/inf become None, tuples lists, unknown objects their ``str``."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    try:
        f = float(obj)  # numpy scalars
    except (TypeError, ValueError):
        return str(obj)
    return f if math.isfinite(f) else None


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) and f > 0 else None


def _label(key: str) -> str:
    for part in ("_bytes_per_s", "_bandwidth", "bandwidth_", "_bw"):
        key = key.replace(part, "")
    return key.replace("_", " ").strip() or "memory"


def _value(x: Any) -> float | None:
    """A positive number, or the first positive number under one of :data:`_VALUE_KEYS` of a dict."""
    if isinstance(x, dict):
        for k in _VALUE_KEYS:
            v = _num(x.get(k))
            if v:
                return v
        return None
    return _num(x)


def _named(v: Any, default: str, unit_key: str) -> list[dict[str, Any]]:
    """Named values from a number, a {name: number-or-record} dict or a [{name, value}] list."""
    out: list[dict[str, Any]] = []
    if isinstance(v, list):
        for i, x in enumerate(v):
            val = _value(x)
            if val:
                name = x.get("name", f"{default} {i}") if isinstance(x, dict) else f"{default} {i}"
                out.append({"name": str(name), unit_key: val})
    elif isinstance(v, dict) and _value(v) is None:
        out = [{"name": str(k), unit_key: _value(x)} for k, x in v.items() if _value(x)]
    elif _value(v):
        out = [{"name": default, unit_key: _value(v)}]
    return out


def machine_roofs(machine: Any) -> dict[str, Any] | None:
    """Ceilings for the roofline from ``profile.extra["machine"]``.

    Returns ``{"compute": [{"name", "flops_per_s"}], "memory": [{"name", "bytes_per_s"}]}``, each
    sorted high to low (a compute ``name`` may be empty: a single unnamed peak), or ``None`` when no
    compute peak or no bandwidth can be read. Accepted forms: a compute peak under one of
    ``peak_flops_per_s`` / ``peak_flops`` / ... (a number, a record such as ``{"median": x}``, or a
    dict of named values such as per-dtype peaks); bandwidths as a dict or list under
    ``bandwidths`` (numbers or ``{"name", "bytes_per_s"}`` records), or as top-level keys ending in
    ``_bytes_per_s`` or containing ``bandwidth``.
    """
    if not isinstance(machine, dict):
        return None
    compute: list[dict[str, Any]] = []
    for key in _COMPUTE_KEYS:
        compute = _named(machine.get(key), str(machine.get("dtype") or ""), "flops_per_s")
        if compute:
            break
    memory: list[dict[str, Any]] = []
    for key in _BANDWIDTH_LISTS:
        memory = _named(machine.get(key), "memory", "bytes_per_s")
        if memory:
            break
    if not memory:
        for k, x in machine.items():
            if k not in _COMPUTE_KEYS + _BANDWIDTH_LISTS and ("bandwidth" in k or k.endswith("bytes_per_s")):
                val = _value(x)
                if val:
                    memory.append({"name": _label(k), "bytes_per_s": val})
    if not compute or not memory:
        return None
    memory.sort(key=lambda m: -m["bytes_per_s"])
    compute.sort(key=lambda c: -c["flops_per_s"])
    return {"compute": compute, "memory": memory}


def node_payload(node: Node) -> dict[str, Any]:
    """One node and its subtree; op shape lists are cut to :data:`MAX_SHAPES` (``shapes_total`` keeps the count)."""
    d: dict[str, Any] = {
        "name": node.name,
        "path": node.path,
        "level": node.level,
        "stage": node.stage,
        "time_s": node.time_s,
        "self_time_s": node.self_time_s,
        "calls": node.calls,
        "flops": node.flops,
        "bytes": node.bytes,
        "intensity": node.intensity,
    }
    extra = dict(node.extra)
    shapes = extra.get("shapes")
    if isinstance(shapes, list):
        extra["shapes_total"] = len(shapes)
        extra["shapes"] = shapes[:MAX_SHAPES]
    d["extra"] = extra
    d["children"] = [node_payload(c) for c in node.children]
    return d


def has_cost(profile: Profile) -> bool:
    return any(n.flops is not None or n.bytes is not None for n in profile.nodes())


def report_payload(profile: Profile, *, title: str | None = None) -> dict[str, Any]:
    """Everything the report page shows, as JSON-safe data (see the module docstring)."""
    from recstack import __version__

    extra = profile.extra
    cost_model = extra.get("cost_model") if isinstance(extra.get("cost_model"), dict) else None
    tables = extra.get("embedding_tables")
    machine = extra.get("machine") if isinstance(extra.get("machine"), dict) else None
    others = {k: v for k, v in extra.items() if k not in ("cost_model", "embedding_tables", "machine")}
    payload = {
        "kind": "report",
        "title": title or str(profile.run.get("model") or profile.root.name),
        "recstack_version": __version__,
        "run_id": profile.run_id,
        "run": profile.run,
        "environment": profile.environment,
        "overhead": profile.overhead,
        "ranks": profile.ranks,
        "root": node_payload(profile.root),
        "has_cost": has_cost(profile),
        "has_bound": any("bound" in n.extra for n in profile.nodes()),
        "machine": machine,
        "roofs": machine_roofs(machine),
        "cost_model": cost_model,
        "embedding_tables": tables if isinstance(tables, list) and tables else None,
        "profile_extra": others,
        "provenance_defaults": PROVENANCE_DEFAULTS,
        "provenance_kinds": PROVENANCE_KINDS,
    }
    return clean(payload)
