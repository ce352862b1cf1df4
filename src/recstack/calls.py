"""How a batch becomes a call of the model, and how many samples it holds.

A batch function (or a list of batches) gives one object per step, and the model is called with it:

* ``recstack.Call(args, kwargs)``: ``model(*args, **kwargs)``, exactly (``Call((x,))`` passes a
  tuple ``x`` as one argument);
* ``recstack.Batch(inputs, labels)``: the model is called with ``inputs`` by these same rules, and
  ``labels`` go to the training loss (:mod:`recstack.profiling.loss`);
* a tuple: positional arguments; a plain dict: keyword arguments;
* anything else (a tensor, a list, a library's batch class with ``.to()`` or a dict interface): the
  single argument, as it is.

The batch size is ``Call``'s or ``Batch``'s ``batch_size=`` if given, else an int ``batch_size``
attribute of the batch (library batch classes often have one), else the first dimension of its
first tensor (in a tuple, list, mapping, or a ``Call``'s arguments); None when none of these says.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from recstack.errors import ConfigError, UserCodeError


def _check_batch_size(value: Any, what: str) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ConfigError(f"batch_size must be a positive integer or None (got {value!r})", field=what)


@dataclass(frozen=True, eq=False)
class Call:
    """A batch as the exact arguments of the model's forward: ``model(*args, **kwargs)``.

    ``batch_size``: samples in the batch, when recstack cannot read it from the first tensor.
    """

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.args, list):
            object.__setattr__(self, "args", tuple(self.args))
        if not isinstance(self.args, tuple):
            raise ConfigError(f"args must be a tuple of positional arguments (got {type(self.args).__name__}); "
                              "for one argument write recstack.Call((x,))", field="recstack.Call")
        if not isinstance(self.kwargs, Mapping) or not all(isinstance(k, str) for k in self.kwargs):
            raise ConfigError(f"kwargs must be a dict of keyword arguments (got {type(self.kwargs).__name__})",
                              field="recstack.Call")
        _check_batch_size(self.batch_size, "recstack.Call")

    def to(self, device: str | torch.device) -> Call:
        """The call with every tensor in its arguments on ``device``."""
        return Call(to_device(self.args, device), {k: to_device(v, device) for k, v in self.kwargs.items()},
                    self.batch_size)


@dataclass(frozen=True, eq=False)
class Batch:
    """A batch with its labels: the model is called with ``inputs`` (a tuple, dict, ``Call`` or one
    argument, as any batch), the training loss gets ``labels`` (docs/profiling.md, "Training loss")."""

    inputs: Any
    labels: Any = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.inputs, Batch):
            raise ConfigError("inputs is itself a recstack.Batch; give the model's inputs", field="recstack.Batch")
        _check_batch_size(self.batch_size, "recstack.Batch")

    def to(self, device: str | torch.device) -> Batch:
        """The batch with every tensor of its inputs and labels on ``device``."""
        return Batch(to_device(self.inputs, device), to_device(self.labels, device), self.batch_size)


def _as_keywords(batch: Any) -> bool:
    """A plain dict (or OrderedDict...) is keyword arguments; a dict subclass with ``.to()`` is a library's
    batch class, passed as it is."""
    return isinstance(batch, dict) and not callable(getattr(batch, "to", None))


def call_args(batch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments the model is called with for ``batch``."""
    if isinstance(batch, Batch):
        batch = batch.inputs
    if isinstance(batch, Call):
        return batch.args, dict(batch.kwargs)
    if isinstance(batch, tuple):
        return batch, {}
    if _as_keywords(batch):
        return (), batch
    return (batch,), {}


def call_model(model: nn.Module, batch: Any) -> Any:
    """Call ``model`` with ``batch`` (the rules in this module's docstring)."""
    if isinstance(batch, tuple):  # the common cases first, no tuples built: this runs in every timed step
        return model(*batch)
    if isinstance(batch, (Call, Batch, dict)):
        args, kwargs = call_args(batch)
        return model(*args, **kwargs)
    return model(batch)


def to_device(batch: Any, device: str | torch.device) -> Any:
    """A batch (anything with ``.to()``, a tuple, list or dict of them) with its tensors on ``device``."""
    if hasattr(batch, "to") and callable(batch.to) and not isinstance(batch, nn.Module):
        return batch.to(device)
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


def tensors(obj: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """The tensors of a batch, in order: in tuples, lists, mappings, a Call's arguments, a Batch's inputs
    (three levels deep)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth >= 3:
        return
    elif isinstance(obj, Batch):
        yield from tensors(obj.inputs, depth)
    elif isinstance(obj, Call):
        yield from tensors((*obj.args, *obj.kwargs.values()), depth)
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from tensors(o, depth + 1)
    elif isinstance(obj, Mapping):
        for o in obj.values():
            yield from tensors(o, depth + 1)


def infer_batch_size(batch: Any) -> int | None:
    """Samples in ``batch`` (the rules in this module's docstring), or None when nothing says."""
    own = getattr(batch, "batch_size", None)
    if isinstance(own, int) and not isinstance(own, bool) and own >= 1:
        return own
    if isinstance(batch, Batch):
        return infer_batch_size(batch.inputs)
    for t in tensors(batch):
        return int(t.shape[0]) if t.dim() >= 1 and t.shape[0] >= 1 else None
    return None


def unknown_batch_size(batch: Any) -> str:
    """The warning for a batch whose size :func:`infer_batch_size` cannot tell."""
    return (f"cannot tell the batch size of a {type(batch).__name__} batch, so run.batch_size and throughput "
            "are empty; pass batch_size= to recstack.profile, or give it with the batch: "
            "recstack.Call(args, kwargs, batch_size=N) or recstack.Batch(inputs, labels, batch_size=N)")


def _how_called(batch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    inner = batch.inputs if isinstance(batch, Batch) else batch
    if isinstance(inner, Call):
        return f"recstack.Call gives {len(args)} positional and {len(kwargs)} keyword arguments"
    if isinstance(inner, tuple):
        return f"a tuple batch is passed as {len(args)} positional arguments"
    if kwargs:
        return f"a dict batch is passed as keyword arguments ({', '.join(kwargs)[:80]})"
    return f"a {type(inner).__name__} batch is passed as the single argument"


def argument_error(model: nn.Module, batch: Any, exc: TypeError) -> UserCodeError | None:
    """If ``model``'s forward cannot take ``batch``'s arguments, the error that says how to pass them; else
    None (``exc`` came from somewhere else)."""
    args, kwargs = call_args(batch)
    try:
        sig = inspect.signature(model.forward)
    except (TypeError, ValueError):  # no signature to judge by
        return None
    try:
        sig.bind(*args, **kwargs)
        return None
    except TypeError:
        pass
    text = str(exc).strip().splitlines()
    cause = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    name = f"{type(model).__name__}.forward"
    err = UserCodeError(
        f"your model's {name}{str(sig)[:100]} cannot take this batch: {_how_called(batch, args, kwargs)} "
        f"({cause}); return recstack.Call(args, kwargs) from your batch function to give forward's arguments "
        "exactly, e.g. recstack.Call((inputs,)) passes a tuple as one argument",
        function=name,
    )
    err.__cause__ = exc
    return err


__all__ = ["Batch", "Call", "argument_error", "call_args", "call_model", "infer_batch_size", "tensors",
           "to_device", "unknown_batch_size"]
