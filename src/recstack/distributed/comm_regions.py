"""TorchRec's forward communication as stages of their own, so that both passes measure it.

TorchRec runs its input and output distribution inside the sharded embedding
module, where no module boundary separates them from the lookups. Left there,
the communication phases were cut out of the embedding stage afterwards by op
name, each with the op pass's time scaled by the embedding stage's factor; but
torch.profiler slows TorchRec's many small ops and Python ranges more than the
few large lookups, so that share was too large (RMC1 table-wise on 2 ranks:
3.06 ms apportioned against 2.5 ms timed directly, benchmarks/LOG.md).

This module marks the code itself. While a pass runs:

* ``input_dist``: every sharded module's ``input_dist`` call (the features
  split by sharding, the splits all-to-all issued) and the waits on its
  ``KJT*`` awaitables (the lengths/values all-to-alls, the re-layout);
* ``output_dist``: every output-dist module's forward (the pooled-embedding
  all-to-all or reduce-scatter issued) and the waits on the awaitables of its
  result (``PooledEmbeddingsAwaitable``, ``EmbeddingBagCollectionAwaitable``,
  wherever the model first reads the embeddings);

each is entered as the stage ``communication.<phase>`` (:data:`PREFIX`): the
timing pass times it like a stage root, the op pass opens a stage range around
it (see :class:`recstack.profiling.passes.Regions`). A region entered inside
another runs in it (no second entry). The backward collectives (autograd) and
DDP's all-reduce (C++) have no such call to mark; they are still moved out of
the backward stage by name (:mod:`recstack.distributed.communication`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from recstack.distributed.communication import MEASURED_PREFIX as PREFIX
from recstack.distributed.communication import is_communication, phase_of


def awaitable_phase(class_name: str) -> str | None:
    """The phase whose wait an awaitable of this class is, or None (not communication)."""
    if not is_communication(class_name):
        return None
    return phase_of(class_name, "")


class _Marker:
    """Enter/leave one phase around a call, unless a phase is already open (then the call runs in it), no
    pass is marking (``enter`` None) or the call runs on another thread than the pass (a pipeline's or a
    server's: the pass's stage stack is its own thread's); then the call passes through."""

    def __init__(self) -> None:
        self.enter: Callable[[str], None] | None = None
        self.leave: Callable[[], None] | None = None
        self.thread: int | None = None  # the pass's thread
        self.depth = 0

    def point(self, enter: Callable[[str], None] | None, leave: Callable[[], None] | None) -> None:
        self.enter, self.leave = enter, leave
        self.thread = threading.get_ident() if enter is not None else None

    def run(self, phase: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        enter, leave = self.enter, self.leave
        if self.depth or enter is None or threading.get_ident() != self.thread:  # (leave is set with enter)
            return fn(*args, **kwargs)
        enter(PREFIX + phase)
        self.depth += 1  # only once entered: a failed enter leaves the marks working
        try:
            return fn(*args, **kwargs)
        finally:
            self.depth -= 1
            leave()

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def marked(*args: Any, **kwargs: Any) -> Any:
            return self.run(phase, fn, *args, **kwargs)

        return marked


def _dist_modules(model: Any) -> tuple[list[Any], list[Any]]:
    """The model's sharded modules and their output-dist modules (TorchRec keeps some in plain lists)."""
    from torchrec.distributed.embedding_sharding import BaseEmbeddingDist
    from torchrec.distributed.types import ShardedModule

    sharded = [m for m in model.modules() if isinstance(m, ShardedModule)]
    outs: dict[int, Any] = {id(m): m for m in model.modules() if isinstance(m, BaseEmbeddingDist)}
    for m in sharded:
        for d in getattr(m, "_output_dists", None) or []:
            outs.setdefault(id(d), d)
    return sharded, list(outs.values())


_PATCHING: TorchRecCommRegions | None = None  # the instance whose patches are in place


class TorchRecCommRegions:
    """:class:`recstack.profiling.passes.Regions` for a model sharded by TorchRec's DMP.

    The first :meth:`install` patches (``input_dist``, the output dists' ``forward``, ``Awaitable.wait``);
    the patches stay until :meth:`close`, and each install only points the marks at its pass's
    ``enter``/``leave`` (its undo makes them pass through). Patching TorchRec's classes and modules again
    for every timed step cost that step 4-9% (paired runs, benchmarks/LOG.md: Python re-specialises every
    call site of a class that changed); a mark passing through costs well under a microsecond, so the
    uninstrumented steps between the timed ones stay as good as bare."""

    def __init__(self) -> None:
        self._marker = _Marker()
        self._unpatch: Callable[[], None] | None = None
        self._model: Any = None

    def install(self, model: Any, enter: Callable[[str], None], leave: Callable[[], None]) -> Callable[[], None]:
        global _PATCHING
        if self._unpatch is not None and model is not self._model:
            self.close()  # another model: its patches replace the first one's
        if self._unpatch is None:
            if _PATCHING is not None:  # two would patch Awaitable.wait over each other: undone out of order,
                raise RuntimeError("another TorchRecCommRegions still patches TorchRec: close it first")  # one leaks
            self._unpatch = _patch(model, self._marker)
            self._model, _PATCHING = model, self
        self._marker.point(enter, leave)

        def stop() -> None:
            self._marker.point(None, None)

        return stop

    def close(self) -> None:
        """Undo every patch (idempotent)."""
        global _PATCHING
        self._marker.point(None, None)
        if self._unpatch is not None:
            self._unpatch()
            self._unpatch = self._model = _PATCHING = None


def _patch(model: Any, marker: _Marker) -> Callable[[], None]:
    """Mark the model's distribution calls through ``marker``; returns what undoes it (rolled back at once
    if patching fails part-way)."""
    from torchrec.distributed.types import Awaitable

    sharded, outs = _dist_modules(model)
    saved = [(m, "input_dist", m.__dict__.get("input_dist")) for m in sharded]
    saved += [(d, "forward", d.__dict__.get("forward")) for d in outs]  # a wrapper already there, if any
    wait = Awaitable.wait
    phases: dict[type, str | None] = {}

    def marked_wait(aw: Any) -> Any:
        cls = type(aw)
        if cls not in phases:
            phases[cls] = awaitable_phase(cls.__name__)
        phase = phases[cls]
        return wait(aw) if phase is None else marker.run(phase, wait, aw)

    def undo() -> None:
        Awaitable.wait = wait  # type: ignore[method-assign]
        for m, name, previous in saved:
            if previous is None:
                m.__dict__.pop(name, None)
            else:
                setattr(m, name, previous)

    try:
        for m, name, _ in saved:  # instance attributes: ShardedModule.forward calls self.input_dist
            setattr(m, name, marker.wrap("input_dist" if name == "input_dist" else "output_dist", getattr(m, name)))
        Awaitable.wait = marked_wait  # type: ignore[method-assign]
    except BaseException:
        undo()
        raise
    return undo
