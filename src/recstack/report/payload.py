"""Turn a Profile into the plain-data payload that the HTML report's script renders.

Contract: :func:`report_payload` is pure (no I/O) and returns JSON-safe data
(no NaN or infinity: they become ``None``). It passes on what the producers
wrote, in their own format:

* node figures: ``flops``, ``bytes``, ``intensity`` and the cost model's extras
  (``bytes_read``, ``bytes_written``, ``cost_detail``, ``provenance``,
  ``uncovered``, ``partial``; :mod:`recstack.costmodel.attach`);
* the roofline classifier's ``bound``, ``bound_basis``,
  ``bound_reason`` and ``roofline`` per node, and the roofs in
  ``profile.machine`` (:func:`recstack.analysis.roofline.classify`);
* ``profile.cost_model`` (the :func:`~recstack.costmodel.attach_costs`
  summary), ``embedding_tables`` (:func:`recstack.zoo.embedding.table_stats`,
  with backward and optimizer bytes in train mode), ``memory``
  (:mod:`recstack.profiling.memory`) and ``counters``
  (:func:`recstack.profiling.counters_replay.attach_counters`);
* ``profile.findings`` (what the analyses concluded, in words:
  ``{kind, stage, text, value}``), ``environment["contention"]`` (the
  contention watch's verdict and evidence), each node's display ``label`` and
  synthetic ``kind`` (``unattributed``, ``framework``), the roofline's
  ``roof_suspect``/``roof_suspect_reason``/``roof_dtype``, stage
  ``rusage``, ``run["config"]``;
* the schema version the profile is written in, the version its figures were
  measured under (``stats_version``, older when it was upgraded on load) and
  the notes loading wrote (``load_notes``).

A section is ``None`` when the profile lacks it, and the page says so instead
of drawing an empty chart. The page computes nothing beyond ratios, sums of
the figures it shows and unit scaling. The provenance of a figure is the
node's own ``provenance`` extra (the cost model writes one on every node)
or else :data:`PROVENANCE_DEFAULTS`.
"""

from __future__ import annotations

import math
from typing import Any

from recstack.tree import Node, Profile

MAX_SHAPES = 48
"""Shapes listed per op in the page (the count of distinct shapes is always exact)."""

SECTIONS = ("cost_model", "embedding_tables", "machine", "memory", "counters", "findings", "distributed")
"""Top-level ``profile.extra`` keys with a section of their own; the rest is listed as other data."""

# Where each figure comes from when a node does not say so itself (``provenance`` extra). Kinds and
# the time split follow the cost model's provenance (docs/cost-model.md): run and stage times are
# measured, module and op times derived (apportioned from their stage).
PROVENANCE_DEFAULTS: dict[str, dict[str, str]] = {
    "time_s": {"run": "measured", "stage": "measured", "*": "derived"},
    "self_time_s": {"*": "derived"},
    "calls": {"*": "measured"},
    "flops": {"*": "formula"},
    "bytes": {"*": "formula"},
    "intensity": {"*": "derived"},
    "roofline": {"*": "derived"},
}

PROVENANCE_KINDS: dict[str, str] = {
    "measured": "timed directly (timing pass, interquartile mean over steps) or counted",
    "formula": "computed by the cost model from op shapes and dtypes",
    "derived": "arithmetic on other figures: ratios and shares, roofline fractions, and module and op "
    "times (a stage's measured time split in op-pass proportions)",
}


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
        "label": node_label(node),
    }
    extra = dict(node.extra)
    shapes = extra.get("shapes")
    if isinstance(shapes, list):
        extra["shapes_total"] = len(shapes)
        extra["shapes"] = shapes[:MAX_SHAPES]
    d["extra"] = extra
    d["children"] = [node_payload(c) for c in node.children]
    return d


def node_label(node: Node) -> str | None:
    """The producer's display label of ``node`` (disambiguated among siblings), or None when it wrote none."""
    label = node.label
    return label if isinstance(label, str) and label else None


def contention(profile: Profile) -> dict[str, Any] | None:
    """The contention watch's record (``environment["contention"]``), or None when the profile has none."""
    c = (profile.environment or {}).get("contention")
    return c if isinstance(c, dict) else None


def schema_info(profile: Profile) -> dict[str, Any]:
    """``schema_version`` (what this recstack writes), ``stats_version`` (what the figures were measured
    under; older when the profile was upgraded on load) and ``load_notes`` (what loading said)."""
    from recstack.tree import SCHEMA_VERSION

    stats = getattr(profile, "stats_version", None)
    notes = getattr(profile, "notes", None)
    return {
        "schema_version": SCHEMA_VERSION,
        "stats_version": stats if isinstance(stats, int) else None,
        "load_notes": [str(n) for n in notes] if isinstance(notes, list) else [],
    }


def has_cost(profile: Profile) -> bool:
    """Whether any node has cost-model figures."""
    return any(n.flops is not None or n.bytes is not None for n in profile.nodes())


def _section(extra: dict[str, Any], key: str, kind: type) -> Any:
    v = extra.get(key)
    return v if isinstance(v, kind) and v else None


def report_payload(profile: Profile, *, title: str | None = None) -> dict[str, Any]:
    """Everything the report page shows, as JSON-safe data (see the module docstring)."""
    from recstack.version import __version__

    extra = profile.extra
    payload = {
        "kind": "report",
        "title": title or str(profile.run.get("model") or profile.root.name),
        "recstack_version": __version__,
        "run_id": profile.run_id,
        "run": profile.run,
        "environment": profile.environment,
        "overhead": profile.overhead,
        "ranks": [{k: v for k, v in r.items() if k != "root"} for r in profile.ranks],
        "rank_roots": [node_payload(Node.from_dict(r["root"])) if isinstance(r.get("root"), dict) else None
                       for r in profile.ranks],
        "distributed": _section(extra, "distributed", dict),
        "root": node_payload(profile.root),
        "has_cost": has_cost(profile),
        "machine": _section(extra, "machine", dict),
        "cost_model": _section(extra, "cost_model", dict),
        "embedding_tables": _section(extra, "embedding_tables", list),
        "memory": _section(extra, "memory", dict),
        "counters": _section(extra, "counters", dict),
        "findings": _section(extra, "findings", list),
        "contention": contention(profile),
        **schema_info(profile),
        "profile_extra": {k: v for k, v in extra.items() if k not in SECTIONS},
        "provenance_defaults": PROVENANCE_DEFAULTS,
        "provenance_kinds": PROVENANCE_KINDS,
    }
    return clean(payload)
