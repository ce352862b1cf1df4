"""Build zoo models: config -> preflight -> dense layers (seeded) -> embedding backend -> table init."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recstack.config.build import BuildOptions  # the run config's build section (recstack.zoo.BuildOptions)
from recstack.zoo import archs
from recstack.zoo.config import ModelConfig
from recstack.zoo.memory import NUM_BATCHES, MemoryEstimate, check_fits
from recstack.zoo.skeleton import dense_param_count, resolve_config, skeleton

# torch, the embedding backends and the model classes are imported where a model is built, so that
# resolving and checking a config (and failing on a bad one) needs no torch.
if TYPE_CHECKING:
    import torch

    from recstack.config.run import RunConfig
    from recstack.workload.spec import WorkloadSpec
    from recstack.zoo.models import RecModel


def build_for_run(cfg: RunConfig, *, dense_dtype: bool = False, **overrides: Any) -> tuple[RecModel, WorkloadSpec]:
    """The zoo model ``cfg.model`` names, built with the run's build section (``overrides`` on it), and the
    workload spec it is preflighted with; ``dense_dtype``: also cast the dense layers to ``cfg.dtype``
    (the profiling runner does that itself). Every command that runs a zoo model builds it here."""
    from recstack.workload import load_workload

    spec = load_workload(cfg.workload)
    net = build_model(cfg.model or "", scale=cfg.scale, options=BuildOptions.of(cfg, **overrides), workload=spec)
    if dense_dtype and cfg.dtype == "bf16":
        import torch

        net.set_dense_dtype(torch.bfloat16)
    return net, spec


def memory_estimate(
    cfg: ModelConfig, opts: BuildOptions, workload: WorkloadSpec | None = None, num_batches: int = NUM_BATCHES
) -> MemoryEstimate:
    """Bytes ``cfg`` needs with ``opts`` (tables, optimizer, dense layers) and ``opts.batch_size`` of ``workload``
    (:mod:`recstack.zoo.footprint.predict`, the model ``recstack memory`` reports)."""
    from recstack.zoo.memory import estimate_config

    return estimate_config(cfg, opts, workload, num_batches)


def preflight(
    model: str | ModelConfig,
    *,
    scale: float = 1.0,
    options: BuildOptions | None = None,
    workload: WorkloadSpec | None = None,
    batch_size: int | None = None,
    available: int | None = None,
) -> MemoryEstimate:
    """Check, before anything is allocated, that ``model`` at ``scale`` and ``batch_size`` fits in memory.

    Validates the options and the config's sizes, then raises MemoryPreflightError (naming a
    ``--scale`` and ``--batch-size`` that would fit) when the tables, optimizer state, dense
    layers, generated batches and one step's activations exceed the available memory.
    """
    opts = options or BuildOptions()
    if batch_size is not None:
        opts = BuildOptions(**{**opts.__dict__, "batch_size": batch_size})
    opts.validate()
    cfg = resolve_config(model, scale, opts.tasks)
    est = memory_estimate(cfg, opts, workload)
    check_fits(est, model=cfg.name, scale=cfg.scale, available=available)
    return est


def build_model(
    model: str | ModelConfig,
    *,
    scale: float = 1.0,
    options: BuildOptions | None = None,
    preflight: bool = True,
    workload: WorkloadSpec | None = None,
    **kwargs: Any,
) -> RecModel:
    """Build a zoo model (by id or YAML path, or a ModelConfig) ready to run.

    ``options`` (or keyword arguments of :class:`BuildOptions`) choose the
    backend, mode, table dtype, optimizer and seed. Dense layers are seeded
    from ``seed`` independently of the backend, and every table is initialised
    from (seed, table index), so the three backends hold the same weights.
    The memory preflight counts ``options.batch_size`` samples of ``workload``
    (default: the config's own pooling) besides the tables.
    """
    import torch

    from recstack.zoo.embedding import make_backend

    opts = options or BuildOptions(**kwargs)
    opts.validate()
    cfg = resolve_config(model, scale, opts.tasks)
    if preflight:
        check_fits(memory_estimate(cfg, opts, workload), model=cfg.name, scale=cfg.scale)
    tables = cfg.resolved_tables()
    # The backend is built on its own; dense layers get the global RNG seeded the same way for every backend.
    backend = make_backend(
        opts.backend,
        tables,
        mode=opts.mode,
        table_dtype=opts.table_dtype,
        optimizer=opts.optimizer,
        learning_rate=opts.learning_rate,
        device="meta" if opts.backend == "torchrec" else "cpu",
    )
    if opts.backend == "torchrec":
        backend.to_empty(device="cpu")  # allocate without TorchRec's default init: init_weights fills every row once
    backend.init_weights(opts.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(opts.seed)
        net = archs.get(cfg.arch).model_class()(cfg, backend)
    net.build_options = opts  # type: ignore[assignment]
    return net


def summary(model: str | ModelConfig, scale: float = 1.0, tasks: int | None = None) -> dict[str, Any]:
    """Figures for `zoo list`, computed from the config without allocating tables."""
    cfg = resolve_config(model, scale, tasks)
    skel = skeleton(cfg)
    return cfg.summary_row(skel.lookups_per_sample(), 2 * skel.dense_macs_per_sample(), dense_param_count(skel))


def module_tree(model: torch.nn.Module, max_depth: int = 4) -> list[dict[str, Any]]:
    """The module tree as rows (path, type, parameter count, depth) for `zoo show`."""
    rows = []
    for path, mod in model.named_modules():
        depth = 0 if not path else path.count(".") + 1
        if depth > max_depth:
            continue
        rows.append(
            {
                "path": path or "(model)",
                "type": type(mod).__name__,
                "params": sum(p.numel() for p in mod.parameters(recurse=True)),
                "depth": depth,
            }
        )
    return rows
