"""Parsing ``perf stat -x,`` output: events, metrics and top-down level 1, and per-call figures.

Pure text processing (no perf is run here): :func:`parse_perf_stat_csv` reads
what ``perf stat -x,`` writes, :func:`topdown_level1` derives the level-1
top-down fractions, :func:`derived` turns a parsed session into per-call
counts, IPC and cache misses per 1000 instructions.

Top-down level 1 comes from Intel's ``topdown-*`` events (``slots`` as the
denominator) when they count, else from perf's metric groups ``TopdownL1``
(Intel) or ``PipelineL1`` (AMD Zen 4+), else it is ``None``.
"""

from __future__ import annotations

import re
from typing import Any

TOPDOWN_EVENTS = {
    "topdown-retiring": "retiring",
    "topdown-bad-spec": "bad_speculation",
    "topdown-fe-bound": "frontend_bound",
    "topdown-be-bound": "backend_bound",
}
TOPDOWN_GROUP = "{slots," + ",".join(TOPDOWN_EVENTS) + "}"
TOPDOWN_METRIC_GROUPS = ("TopdownL1", "PipelineL1")
TOPDOWN_METRIC_PATTERNS = {
    "retiring": re.compile(r"(^|[_\s])retiring$"),
    "bad_speculation": re.compile(r"(^|[_\s])bad[_\s]spec(ulation)?$"),
    "frontend_bound": re.compile(r"(^|[_\s])(frontend|fe)[_\s]bound$"),
    "backend_bound": re.compile(r"(^|[_\s])(backend|be)[_\s]bound$"),
}
_AGGR_ID = re.compile(r"^(CPU\d+|S\d+(-D\d+)?(-[CL]\d+)?|N\d+)$")
_PMU_EVENT = re.compile(r"^[A-Za-z0-9_.\-]+/([^/=,]+)/[A-Za-z]*$")
_MODIFIER = re.compile(r":[ukhpPGHSDIW]+$")


def normalize_event(raw: str) -> str:
    """``cycles:u`` / ``cpu_core/cycles/`` / ``cpu_core/cycles/u`` -> ``cycles``; other names unchanged."""
    name = raw.strip()
    m = _PMU_EVENT.match(name)
    if m:
        name = m.group(1)
    return _MODIFIER.sub("", name)


def _number(text: str) -> float | None:
    try:
        return float(text.strip().replace(" ", ""))
    except ValueError:
        return None


def parse_perf_stat_csv(text: str, sep: str = ",") -> dict[str, Any]:
    """Parse ``perf stat -x<sep>`` output (what perf writes to stderr or to ``-o FILE``).

    Returns ``{"events", "metrics", "topdown", "messages"}``:

    * ``events[name]`` (name normalised by :func:`normalize_event`; duplicate
      names from several PMUs or CPUs are summed): ``value`` (None unless
      counted), ``status`` (``counted``, ``not supported``, ``not counted``),
      ``unit``, ``raw_names``, ``running_pct`` (share of time the counter ran:
      below 100 means multiplexed and scaled), ``variance_pct`` (with ``-r``),
      ``metric`` (perf's derived figure on that line, e.g. insn per cycle).
    * ``metrics[name]``: percentage metrics (``%  tma_retiring`` -> ``tma_retiring``)
      and metric-only lines, as printed (percent stays percent).
    * ``topdown``: level-1 fractions (0..1) with ``source``, or None.
    * ``messages``: lines that are not counter lines (errors, warnings).

    Aggregation prefixes (``CPU3,`` from ``-A``; ``S0,<n>,`` from ``--per-socket``,
    ``S0-D0-C1,<n>,`` from ``--per-core``) are recognised and summed over.
    """
    events: dict[str, dict[str, Any]] = {}
    metrics: dict[str, float] = {}
    messages: list[str] = []
    for raw_line in text.splitlines():
        line = raw_line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(sep)
        if fields and _AGGR_ID.match(fields[0].strip()):
            agg = fields.pop(0).strip()
            if not agg.startswith("CPU") and len(fields) > 1 and fields[0].strip().isdigit():
                fields.pop(0)  # number of CPUs aggregated
        if len(fields) < 3:
            messages.append(line)
            continue
        value_s, unit, event = fields[0].strip(), fields[1].strip(), fields[2].strip()
        rest = fields[3:]
        variance = None
        if rest and rest[0].strip().endswith("%"):
            variance = _number(rest[0].strip().rstrip("%"))
            rest = rest[1:]
        running = _number(rest[1]) if len(rest) > 1 else None
        metric_val = _number(rest[2]) if len(rest) > 2 else None
        metric_unit = rest[3].strip() if len(rest) > 3 else ""
        if not event:
            # metric-only line: the metric sits in the last two non-empty fields
            tail = [f.strip() for f in fields if f.strip()]
            if len(tail) >= 2 and _number(tail[-2]) is not None:
                _add_metric(metrics, tail[-1], float(_number(tail[-2]) or 0.0), force=True)
            elif tail:
                messages.append(line)
            continue
        if value_s.startswith("<") and value_s.endswith(">"):
            status, value = value_s.strip("<>").strip(), None
        else:
            value = _number(value_s)
            if value is None:
                messages.append(line)
                continue
            status = "counted"
        name = normalize_event(event)
        ev = events.setdefault(
            name,
            {
                "value": None,
                "status": status,
                "unit": unit,
                "raw_names": [],
                "running_pct": running,
                "variance_pct": variance,
                "metric": None,
            },
        )
        if event not in ev["raw_names"]:
            ev["raw_names"].append(event)
        if value is not None:
            ev["value"] = (ev["value"] or 0.0) + value
            ev["status"] = "counted"
            if running is not None:
                ev["running_pct"] = running if ev["running_pct"] is None else min(ev["running_pct"], running)
        if metric_val is not None and metric_unit:
            ev["metric"] = {"value": metric_val, "unit": metric_unit}
            _add_metric(metrics, metric_unit, metric_val, force=False)
    return {
        "events": events,
        "metrics": metrics,
        "topdown": topdown_level1(events, metrics),
        "messages": messages,
    }


