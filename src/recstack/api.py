"""The public Python API: what the CLI calls and users import.

    import recstack
    prof = recstack.profile(model, inputs, batch_size=1024)   # any nn.Module
    prof = recstack.profile_zoo("rmc1", scale=0.05, batch_size=1024, workload="production")
    prof.save("out.json"); recstack.Profile.load("out.json")
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from recstack.errors import ConfigError
from recstack.profiling.rules import StageRules, load_stage_rules
from recstack.profiling.runner import ProfileOptions, profile_model
from recstack.tree import Profile


def _make_batches(inputs: Any, batch_size: int | None, count: int) -> list[Any]:
    """Pre-generate ``count`` batches so that generation never runs inside a timed region."""
    if hasattr(inputs, "batch") and callable(inputs.batch):
        if batch_size is None:
            raise ConfigError("a workload needs batch_size", field="batch_size")
        return [inputs.batch(batch_size, i) for i in range(count)]
    if callable(inputs):
        try:
            nparams = len(inspect.signature(inputs).parameters)
        except (TypeError, ValueError):
            nparams = 0
        return [inputs(i) if nparams >= 1 else inputs() for i in range(count)]
    if isinstance(inputs, list):
        return inputs
    raise ConfigError(
        "inputs must be a workload (with .batch(batch_size, index)), a callable returning batches, or a list",
        field="inputs",
    )


def profile(
    model: nn.Module,
    inputs: Any,
    *,
    batch_size: int | None = None,
    mode: str = "inference",
    iters: int = 20,
    warmup: int = 5,
    op_iters: int = 3,
    threads: int | None = None,
    dtype: str = "fp32",
    optimizer: str = "sgd",
    learning_rate: float = 0.01,
    stage_rules: StageRules | str | Path | None = None,
    trace: str | Path | None = None,
    seed: int = 0,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    num_batches: int = 4,
    run_info: dict[str, Any] | None = None,
    machine: dict[str, Any] | str | Path | None = None,
    cost_model: bool = True,
    counters: bool = True,
) -> Profile:
    """Profile any nn.Module (zoo, TorchRec or your own) on batches from ``inputs``.

    ``inputs``: a bound workload, a callable returning batches (called with the
    batch index if it takes an argument), or a list of batches. A tuple batch is
    passed as positional arguments, a dict as keyword arguments, anything else
    as the single argument. In train mode the loss is ``loss_fn(output, batch)``,
    else the model's own ``loss(output, labels)``, else BCE-with-logits against
    seeded random labels. ``machine``: a machine dict or file (``recstack machine``)
    to classify every node against; ``"auto"`` uses the cached measurement of this
    host if there is one.
    """
    rules = load_stage_rules(stage_rules) if isinstance(stage_rules, (str, Path)) else stage_rules
    opts = ProfileOptions(
        mode=mode,
        iters=iters,
        warmup=warmup,
        op_iters=op_iters,
        threads=threads,
        dtype=dtype,
        optimizer=optimizer,
        learning_rate=learning_rate,
        stage_rules=rules,
        trace_path=str(trace) if trace else None,
        seed=seed,
        run_info=dict(run_info or {}),
        cost_model=cost_model,
        counters=counters,
        machine=resolve_machine(machine),
    )
    opts.validate()
    if num_batches < 1:
        raise ConfigError(f"must be >= 1 (got {num_batches})", field="num_batches")
    batches = _make_batches(inputs, batch_size, num_batches)
    return profile_model(model, batches, opts, loss_fn=loss_fn, batch_size=batch_size)


def profile_zoo(
    model: str,
    *,
    scale: float = 1.0,
    batch_size: int = 1024,
    workload: str = "uniform",
    backend: str = "torch",
    table_dtype: str = "fp32",
    mode: str = "inference",
    tasks: int | None = None,
    seed: int = 0,
    **kwargs: Any,
) -> Profile:
    """Build a zoo model (id or YAML) and a workload (preset or spec YAML), then profile them."""
    from recstack.workload import load_workload
    from recstack.zoo import BuildOptions, build_model

    if batch_size < 1:
        raise ConfigError(f"must be >= 1 (got {batch_size})", field="--batch-size")
    # Validate every input file before the (possibly minutes-long) model build.
    if isinstance(kwargs.get("stage_rules"), (str, Path)):
        kwargs["stage_rules"] = load_stage_rules(kwargs["stage_rules"])
    if kwargs.get("machine") is not None:
        kwargs["machine"] = resolve_machine(kwargs["machine"])
    spec = load_workload(workload)
    opts = BuildOptions(
        backend=backend,
        mode=mode,
        table_dtype=table_dtype,
        optimizer=kwargs.get("optimizer", "sgd"),
        seed=seed,
        tasks=tasks,
        batch_size=batch_size,
    )
    net = build_model(model, scale=scale, options=opts, workload=spec)
    bound = spec.bind(net.features(), net.num_dense, net.num_tasks)
    info = {
        "model": net.cfg.name,
        "backend": backend,
        "table_dtype": table_dtype,
        "scale": net.cfg.scale,
        "workload": workload,
        "model_config": net.cfg.model_dump(),
        "workload_config": bound.describe(),
    }
    info.update(kwargs.pop("run_info", None) or {})
    return profile(net, bound, batch_size=batch_size, mode=mode, seed=seed, run_info=info, **kwargs)


def resolve_machine(machine: dict[str, Any] | str | Path | None) -> dict[str, Any] | None:
    """A machine dict, a machine JSON file, ``"auto"`` (this host's cached measurement, if any) or None."""
    if machine is None or isinstance(machine, dict):
        return machine
    from recstack.hardware.machine import cache_is_current, cache_path, load_machine

    if str(machine) == "auto":
        path = cache_path()
        if not path.exists():
            return None
        cached = load_machine(path)
        return cached if cache_is_current(cached, "quick") is None else None
    return load_machine(machine)


def load_factory(spec: str) -> Callable[[int, int], tuple[nn.Module, Callable[..., Any]]]:
    """``package.module:factory`` -> the factory ``(batch_size, seed) -> (model, batch_fn)``."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ConfigError(f"expected package.module:factory (got {spec!r})", field="model")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {mod_name!r} ({exc}); is it on PYTHONPATH?", field="model") from None
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise ConfigError(f"{mod_name} has no callable {attr!r}", field="model")
    return fn
