"""The public Python API: what the CLI calls and users import.

    import recstack
    prof = recstack.profile(model, inputs, batch_size=1024)   # any nn.Module
    prof = recstack.profile_zoo("rmc1", scale=0.05, batch_size=1024, workload="production")
    cfg = recstack.RunConfig(model="rmc1", scale=0.05); prof = recstack.profile_zoo(config=cfg, iters=10)
    prof.save("out.json"); recstack.Profile.load("out.json")

Run options are :class:`~recstack.config.run.RunConfig` fields, given as
``config=`` and/or keyword overrides (validated by RunConfig: a bad value
raises :class:`~recstack.errors.ConfigError` naming the field). The other
keywords (``loss_fn``, ``num_batches``, ``run_info``, ``trace``,
``cost_model``, ``counters``) say what to do with the run, not what it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from recstack.calls import infer_batch_size, tensors, to_device
from recstack.config.run import ITERS_MAX, RunConfig
from recstack.errors import ConfigError
from recstack.profiling.rules import StageRules, load_stage_rules
from recstack.profiling.runner import ProfileOptions, profile_model
from recstack.render import progress
from recstack.tree import Profile
from recstack.usercode import (
    as_user_error,
    call_factory,
    is_factory,
    load_factory,
    make_batches,
)


def profile(
    model: nn.Module,
    inputs: Any,
    config: RunConfig | None = None,
    *,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    num_batches: int = 4,
    run_info: dict[str, Any] | None = None,
    trace: str | Path | None = None,
    cost_model: bool = True,
    counters: bool = True,
    **overrides: Any,
) -> Profile:
    """Profile any nn.Module (zoo, TorchRec or your own) on batches from ``inputs``.

    ``inputs``: a bound workload, a callable returning batches (called with the
    batch index if it takes an argument), or a list of batches. A
    ``recstack.Call(args, kwargs)`` batch is forward's exact arguments, a
    ``recstack.Batch(inputs, labels)`` carries labels for training, a tuple is
    positional arguments, a plain dict keyword arguments, anything else (a
    library's batch class) the single argument (:mod:`recstack.calls`). In train
    mode the loss is ``loss_fn(output, batch)``, else the model's own
    ``loss(output, labels)`` with the batch's labels, else a built-in loss that
    the output must suit (:mod:`recstack.profiling.loss`; ``run.loss`` records
    it). ``config`` and ``overrides``: RunConfig fields (``batch_size``, when not
    given, is read from the first batch, with a warning when it cannot be);
    ``machine``: a machine dict or file (``recstack machine``) to classify every
    node against, ``"auto"`` for this host's cached measurement if there is one.
    ``trace``: also write the op pass's Chrome trace there.
    """
    if "batch_size" in overrides and overrides["batch_size"] is None:
        del overrides["batch_size"]  # None: read it from the first batch (as when not given)
    cfg = RunConfig.build(config, overrides)
    if not isinstance(model, nn.Module):
        raise ConfigError(f"must be a torch.nn.Module (got {type(model).__name__}); for a zoo id use profile_zoo",
                          field="model")
    _check_keywords(loss_fn=loss_fn, num_batches=num_batches, run_info=run_info, trace=trace,
                    cost_model=cost_model, counters=counters)
    return _run(model, inputs, cfg, loss_fn=loss_fn, num_batches=num_batches, run_info=run_info, trace=trace,
                cost_model=cost_model, counters=counters, users_model=True)


def profile_zoo(
    model: str | None = None,
    config: RunConfig | None = None,
    *,
    num_batches: int = 4,
    run_info: dict[str, Any] | None = None,
    trace: str | Path | None = None,
    cost_model: bool = True,
    counters: bool = True,
    **overrides: Any,
) -> Profile:
    """Build a zoo model (id or YAML) and a workload (preset or spec YAML), then profile them.

    ``model`` (or ``config.model``) names the model; everything else as :func:`profile`.
    """
    if model is not None:
        overrides = {"model": model, **overrides}
    cfg = RunConfig.build(config, overrides)
    if cfg.model is None:
        raise ConfigError("give a zoo id (rmc1 ... dien, dlrmv2 ... hstu) or a model YAML file", field="model")
    _check_keywords(num_batches=num_batches, run_info=run_info, trace=trace, cost_model=cost_model,
                    counters=counters)
    # Validate every input file before the (possibly minutes-long) model build.
    resolved = _resolve_files(cfg)
    net, spec = build_zoo(cfg)
    return profile_built_zoo(net, spec, cfg, num_batches=num_batches, run_info=run_info, trace=trace,
                             cost_model=cost_model, counters=counters, resolved=resolved)


def build_zoo(cfg: RunConfig) -> tuple[Any, Any]:
    """Build the zoo model and load the workload spec ``cfg`` names (memory preflight at ``cfg.batch_size``).

    A model built here may be profiled again at other batch sizes and thread counts
    (:func:`profile_built_zoo`; the sweep does) as long as the build fields agree.
    """
    from recstack.workload import load_workload
    from recstack.zoo import build_model

    spec = load_workload(cfg.workload)
    with progress.phase("model build"):
        net = build_model(cfg.model, scale=cfg.scale, options=zoo_build_options(cfg), workload=spec)
    return net, spec


def zoo_build_options(cfg: RunConfig) -> Any:
    """The zoo BuildOptions of a run config."""
    from recstack.zoo import BuildOptions

    return BuildOptions(backend=cfg.backend, mode=cfg.mode, table_dtype=cfg.table_dtype, optimizer=cfg.optimizer,
                        learning_rate=cfg.learning_rate, seed=cfg.seed, tasks=cfg.tasks, batch_size=cfg.batch_size)


def profile_built_zoo(
    net: Any,
    spec: Any,
    cfg: RunConfig,
    *,
    num_batches: int = 4,
    run_info: dict[str, Any] | None = None,
    trace: str | Path | None = None,
    cost_model: bool = True,
    counters: bool = True,
    resolved: Resolved | None = None,
) -> Profile:
    """Profile a zoo model built by :func:`build_zoo` on the workload ``spec`` with the run options of ``cfg``."""
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
    return _run(net, bound, cfg, loss_fn=None, num_batches=num_batches, run_info=info, trace=trace,
                cost_model=cost_model, counters=counters, users_model=False, resolved=resolved)


def profile_config(
    config: RunConfig, *, trace: str | Path | None = None, run_info: dict[str, Any] | None = None
) -> Profile:
    """Profile what ``config.model`` names: a zoo id or YAML, or ``package.module:factory``."""
    name = config.model or ""
    if config.nproc > 1:  # ranks under torchrun and DistributedModelParallel
        from recstack.distributed.ranks import profile_ranks

        return profile_ranks(config, factory=is_factory(name), trace=str(trace) if trace else None)
    if is_factory(name):
        factory = load_factory(name)
        config = config.updated(batch_size=config.batch_size)  # the factory's batch size is the run's
        model, batch_fn = call_factory(factory, name, config.batch_size, config.seed)
        info = {"model": name, "backend": "user", **(run_info or {})}
        return profile(model, batch_fn, config, run_info=info, trace=trace)
    return profile_zoo(config=config, trace=trace, run_info=run_info)


# -- the run ----------------------------------------------------------------------
def _run(
    model: nn.Module,
    inputs: Any,
    cfg: RunConfig,
    *,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None,
    num_batches: int,
    run_info: dict[str, Any] | None,
    trace: str | Path | None,
    cost_model: bool,
    counters: bool,
    users_model: bool,
    resolved: Resolved | None = None,
) -> Profile:
    rules, machine, machine_file = resolved or _resolve_files(cfg)
    if cfg.workload_batches == "query":
        batches = _query_batches(inputs, cfg.batch_size, max(num_batches, QUERY_BATCHES))
    else:
        batches = make_batches(inputs, cfg.batch_size, num_batches)
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
        cfg, stage_rules=rules, machine=machine, machine_file=machine_file, trace_path=str(trace) if trace else None,
        run_info=info, cost_model=cost_model, counters=counters, compile_hook=_compile_hook(cfg),
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


def _compile_hook(cfg: RunConfig) -> Callable[..., Any] | None:
    """What applies ``cfg.compile`` inside the run (docs/compile.md)."""
    if cfg.compile is None:
        return None
    from recstack.compilation.profiling import compile_for_profile

    return compile_for_profile


Resolved = tuple[StageRules | None, dict[str, Any] | None, str | None]  # rules, machine, machine file


def _resolve_files(cfg: RunConfig) -> Resolved:
    """Load the stage rules and the machine the config names (errors name the file and field); also
    the machine's file, which the profile records."""
    rules = None
    if isinstance(cfg.stage_rules, str):
        rules = load_stage_rules(cfg.stage_rules)
    elif isinstance(cfg.stage_rules, dict):
        from recstack.config.loading import parse_config

        rules = parse_config(StageRules, cfg.stage_rules, source="stage_rules")
    machine, machine_file = machine_with_file(cfg.machine)
    return rules, machine, machine_file


resolve_files = _resolve_files  # public name: the sweep resolves a point's files before reusing a build


def _check_keywords(**kw: Any) -> None:
    """Type checks of the API's non-config keywords, so a bad one names itself."""
    if "loss_fn" in kw and kw["loss_fn"] is not None and not callable(kw["loss_fn"]):
        raise ConfigError(f"must be callable (got {type(kw['loss_fn']).__name__})", field="loss_fn")
    nb = kw["num_batches"]
    if not isinstance(nb, int) or isinstance(nb, bool) or not 1 <= nb <= ITERS_MAX:
        raise ConfigError(f"must be an integer 1..{ITERS_MAX} (got {nb!r})", field="num_batches")
    if kw["run_info"] is not None and not isinstance(kw["run_info"], dict):
        raise ConfigError(f"must be a dict (got {type(kw['run_info']).__name__})", field="run_info")
    if kw["trace"] is not None and not isinstance(kw["trace"], (str, Path)):
        raise ConfigError(f"must be a file path (got {type(kw['trace']).__name__})", field="trace")
    for name in ("cost_model", "counters"):
        if not isinstance(kw[name], bool):
            raise ConfigError(f"must be True or False (got {kw[name]!r})", field=name)


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


QUERY_BATCHES = 16  # batches pre-generated for workload_batches query (sizes vary, so more than fixed)


def _query_batches(inputs: Any, max_batch: int, count: int) -> list[Any]:
    """Batches as serving forms them: queries drawn from the workload's query sizes, split into at most
    ``max_batch`` candidates each (:func:`recstack.serving.plan.batch_sizes_of`); the first ``count``."""
    if not (hasattr(inputs, "query_sizes") and hasattr(inputs, "batch")):
        raise ConfigError("query needs a workload with query sizes (zoo models); use fixed for your own batches",
                          field="workload_batches")
    from recstack.serving.plan import batch_sizes_of

    sizes = batch_sizes_of(inputs.query_sizes(count), max_batch)[:count]
    return [inputs.batch(int(n), i) for i, n in enumerate(sizes)]


# -- files and factories ----------------------------------------------------------------
def resolve_machine(machine: dict[str, Any] | str | Path | None) -> dict[str, Any] | None:
    """A machine dict, a machine JSON file, ``"auto"`` (this host's cached measurement, if any) or None."""
    return machine_with_file(machine)[0]


def machine_with_file(machine: dict[str, Any] | str | Path | None) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`resolve_machine` and the file the figures were read from (None for a dict or no machine)."""
    from recstack.hardware.machine import machine_with_file as resolve

    return resolve(machine)
