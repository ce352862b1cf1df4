"""The public Python API: what users import (a thin facade over :mod:`recstack.session`).

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
The run itself (files resolved once, model built, passes run) is the session's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from recstack.config.run import ITERS_MAX, RunConfig
from recstack.errors import ConfigError
from recstack.session import run as session
from recstack.tree import Profile

build_zoo = session.build_zoo  # a zoo model and its workload spec from a RunConfig
profile_built_zoo = session.profile_built_zoo  # profile a model build_zoo built
profile_config = session.profile_config  # what `recstack profile` runs: any model source, ranks too


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
    memory: bool = False,
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
    ``trace``: also write the op pass's Chrome trace there. ``memory``: also run the memory pass (one more
    untimed step: each stage's allocator peak, ``memory_peak`` on the stage nodes; docs/memory.md).
    """
    if "batch_size" in overrides and overrides["batch_size"] is None:
        del overrides["batch_size"]  # None: read it from the first batch (as when not given)
    cfg = RunConfig.build(config, overrides)
    if not isinstance(model, nn.Module):
        raise ConfigError(f"must be a torch.nn.Module (got {type(model).__name__}); for a zoo id use profile_zoo",
                          field="model")
    _check_keywords(loss_fn=loss_fn, num_batches=num_batches, run_info=run_info, trace=trace,
                    cost_model=cost_model, counters=counters, memory=memory)
    return session.profile_module(model, inputs, cfg, loss_fn=loss_fn, num_batches=num_batches, run_info=run_info,
                                  trace=trace, cost_model=cost_model, counters=counters, memory=memory)


def profile_zoo(
    model: str | None = None,
    config: RunConfig | None = None,
    *,
    num_batches: int = 4,
    run_info: dict[str, Any] | None = None,
    trace: str | Path | None = None,
    cost_model: bool = True,
    counters: bool = True,
    memory: bool = False,
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
                    counters=counters, memory=memory)
    return session.profile_zoo(cfg, num_batches=num_batches, run_info=run_info, trace=trace, cost_model=cost_model,
                               counters=counters, memory=memory)


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
    for name in ("cost_model", "counters", "memory"):
        if not isinstance(kw[name], bool):
            raise ConfigError(f"must be True or False (got {kw[name]!r})", field=name)


__all__ = ["build_zoo", "profile", "profile_built_zoo", "profile_config", "profile_zoo"]
