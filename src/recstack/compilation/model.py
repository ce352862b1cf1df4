"""The model and batches a compile run uses: a zoo model (id or YAML) or a ``package.module:factory``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recstack.config.run import RunConfig

if TYPE_CHECKING:  # torch loads with a model, not with the CLI (compilation.commands imports this module)
    from torch import nn


@dataclass
class Loaded:
    name: str
    model: nn.Module
    make_batches: Callable[[int, int], list[Any]]  # (batch_size, count) -> batches, identical per call
    query_sizes: Callable[[int], list[int]] | None  # n -> query sizes from the workload (zoo models)


Loader = Callable[[RunConfig], Loaded]


def load_zoo(cfg: RunConfig) -> Loaded:
    """A zoo model (id or YAML) and its workload; :func:`load` also takes factories."""
    from recstack.workload import bind
    from recstack.zoo.build import build_for_run

    net, spec = build_for_run(cfg, dense_dtype=True)
    bound = bind(spec, net.features(), net.num_dense, net.num_tasks)
    return Loaded(net.cfg.name, net, lambda bs, n: [bound.batch(bs, i) for i in range(n)],
                  lambda n: [int(x) for x in bound.query_sizes(n)])


def load(cfg: Any) -> Any:
    """The model a RunConfig names: a zoo model, or a ``package.module:factory`` (through the API's checks)."""
    from recstack.usercode import call_factory, is_factory, load_factory, make_batches

    name = cfg.model or ""
    if not is_factory(name):
        return load_zoo(cfg)
    factory = load_factory(name)
    model, batch_fn = call_factory(factory, name, cfg.batch_size, cfg.seed)

    def make(bs: int, n: int) -> list[Any]:
        fn = batch_fn if bs == cfg.batch_size else call_factory(factory, name, bs, cfg.seed)[1]
        return make_batches(fn, bs, n)

    return Loaded(name, model, make, None)


__all__ = ["Loaded", "Loader", "load", "load_zoo"]
