"""Points for ``correlate``: architecture features and bottleneck metrics per (model, batch size, run).

Features come from each model's config (the profile's ``run.model_config``, or the zoo config of a store
point's model): the same analytic figures ``recstack zoo list`` prints, plus sequence length, attention and
recurrent presence and the interaction type. Metrics come from the measurement: stage shares, whether each
stage is memory-bound, each stage's fraction of its roofline ceiling, throughput, step latency and, where
a profile has them, per-stage hardware counters.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recstack.errors import ConfigError, DataError
from recstack.zoo import archs

NUMERIC_FEATURES = (
    "tables",
    "lookups_per_sample",
    "pooling",
    "embedding_dim",
    "table_bytes",
    "mlp_flops_per_sample",
    "sequence_length",
    "attention",
    "recurrent",
    "params",
    "batch_size",
)
COUNTER_KEYS = ("ipc", "llc_miss_rate", "cache_miss_rate", "branch_miss_rate", "backend_bound", "frontend_bound")


@dataclass
class Point:
    """One measured configuration: its identity, architecture features and bottleneck metrics."""

    model: str
    batch_size: int
    backend: str
    mode: str
    source: str
    features: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    interaction: str = ""


def interaction_type(cfg: Any) -> str:
    """The model's interaction between embeddings (a category: concat, dot, dcn, fm, gmf, dot-product scoring)."""
    return archs.get(cfg.arch).interaction_of(cfg)


def architecture_features(cfg: Any, batch_size: int) -> dict[str, float]:
    """Analytic features of a model config (no tables allocated; see NUMERIC_FEATURES)."""
    return {**_config_features(cfg.model_dump_json()), "batch_size": float(batch_size)}


@functools.lru_cache(maxsize=256)
def _config_features(cfg_json: str) -> dict[str, float]:
    """The batch-independent features of one config (cached: a sweep has many points per model)."""
    from recstack.zoo.build import summary
    from recstack.zoo.config import ModelConfig

    cfg = ModelConfig.model_validate_json(cfg_json)
    s = summary(cfg)
    tables = cfg.resolved_tables()
    arch = archs.get(cfg.arch)
    return {
        "tables": float(s["tables"]),
        "lookups_per_sample": float(s["lookups_per_sample"]),
        "pooling": float(s["lookups_per_sample"]) / max(1, s["tables"]),
        "embedding_dim": sum(t.dim for t in tables) / len(tables),
        "table_bytes": float(s["table_bytes"]),
        "mlp_flops_per_sample": float(s["dense_flops_per_sample"]),
        "sequence_length": arch.sequence_length_of(cfg, tables),
        "attention": float(arch.attention),
        "recurrent": float(arch.recurrent),
        "params": float(s["params"]),
    }


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def stage_metrics(stage: str, share: float | None, bound: str | None, fraction: float | None) -> dict[str, float]:
    """The metrics of one stage: its share of the step, memory-bound (1/0; none when unclassified), roof fraction."""
    out: dict[str, float] = {}
    if share is not None:
        out[f"share:{stage}"] = share
    if bound in ("memory", "compute"):
        out[f"memory_bound:{stage}"] = 1.0 if bound == "memory" else 0.0
    if fraction is not None:
        out[f"roof_fraction:{stage}"] = fraction
    return out


