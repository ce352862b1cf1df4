"""The training step's loss: chosen once, at the first step, from what was given and what the model outputs.

In order (docs/profiling.md, "Training loss"):

1. ``loss_fn(output, batch)`` when given (``batch`` as the batch function returned it);
2. the model's own ``loss(output, labels)`` when the batch carries labels (``recstack.Batch(inputs,
   labels)``, a zoo ``RawBatch``), also through a wrapper that keeps the model as ``.module`` (DMP, DDP);
3. a 0-dim float output is the model's own loss, used as it is;
4. otherwise a built-in loss on the output, which must be a float tensor:

   * with the batch's labels: integer class labels ``[B]`` against ``[B, C]`` outputs: cross-entropy;
     labels with as many elements as the output: binary cross-entropy;
   * without labels only a score (a ``[B]`` or ``[B, 1]`` float tensor) is accepted, against seeded
     random 0/1 labels: anything else (a hidden state, a tuple) is an error asking for a loss.

   Binary cross-entropy is on probabilities (``binary_cross_entropy``) when a sigmoid or softmax made
   the output (shape-only ops after it are looked through), else on logits
   (``binary_cross_entropy_with_logits``): the graph decides, not the values (a fresh model's logits
   often all lie in [0, 1]).

``run.loss`` records which (:attr:`TrainLoss.info`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from recstack.errors import ConfigError
from recstack.usercode import name_of

_HOW = ("pass loss_fn=(output, batch) -> loss to recstack.profile, or return recstack.Batch(inputs, labels) "
        "from your batch function (with a loss(output, labels) method on the model for other outputs)")

# autograd nodes that only reshape or copy: a sigmoid below them still made the output
_SHAPE_ONLY = {"View", "UnsafeView", "Reshape", "ReshapeAlias", "Squeeze", "Unsqueeze", "Clone", "ToCopy",
               "Expand", "T", "Permute", "Transpose", "Select", "Slice", "AsStrided", "Unbind", "Split",
               "SplitWithSizes", "Alias"}


class TrainLoss:
    """``loss(output, batch) -> tensor``, and ``info``: what ``run.loss`` records."""

    def __init__(self, fn: Callable[[Any, Any], torch.Tensor], info: dict[str, Any]) -> None:
        self.fn = fn
        self.info = info

    def __call__(self, out: Any, batch: Any) -> torch.Tensor:
        return self.fn(out, batch)


def _describe(out: Any) -> str:
    if isinstance(out, torch.Tensor):
        return f"a {out.dtype} tensor of shape {list(out.shape)}"
    if isinstance(out, (tuple, list)):
        return f"a {type(out).__name__} of {len(out)}"
    return f"a {type(out).__name__}"


def _node_stem(node: Any) -> str:
    return re.sub(r"Backward\d*$", "", type(node).__name__)


_PROBABILITIES = {"Sigmoid", "Softmax", "Hardsigmoid"}  # ops whose outputs are probabilities


def _probability_op(out: torch.Tensor) -> str | None:
    """The sigmoid or softmax that produced ``out`` (through shape-only ops), or None."""
    node = out.grad_fn
    while node is not None:
        stem = _node_stem(node)
        if stem in _PROBABILITIES:
            return stem.lower()
        if stem not in _SHAPE_ONLY:
            return None
        nxt = [f for f, _ in node.next_functions if f is not None]
        node = nxt[0] if len(nxt) == 1 else None
    return None


def _binary(out: torch.Tensor) -> tuple[Callable[..., torch.Tensor], str, str]:
    """binary_cross_entropy or its logits form for ``out``, and why."""
    op = _probability_op(out)
    if op is not None:
        return F.binary_cross_entropy, "binary_cross_entropy", f"a {op} made the output: probabilities"
    return (F.binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits",
            "no sigmoid or softmax made the output: logits")


def _with_labels(out: Any, labels: Any, model: str) -> TrainLoss:
    if not isinstance(labels, torch.Tensor):
        raise ConfigError(f"the batch's labels are a {type(labels).__name__}, not a tensor; {_HOW}", field="loss_fn")
    if not (isinstance(out, torch.Tensor) and out.is_floating_point()):
        raise ConfigError(f"training needs a loss: {model}'s output is {_describe(out)}, not a float tensor; {_HOW}",
                          field="loss_fn")
    if (not labels.is_floating_point() and labels.dim() == 1 and out.dim() == 2 and out.shape[1] > 1
            and labels.shape[0] == out.shape[0]):
        info = {"function": "cross_entropy", "labels": "batch",
                "why": "integer class labels [B] against [B, C] outputs (logits or log-probabilities)"}
        return TrainLoss(lambda o, b: F.cross_entropy(o.float(), b.labels.long()), info)
    if labels.numel() != out.numel():
        raise ConfigError(f"the batch's labels (shape {list(labels.shape)}) do not match {model}'s output "
                          f"({_describe(out)}); {_HOW}", field="loss_fn")
    fn, name, why = _binary(out)
    return TrainLoss(lambda o, b: fn(o.float(), b.labels.reshape(o.shape).float()),
                     {"function": name, "labels": "batch", "why": why})


def _random_labels(out: Any, model: str, seed: int) -> TrainLoss:
    score = isinstance(out, torch.Tensor) and out.is_floating_point() and (
        out.dim() == 1 or (out.dim() == 2 and out.shape[1] == 1))
    if not score:
        raise ConfigError(
            f"training needs a loss: {model}'s output is {_describe(out)}, not a score (a [B] or [B, 1] float "
            f"tensor of logits or probabilities); {_HOW}", field="loss_fn")
    fn, name, why = _binary(out)
    cache: dict[tuple[int, ...], torch.Tensor] = {}

    def loss(o: torch.Tensor, _batch: Any) -> torch.Tensor:
        key = tuple(o.shape)
        if key not in cache:
            g = torch.Generator().manual_seed(seed)
            cache[key] = torch.randint(0, 2, key, generator=g).float().to(o.device)
        return fn(o.float(), cache[key])

    return TrainLoss(loss, {"function": name, "labels": "seeded_random", "why": why})


def _own_loss(model: nn.Module) -> Callable[[Any, Any], torch.Tensor] | None:
    """The model's ``loss(output, labels)``, looking through wrappers that keep the model as ``.module``
    (DistributedModelParallel, DistributedDataParallel)."""
    for _ in range(3):
        own = getattr(model, "loss", None)
        if callable(own):
            return own
        model = getattr(model, "module", None)
        if not isinstance(model, nn.Module):
            return None
    return None


def choose_loss(model: nn.Module, out: Any, batch: Any, loss_fn: Callable[[Any, Any], torch.Tensor] | None,
                seed: int) -> TrainLoss:
    """The loss for ``model``'s training steps, from its first step's output ``out`` on ``batch``."""
    if loss_fn is not None:
        return TrainLoss(loss_fn, {"function": "loss_fn", "name": name_of(loss_fn), "labels": None,
                                   "why": "given"})
    labels = getattr(batch, "labels", None)
    own = _own_loss(model)
    if labels is not None and own is not None:
        return TrainLoss(lambda o, b: own(o, b.labels),
                         {"function": "model.loss", "name": name_of(own), "labels": "batch",
                          "why": "the model's own loss(output, labels)"})
    name = type(model).__name__
    if isinstance(out, torch.Tensor) and out.dim() == 0 and out.is_floating_point():
        return TrainLoss(lambda o, _b: o, {"function": "output", "labels": None,
                                           "why": "a 0-dim output: the model's own loss"})
    if labels is not None:
        return _with_labels(out, labels, name)
    return _random_labels(out, name, seed)


__all__ = ["TrainLoss", "choose_loss"]