def _add_metric(metrics: dict[str, float], unit: str, value: float, *, force: bool) -> None:
    """Keep percentage metrics (``%  name``) always, other units only from metric-only lines."""
    u = unit.strip()
    if u.startswith("%"):
        metrics[u.lstrip("%").strip()] = value
    elif force:
        metrics[u] = value


def topdown_level1(events: dict[str, dict[str, Any]], metrics: dict[str, float]) -> dict[str, Any] | None:
    """Level-1 top-down fractions from ``topdown-*`` events (over ``slots``) or from perf's metrics."""
    counted = {
        k: events[k]["value"] for k in TOPDOWN_EVENTS if k in events and events[k]["value"] is not None
    }
    if len(counted) == len(TOPDOWN_EVENTS):
        slots = events.get("slots", {}).get("value")
        total = slots if slots else sum(counted.values())
        if total and total > 0:
            out: dict[str, Any] = {TOPDOWN_EVENTS[k]: v / total for k, v in counted.items()}
            out["source"] = "events (topdown-* / slots)" if slots else "events (topdown-*, normalised)"
            return out
    found: dict[str, Any] = {}
    for key, pat in TOPDOWN_METRIC_PATTERNS.items():
        for mname, val in metrics.items():
            if pat.search(mname.lower().strip()):
                found[key] = val / 100.0
                break
    if len(found) == len(TOPDOWN_METRIC_PATTERNS):
        found["source"] = "metrics"
        return found
    return None


def derived(parsed: dict[str, Any], calls: int) -> dict[str, Any]:
    """Per-call counts, IPC, cache misses per 1000 instructions and top-down from a parsed session."""
    ev = parsed.get("events", {})

    def val(name: str) -> float | None:
        e = ev.get(name)
        return e["value"] if e and e["status"] == "counted" else None

    cycles, instr, misses = val("cycles"), val("instructions"), val("cache-misses")
    return {
        "calls": calls,
        "cycles": cycles,
        "instructions": instr,
        "cache_misses": misses,
        "cycles_per_call": cycles / calls if cycles is not None and calls else None,
        "instructions_per_call": instr / calls if instr is not None and calls else None,
        "ipc": instr / cycles if instr is not None and cycles else None,
        "cache_misses_per_kinstr": 1000.0 * misses / instr if misses is not None and instr else None,
        "topdown": parsed.get("topdown"),
        "multiplexed": any(
            e.get("running_pct") is not None and e["running_pct"] < 99.99
            for e in ev.values()
            if e["status"] == "counted"
        ),
        "events": ev,
    }