def _profile_point(d: dict[str, Any], source: str) -> Point:
    from recstack.zoo.config import ModelConfig

    run = d.get("run") or {}
    cfg_dict = run.get("model_config")
    if not isinstance(cfg_dict, dict):
        raise DataError(
            f"{source}: run.model_config: missing; correlate needs zoo-model profiles "
            "(recstack profile MODEL), whose config gives the architecture features"
        )
    try:
        cfg = ModelConfig.model_validate(cfg_dict)
    except Exception as exc:  # pydantic's ValidationError: one line naming the file
        raise DataError(f"{source}: run.model_config: not a valid model config ({str(exc).splitlines()[0]})") from None
    batch = int(run.get("batch_size") or 0)
    root = d["root"]
    total = _num(root.get("time_s")) or 0.0
    metrics: dict[str, float] = {}
    for st in root.get("children", []):
        t = _num(st.get("time_s")) or 0.0
        frac = _num((st.get("roofline") or {}).get("ceiling_fraction"))
        metrics.update(stage_metrics(st["name"], t / total if total > 0 else None, st.get("bound"), frac))
    tput = _num(root.get("throughput_samples_per_s"))
    if tput:
        metrics["log10_throughput"] = math.log10(tput)
    lat = root.get("latency_s") or {}
    for q in ("p50", "p99"):
        v = _num(lat.get(q))
        if v:
            metrics[f"log10_step_{q}_s"] = math.log10(v)
    counters = (d.get("counters") or {}).get("stages") or {}
    for stage, figs in counters.items():
        for key in COUNTER_KEYS:
            v = _num((figs or {}).get(key))
            if v is not None:
                metrics[f"{key}:{stage}"] = v
    return Point(
        model=str(run.get("model") or cfg.name),
        batch_size=batch,
        backend=str(run.get("backend") or ""),
        mode=str(run.get("mode") or ""),
        source=source,
        features=architecture_features(cfg, batch),
        metrics=metrics,
        interaction=interaction_type(cfg),
    )


def _profile_files(paths: Iterable[str]) -> list[tuple[Path, bool]]:
    """(file, named explicitly) for each input; a folder gives every ``*.json`` under it."""
    files: list[tuple[Path, bool]] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend((f, False) for f in sorted(p.rglob("*.json")))
        elif p.is_file():
            files.append((p, True))
        else:
            raise ConfigError(f"no such file or folder: {p}", field="INPUT")
    return files


def load_profiles(paths: Iterable[str]) -> list[Point]:
    """Points from profile JSON files; in a folder, JSON files that are not profiles (traces) are skipped."""
    from recstack.schema.validate import check_profile, read_profile_json

    points = []
    for f, explicit in _profile_files(paths):
        try:
            d, _notes = check_profile(read_profile_json(f), str(f))
        except DataError:
            if explicit:
                raise
            continue
        points.append(_profile_point(d, str(f)))
    return points


def is_store(path: str) -> bool:
    """True for a DuckDB database file (its header magic), the results store."""
    p = Path(path)
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        head = f.read(12)
    return head[8:12] == b"DUCK"


def _pick(cols: list[str], *names: str) -> str | None:
    low = {c.lower(): c for c in cols}
    return next((low[n] for n in names if n in low), None)


