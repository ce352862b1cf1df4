"""``recstack.memory``'s document: a zoo model's predicted memory against a limit, and what fits.

The predicted peak per stage and in all, the top consumers, and the largest batch size and table
scale whose predicted peak fits the limit. Nothing is allocated.
"""

from __future__ import annotations

import re
import time
from typing import Any

from recstack.errors import ConfigError

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str) -> int:
    """``24GiB``, ``1.5 TB``, ``512MiB``, ``1000000`` -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text or "")
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"must be a size such as 24GiB, 512MiB or a number of bytes (got {text!r})", field="--limit")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not 0 < value < 2**63:
        raise ConfigError(f"must be a positive size below 8 EiB (got {text!r})", field="--limit")
    return int(value)


def analyse(cfg: Any, limit: int, *, cache_hit: float | None = None, cache_batches: int = 4,
            measure: bool = False) -> dict[str, Any]:
    """The ``recstack.memory`` document of run options ``cfg`` against ``limit`` bytes (``cache_hit``: also
    size each table's cache for that hit rate over ``cache_batches`` batches of the workload; ``measure``: also
    build the model and measure each stage in the memory pass, after the timed prediction)."""
    import torch  # noqa: F401  (imported before the clock starts: the analysis is timed, not torch's import)

    from recstack.memory.search import largest_batch
    from recstack.schema.memory_model import MemoryDocument
    from recstack.workload.presets import load_workload
    from recstack.zoo.build import resolve_config
    from recstack.zoo.footprint.predict import per_rank, predict, shape_of

    start = time.perf_counter()
    if cfg.model and ":" in cfg.model and not cfg.model.lower().endswith((".yaml", ".yml")):
        raise ConfigError("memory predicts zoo models (an id or a model YAML), not package.module:factory",
                          field="MODEL")
    model_cfg = resolve_config(cfg.model, cfg.scale, cfg.tasks)
    shape = shape_of(model_cfg, load_workload(cfg.workload))
    opts = {"backend": cfg.backend, "mode": cfg.mode, "optimizer": cfg.optimizer, "table_dtype": cfg.table_dtype,
            "device": "cuda" if cfg.device == "cuda" else "cpu"}
    pred = predict(shape, batch_size=cfg.batch_size, **opts)
    notes = []
    ranks = []
    if cfg.nproc > 1:
        plan = None
        sharding = cfg.sharding or "table_wise"
        if sharding not in ("table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel", "auto"):
            from recstack.distributed.sharding import load_plan_file

            plan, sharding = load_plan_file(sharding).tables, "table_wise"
        if sharding == "auto":
            notes.append("--sharding auto: tables placed table-wise, largest first (TorchRec's planner is not run)")
        preds = per_rank(shape, world_size=cfg.nproc, sharding=sharding, plan=plan, batch_size=cfg.batch_size, **opts)
        ranks = [{"rank": p.rank, "peak_bytes": p.peak, "peak_stage": p.peak_stage,
                  "tables_bytes": p.resident["tables"],
                  "all_to_all_bytes": sum(c.bytes for c in p.consumers if c.what == "all_to_all")} for p in preds]
        pred = max(preds, key=lambda p: p.peak)
        notes.append(f"figures are rank {pred.rank}'s, the largest of {cfg.nproc}")
    if cfg.dtype != "fp32":
        notes.append("dense layers are counted in fp32 (the bf16 run holds its dense values in half the bytes)")
    doc = MemoryDocument.model_validate({
        "schema": "recstack.memory", "model": model_cfg.name, "backend": cfg.backend, "mode": cfg.mode,
        "optimizer": cfg.optimizer, "table_dtype": cfg.table_dtype, "batch_size": cfg.batch_size,
        "scale": model_cfg.scale, "device": opts["device"], "limit_bytes": limit, "resident": pred.resident,
        "inputs_bytes": pred.inputs,
        "stages": [{"stage": s, "peak_bytes": pred.stage_peaks[s], "dynamic_bytes": pred.stage_dynamic[s]}
                   for s in pred.stage_peaks],
        "peak_bytes": pred.peak, "peak_stage": pred.peak_stage, "fits": pred.peak <= limit,
        "top_consumers": [c.__dict__ for c in pred.top_consumers(8)],
        "largest_batch_size": largest_batch(shape, limit, **opts) if cfg.nproc <= 1 else 0,
        "largest_scale": _largest_scale(shape, limit, cfg, model_cfg, opts) if cfg.nproc <= 1 else None,
        "ranks": ranks, "elapsed_s": 0.0, "notes": notes,
    })
    if cfg.nproc > 1:
        doc.notes.append("the largest batch and scale are searched with --nproc 1 only")
    doc.elapsed_s = round(time.perf_counter() - start, 4)  # the prediction and its searches
    if measure:
        _add_measured(doc, cfg)
    if cache_hit is not None:
        doc.cache = _cache(cfg, model_cfg, cache_hit, cache_batches, opts)
    return doc.model_dump(by_alias=True)


def _add_measured(doc: Any, cfg: Any) -> None:
    """Each stage's measured dynamic peak beside the prediction (the memory pass of ``recstack profile --memory``)."""
    from recstack.memory.measure import measured_stages

    if cfg.nproc > 1:
        raise ConfigError("--measure runs one process; drop --nproc or measure the ranks with recstack profile",
                          field="--measure")
    measured = measured_stages(cfg)
    for st in doc.stages:
        fig = measured["stages"].get(st.stage)
        st.measured_dynamic_bytes = None if fig is None else int(fig["peak_bytes"])
    doc.provenance = "predicted and measured"
    doc.notes.append(f"measured: one step of the model built for real, {measured['device']} allocator "
                     "(torch.profiler memory events), peak above the step's start per stage")


def _cache(cfg: Any, model_cfg: Any, target: float, batches: int, opts: dict[str, Any]) -> dict[str, Any]:
    """Per-table cache sizes for ``target`` over ``batches`` batches of the run's workload (simulated)."""
    from recstack.memory.cache import ASSOC, table_cache_sizes, table_streams
    from recstack.zoo.footprint.predict import row_bytes

    if not 0 < target < 1:
        raise ConfigError(f"must be a hit rate between 0 and 1, exclusive (got {target:g})", field="--cache-hit")
    streams = table_streams(model_cfg, cfg.workload, batch_size=cfg.batch_size, batches=batches, seed=cfg.seed)
    sizes = {t.name: row_bytes(t.dim, cfg.table_dtype, backend=cfg.backend, mode=cfg.mode, device=opts["device"])
             for t in model_cfg.resolved_tables()}
    return {"target_hit_rate": target, "ways": ASSOC, "batches": batches, "batch_size": cfg.batch_size,
            "tables": table_cache_sizes(streams, target, row_bytes=sizes)}


def _largest_scale(shape: Any, limit: int, cfg: Any, model_cfg: Any, opts: dict[str, Any]) -> float | None:
    """The largest ``--scale`` that fits, at most the flag's own limit (and the rows' limit)."""
    from recstack.config.run import SCALE_MAX
    from recstack.memory.search import largest_scale

    cap = min(SCALE_MAX / cfg.scale, model_cfg.largest_scale() / model_cfg.scale)
    return largest_scale(shape, limit, cfg.batch_size, max_factor=cap, base=cfg.scale, **opts)


__all__ = ["analyse", "parse_size"]
