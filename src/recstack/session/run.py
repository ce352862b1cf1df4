"""The run: a zoo model built (or the caller's module), its batches made, the profiling passes run.

:func:`profile_config` is what ``recstack profile`` runs for any model source;
:func:`profile_zoo` / :func:`profile_module` the two kinds of model;
:func:`build_zoo` and :func:`profile_built_zoo` apart for a sweep that
profiles one built model at several batch sizes. Each takes the config's
resolved :class:`~recstack.session.parts.Parts` (resolved here when not given).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from recstack.calls import infer_batch_size, tensors, to_device
from recstack.config.run import RunConfig
from recstack.errors import ConfigError
from recstack.profiling.runner import ProfileOptions, profile_model
from recstack.render import progress
from recstack.session.parts import Parts, resolve
from recstack.tree import Profile
from recstack.usercode import as_user_error, call_factory, load_factory, make_batches

QUERY_BATCHES = 16  # batches pre-generated for workload_batches query (sizes vary, so more than fixed)


def profile_config(config: RunConfig, *, trace: str | Path | None = None,
                   run_info: dict[str, Any] | None = None, memory: bool = False) -> Profile:
    """Profile what ``config.model`` names: a zoo id or YAML, or ``package.module:factory``; ranks when
    ``config.nproc > 1``. Every file the config names is checked first. ``memory``: run the memory pass too
    (one more untimed step: each stage's allocator peak, beside the prediction for zoo models; one process)."""
    parts = resolve(config)
    factory = parts.source.kind == "factory"
    if config.nproc > 1 and memory:
        raise ConfigError("the memory pass runs in one process; drop --nproc, or predict the ranks with "
                          "recstack memory --nproc", field="--memory")
    if config.nproc > 1:  # ranks under torchrun and DistributedModelParallel
        from recstack.distributed.ranks import profile_ranks

        return profile_ranks(config, factory=factory, trace=str(trace) if trace else None)
    if factory:
        name = parts.source.name
        config = config.updated(batch_size=config.batch_size)  # the factory's batch size is the run's
        model, batch_fn = call_factory(load_factory(name), name, config.batch_size, config.seed)
        info = {"model": name, "backend": "user", **(run_info or {})}
        return profile_module(model, batch_fn, config, parts, run_info=info, trace=trace, memory=memory)
    return profile_zoo(config, parts, trace=trace, run_info=run_info, memory=memory)


def profile_zoo(cfg: RunConfig, parts: Parts | None = None, **run: Any) -> Profile:
    """Build the zoo model and workload ``cfg`` names, then profile them (``run``: as :func:`profile_built_zoo`)."""
    parts = parts or resolve(cfg)  # every input file checked before the (possibly minutes-long) build
    net, spec = build_zoo(cfg)
    return profile_built_zoo(net, spec, cfg, parts, **run)


def build_zoo(cfg: RunConfig) -> tuple[Any, Any]:
    """Build the zoo model and load the workload spec ``cfg`` names (memory preflight at ``cfg.batch_size``).

    A model built here may be profiled again at other batch sizes and thread counts
    (:func:`profile_built_zoo`; the sweep does) as long as the build fields agree.
    """
    from recstack.zoo.build import build_for_run

    with progress.phase("model build"):
        return build_for_run(cfg)


def profile_built_zoo(
    net: Any, spec: Any, cfg: RunConfig, parts: Parts | None = None, *, run_info: dict[str, Any] | None = None,
    **run: Any,
) -> Profile:
    """Profile a zoo model built by :func:`build_zoo` on the workload ``spec`` with the run options of ``cfg``
    (``run``: ``num_batches``, ``trace``, ``cost_model``, ``counters``, ``memory``)."""
    from recstack.workload import bind

    bound = bind(spec, net.features(), net.num_dense, net.num_tasks)
    info = {
        "model": net.cfg.name,
        "backend": cfg.backend,
        "table_dtype": cfg.table_dtype,
        "scale": net.cfg.scale,
        "workload": cfg.workload,
        "model_config": net.cfg.model_dump(),
        "workload_config": bound.describe(),
    }
    info.update(run_info or {})
    prof = profile_module(net, bound, cfg, parts, run_info=info, users_model=False, **run)
    if run.get("memory"):
        _predicted_stage_memory(prof, net, spec, cfg)
    return prof


def _predicted_stage_memory(prof: Profile, net: Any, spec: Any, cfg: RunConfig) -> None:
    """Beside each measured stage peak, the footprint model's prediction of it (the stage's dynamic bytes)."""
    from recstack.profiling.stage_memory import set_stage_memory, stage_memory
    from recstack.zoo.footprint.predict import predict, shape_of

    try:
        pred = predict(shape_of(net.cfg, spec), batch_size=cfg.batch_size, backend=cfg.backend, mode=cfg.mode,
                       optimizer=cfg.optimizer, table_dtype=cfg.table_dtype, device=cfg.resolved_device())
    except ConfigError:  # a combination the footprint model does not cover: measured only
        return
    for st in prof.root.children:
        measured = stage_memory(st)
        if measured is not None and st.name in pred.stage_dynamic:
            set_stage_memory(st, {**measured.model_dump(), "predicted_peak_bytes": int(pred.stage_dynamic[st.name])})


def profile_module(model: nn.Module, inputs: Any, cfg: RunConfig, parts: Parts | None = None, *,
                   loss_fn: Callable[[Any, Any], torch.Tensor] | None = None, num_batches: int = 4,
                   run_info: dict[str, Any] | None = None, trace: str | Path | None = None,
                   users_model: bool = True, **collectors: bool) -> Profile:
    """Profile ``model`` on batches from ``inputs`` (see :func:`recstack.profile`); ``users_model``: errors in
    its code are the user's (:class:`~recstack.errors.UserCodeError`), its batch size read from the batch;
    ``collectors``: ``cost_model`` and ``counters`` (each True when not given), ``memory`` (False)."""
    parts = parts or resolve(cfg)
    batches = _batches(inputs, cfg, num_batches)
    if cfg.resolved_device() == "cuda":  # validated: cuda is available
        model.to("cuda")
        batches = [to_device(b, "cuda") for b in batches]
    _check_devices(model, batches[0])
    if cfg.mode == "train" and not any(p.requires_grad for p in model.parameters()):
        raise ConfigError(
            f"{type(model).__name__} has no trainable parameters, so there is nothing to train; "
            "use mode inference", field="mode",
        )
    batch_size: int | None = cfg.batch_size
    if users_model and "batch_size" not in cfg.model_fields_set:
        # Not given: the batch says (recorded in run.config too, so it stays truthful).
        batch_size = infer_batch_size(batches[0])  # None: the runner warns
        if batch_size is not None:
            cfg = cfg.updated(batch_size=batch_size)
    info = dict(run_info or {})
    info.setdefault("model", cfg.model or type(model).__name__)
    info["config"] = cfg.model_dump(mode="json")
    info["config_key"] = cfg.key()
    opts = ProfileOptions(
        cfg, stage_rules=parts.rules, machine=parts.machine, machine_file=parts.machine_file,
        trace_path=str(trace) if trace else None, run_info=info, compile_hook=_compile_hook(parts), **collectors,
    )
    if not users_model:
        return profile_model(model, batches, opts, loss_fn=loss_fn, batch_size=batch_size)
    try:
        return profile_model(model, batches, opts, loss_fn=loss_fn, batch_size=batch_size)
    except Exception as exc:
        err = as_user_error(exc, f"your model {type(model).__name__}")
        if err is None:
            raise
        raise err from exc


def _batches(inputs: Any, cfg: RunConfig, num_batches: int) -> list[Any]:
    if cfg.workload_batches == "query":
        return _query_batches(inputs, cfg.batch_size, max(num_batches, QUERY_BATCHES))
    return make_batches(inputs, cfg.batch_size, num_batches)


def _compile_hook(parts: Parts) -> Callable[..., Any] | None:
    """What applies the run's compile config (parsed with the other parts) inside the run (docs/compile.md)."""
    if parts.compile is None:
        return None
    from recstack.compilation.profiling import compile_for_profile

    def hook(model: Any, step: Any, batches: list[Any], found: Any, source: Any, warmup: int) -> Any:
        return compile_for_profile(model, step, batches, found, source, warmup, config=parts.compile)

    return hook


def _check_devices(model: nn.Module, batch: Any) -> None:
    """Refuse the meta device: it has no data, so every timing would be made up."""
    for t in list(model.parameters()) + list(model.buffers()):
        if t.is_meta:
            raise ConfigError(
                f"{type(model).__name__} is on the meta device (no data to time); "
                "materialise it first, e.g. model.to_empty(device='cpu') and initialise the weights",
                field="model",
            )
    for t in tensors(batch):
        if t.is_meta:
            raise ConfigError("a batch tensor is on the meta device (no data); make real tensors", field="inputs")


def _query_batches(inputs: Any, max_batch: int, count: int) -> list[Any]:
    """Batches as serving forms them: queries drawn from the workload's query sizes, split into at most
    ``max_batch`` candidates each (:func:`recstack.serving.plan.batch_sizes_of`); the first ``count``."""
    if not (hasattr(inputs, "query_sizes") and hasattr(inputs, "batch")):
        raise ConfigError("query needs a workload with query sizes (zoo models); use fixed for your own batches",
                          field="workload_batches")
    from recstack.serving.plan import batch_sizes_of

    sizes = batch_sizes_of(inputs.query_sizes(count), max_batch)[:count]
    return [inputs.batch(int(n), i) for i, n in enumerate(sizes)]


__all__ = ["QUERY_BATCHES", "build_zoo", "profile_built_zoo", "profile_config", "profile_module", "profile_zoo"]