def load_store(path: str) -> list[Point]:
    """Points from a results store (DuckDB): table ``points`` and table ``stages``, extra columns ignored.

    ``points``: config_hash, status, model, batch_size, backend, throughput, step_p50_s, step_p99_s (and
    ``mode``, ``scale`` where present); ``stages``: point (a points key), stage, share, bound, and the
    fraction of the roof. Only points whose status is ``ok`` (or that have no status) count.
    """
    from recstack.store.check import tables as store_tables
    from recstack.store.db import check_version, connect
    from recstack.zoo.build import resolve_config

    with connect(path, read_only=True) as con:  # a page that cannot be read is a DataError naming the file
        tables = set(store_tables(con))
        if "meta" in tables:  # a recstack store: checked as every reader checks it
            check_version(con, path)
        for need in ("points", "stages"):
            if need not in tables:
                raise DataError(f"STORE: {path}: no table {need!r} (found: {', '.join(sorted(tables)) or 'none'})")
        pts = con.execute("select * from points").fetchdf()
        sts = con.execute("select * from stages").fetchdf()
    pc, sc = list(pts.columns), list(sts.columns)
    for need in ("model", "batch_size"):
        if _pick(pc, need) is None:
            raise DataError(f"STORE: {path}: points.{need}: column missing")
    key = _pick(pc, "point", "id", "point_id", "config_hash")
    status = _pick(pc, "status")
    s_point, s_stage, s_share = _pick(sc, "point", "point_id", "config_hash"), _pick(sc, "stage"), _pick(sc, "share")
    s_bound = _pick(sc, "bound")
    s_frac = _pick(sc, "fraction_of_roof", "roof_fraction", "ceiling_fraction", "fraction")
    if key is None or s_point is None or s_stage is None or s_share is None:
        raise DataError(f"STORE: {path}: stages: need columns point, stage and share (and points a key)")
    by_point: dict[Any, dict[str, float]] = {}
    for row in sts.to_dict("records"):
        m = stage_metrics(
            str(row[s_stage]),
            _num(row[s_share]),
            row[s_bound] if s_bound and isinstance(row[s_bound], str) else None,
            _num(row[s_frac]) if s_frac else None,
        )
        by_point.setdefault(row[s_point], {}).update(m)
    configs: dict[tuple[str, float], Any] = {}
    points = []
    for row in pts.to_dict("records"):
        if status and str(row[status]).lower() not in ("ok", "done", "success", "none", "nan"):
            continue
        model = str(row[_pick(pc, "model")])
        scale = _num(row[_pick(pc, "scale")]) if _pick(pc, "scale") else None
        k = (model, scale or 1.0)
        if k not in configs:
            try:
                configs[k] = resolve_config(model, scale or 1.0)
            except ConfigError as exc:
                raise DataError(f"STORE: {path}: points.model: {exc.detail}") from None
        cfg = configs[k]
        batch = _batch(row[_pick(pc, "batch_size")], path, row[key])
        metrics = dict(by_point.get(row[key], {}))
        for col, name in (("throughput", "log10_throughput"), ("step_p50_s", "log10_step_p50_s"),
                          ("step_p99_s", "log10_step_p99_s")):
            c = _pick(pc, col)
            v = _num(row[c]) if c else None
            if v and v > 0:
                metrics[name] = math.log10(v)
        mode_col, be_col = _pick(pc, "mode"), _pick(pc, "backend")
        points.append(Point(
            model=model, batch_size=batch, backend=str(row[be_col]) if be_col else "",
            mode=str(row[mode_col]) if mode_col else "", source=f"{path}:{row[key]}",
            features=architecture_features(cfg, batch), metrics=metrics, interaction=interaction_type(cfg),
        ))
    return points


def _batch(value: Any, path: str, point: Any) -> int:
    """A point's batch size: a whole number >= 1, else a DataError naming the store and the point."""
    import numbers

    v = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else None
    if v is None or not math.isfinite(v) or not (v >= 1 and float(v).is_integer()):
        raise DataError(f"STORE: {path}: points.batch_size of point {point}: {value!r} is not a whole number >= 1")
    return int(v)


def by_mode(points: list[Point]) -> list[Point]:
    """Make metrics comparable across models: a stage a model does not have takes 0% of its step, and when
    the points mix inference and training, every metric is named per mode (``train:share:backward``), so
    that a training step's shares are never ranked against an inference step's."""
    modes = sorted({p.mode for p in points})
    shares: dict[str, set[str]] = {}
    for p in points:
        shares.setdefault(p.mode, set()).update(k for k in p.metrics if k.startswith("share:"))
    for p in points:
        for k in shares[p.mode]:
            p.metrics.setdefault(k, 0.0)
        if len(modes) > 1:
            p.metrics = {f"{p.mode}:{k}": v for k, v in p.metrics.items()}
    return points


def load_points(inputs: list[str]) -> list[Point]:
    """A store (one DuckDB file) or profiles (files and folders), metrics made comparable (:func:`by_mode`)."""
    if len(inputs) == 1 and is_store(inputs[0]):
        return by_mode(load_store(inputs[0]))
    if any(is_store(i) for i in inputs):
        raise ConfigError("give one store, or profile files and folders, not both", field="INPUT")
    return by_mode(load_profiles(inputs))
