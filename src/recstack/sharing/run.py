"""``share_config``: build a zoo model and a request-aware batch from a RunConfig, and analyse sharing."""

from __future__ import annotations

from typing import Any

import torch

from recstack.config.limits import BATCH_SIZE_MAX
from recstack.config.run import RunConfig
from recstack.errors import ConfigError
from recstack.sharing.analysis import analyse_sharing
from recstack.sharing.execute import Sides
from recstack.zoo.config import ZOO_IDS

CANDIDATES_MAX = 100_000
REQUESTS_MAX = 10_000


def check_counts(requests: int, candidates: int) -> None:
    """ConfigError naming the flag for request / candidate counts out of range."""
    if not 1 <= candidates <= CANDIDATES_MAX:
        raise ConfigError(f"must be within 1..{CANDIDATES_MAX} (got {candidates})", field="--candidates")
    if not 1 <= requests <= REQUESTS_MAX:
        raise ConfigError(f"must be within 1..{REQUESTS_MAX} (got {requests})", field="--requests")
    if requests * candidates > BATCH_SIZE_MAX:
        raise ConfigError(f"requests x candidates = {requests * candidates:,} rows, above {BATCH_SIZE_MAX:,}; "
                          "give fewer requests", field="--requests")


def share_config(cfg: RunConfig, *, requests: int, candidates: int) -> dict[str, Any]:
    """Analyse request sharing of ``cfg.model`` (a zoo id or YAML) on R requests x C candidates, inference.

    Your own model: build a request-aware batch and call :func:`recstack.sharing.analyse_sharing`.
    """
    from recstack.profiling.rules import rules_of
    from recstack.workload import bind
    from recstack.workload.requests import request_batch
    from recstack.zoo.build import build_for_run

    check_counts(requests, candidates)
    if cfg.model is None:
        raise ConfigError(f"give a zoo id ({ZOO_IDS}) or a model YAML file", field="MODEL")
    if cfg.mode != "inference":
        raise ConfigError("share measures inference (a ranking request); use --mode inference", field="--mode")
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    rules = rules_of(cfg.stage_rules)  # a file or inline rules, checked before the build
    net, spec = build_for_run(cfg, dense_dtype=True, mode="inference", batch_size=requests * candidates)
    bound = bind(spec, net.features(), net.num_dense, net.num_tasks)
    batch = request_batch(bound, requests, candidates)
    sides = Sides(frozenset(f.name for f in bound.features if f.side == "request"),
                  bool(net.num_dense) and spec.dense.side == "request")
    result = analyse_sharing(net, batch, sides, iters=cfg.iters, warmup=cfg.warmup, rules=rules)
    result["model"] = net.cfg.name
    result["backend"] = cfg.backend
    result["scale"] = net.cfg.scale
    result["workload"] = cfg.workload
    result["config_key"] = cfg.key()
    return result


__all__ = ["CANDIDATES_MAX", "REQUESTS_MAX", "check_counts", "share_config"]
