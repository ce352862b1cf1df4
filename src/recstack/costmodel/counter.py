"""CostCounter: a TorchDispatchMode that prices every op of one step, per module.

    with CostCounter(model) as cc:
        step()                      # forward (and backward/optimizer in training)
    cc.counts[("dense_arch.layers.0", "aten::addmm")].flops

Contract of ``counts``: a dict keyed by ``(module path, op name)``. The path
is the innermost module whose forward is running (``""`` outside every
module, e.g. the loss or the optimizer); ops run by the autograd engine are
keyed ``(BACKWARD, op name)`` (``"<backward>"``). Op names are the profiler's
(``aten::addmm``, ``fbgemm::...``: the schema name, no overload). Each value
is an :class:`OpCount`: summed cost over all calls, call counts, and a
breakdown by :class:`Context` (the CompositeImplicit ops it ran inside; for
backward ops the autograd node and the forward module that created it).

What the mode sees (checked by tests):

* It sits below autograd, so with grad enabled (training, ``no_grad``) the
  CompositeImplicit ops (``aten::linear``, ``aten::matmul``, ``aten::gru``)
  arrive already decomposed (``aten::addmm``, ``aten::t``...).
* Under ``inference_mode`` autograd is skipped and they arrive whole. The
  counter then runs their C++ CompositeImplicit kernel itself with the mode
  re-entered, so the inner ops are seen one by one, exactly as the profiler
  nests them (``aten::linear`` > ``aten::addmm``); the outer op is recorded
  as *decomposed* (calls only, its work is on its inner ops). The kernel runs
  with the ADInplaceOrView key re-enabled, as in a plain inference-mode run,
  so views keep ``requires_grad`` and kernels take the same branches.
* FBGEMM ops (TBE forward/backward, bounds_check_indices, jagged ops) go
  through the dispatcher and are seen like aten ops, on CPU too.

Under a dispatch mode some composite kernels pick out-of-place variants
(``aten::add`` where a plain run does ``aten::add_``); attach_costs matches
in-place and out-of-place names to each other.
"""

from __future__ import annotations

import bisect
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.hooks import RemovableHandle

from recstack.costmodel.formulas import Call, TensorMeta, meta_of
from recstack.costmodel.registry import OpCost, lookup
from recstack.costmodel.sums import BACKWARD, Context, CostSum, OpCount

_DK = torch._C.DispatchKey
_has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
_BACKEND_KEY = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "xpu": "XPU", "mps": "MPS"}
_MAX_SEQ = (1 << 63) - 1


class CostCounter(TorchDispatchMode):
    """Count FLOPs and bytes of every op dispatched while active, per module path (see module docstring).

    ``model`` (optional) gets forward hooks that track the module path (for
    the ``with`` block only); without it every op is keyed ``""``. Costs are
    summed over everything run inside the block, and over later blocks of the
    same counter: pass the number of counted steps to ``attach_costs``.
    ``decompose=False`` leaves CompositeImplicit ops whole under
    inference_mode (their own formulas then price them).
    """

    def __init__(self, model: nn.Module | None = None, *, decompose: bool = True) -> None:
        super().__init__()
        self.model = model
        self.decompose = decompose
        self.counts: dict[tuple[str, str], OpCount] = {}
        self.error_messages: list[str] = []
        self._modules: list[str] = []
        self._chain: list[str] = []
        self._marks_seq: list[int] = []
        self._marks_path: list[str] = []
        self._handles: list[RemovableHandle] = []
        self._decomp_cache: dict[tuple[str, str], bool] = {}
        self._depth = 0

    # --- module tracking -------------------------------------------------------------
    def _mark(self) -> None:
        seq = int(torch._C._autograd._get_sequence_nr())  # the next autograd node's sequence number
        self._marks_seq.append(seq)
        self._marks_path.append(self._modules[-1] if self._modules else "")

    def _install_hooks(self) -> None:
        if self.model is None:
            return
        for path, mod in self.model.named_modules():
            if not path:
                continue

            def pre(_m: nn.Module, _a: Any, _path: str = path) -> None:
                self._modules.append(_path)
                self._mark()

            def post(_m: nn.Module, _a: Any, _o: Any) -> None:
                if self._modules:
                    self._modules.pop()
                self._mark()

            self._handles.append(mod.register_forward_pre_hook(pre))
            self._handles.append(mod.register_forward_hook(post, always_call=True))

    def origin_of(self, seq: int) -> str | None:
        """Forward module path that was running when autograd node number ``seq`` was created."""
        if not self._marks_seq or seq < self._marks_seq[0] or seq >= _MAX_SEQ:
            return None
        i = bisect.bisect_right(self._marks_seq, seq) - 1
        return self._marks_path[i]

    def __enter__(self) -> CostCounter:
        # The mode re-enters itself to run decompositions: hooks belong to the outermost entry only.
        if self._depth == 0:
            self._install_hooks()
            self._mark()
        self._depth += 1
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self._depth -= 1
            if self._depth == 0:
                for h in self._handles:
                    h.remove()
                self._handles.clear()
                self._modules.clear()

    # --- dispatch ------------------------------------------------------------------------
    def _should_decompose(self, func: Any, args: Any) -> bool:
        if not self.decompose:
            return False
        dev = next((a.device.type for a in _flat_tensors(args)), "cpu")
        key = (func.name(), dev)
        hit = self._decomp_cache.get(key)
        if hit is None:
            name = func.name()
            backend = _BACKEND_KEY.get(dev, "CPU")
            hit = (
                _has_kernel(name, "CompositeImplicitAutograd")
                and not _has_kernel(name, backend)
                and not _has_kernel(name, "CompositeExplicitAutograd")
                and not _has_kernel(name, "CompositeExplicitAutogradNonFunctional")
            )
            self._decomp_cache[key] = hit
        return hit

    def _entry(self) -> tuple[str, Context]:
        node = torch._C._current_autograd_node()
        chain = tuple(self._chain)
        if node is not None:
            return BACKWARD, Context(chain, node.name(), self.origin_of(int(node._sequence_nr())))
        return (self._modules[-1] if self._modules else ""), Context(chain)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = func._schema.name
        path, ctx = self._entry()
        entry = self.counts.get((path, name))
        if entry is None:
            entry = self.counts[(path, name)] = OpCount()
        if self._should_decompose(func, args):
            entry.decomposed_calls += 1
            self._chain.append(name)
            try:
                with self, _inference_views():
                    return func._op_dk(_DK.CompositeImplicitAutograd, *args, **kwargs)
            finally:
                self._chain.pop()
        out = func(*args, **kwargs)
        entry.record(ctx, self._cost(entry, func, name, args, kwargs, out))
        return out

    def _cost(self, entry: OpCount, func: Any, name: str, args: Any, kwargs: Any, out: Any) -> OpCost | None:
        fn = lookup(name)
        if fn is None:
            return None
        try:
            call = Call(
                name,
                tuple(meta_of(tuple(args))),
                {k: meta_of(v) for k, v in kwargs.items()},
                tuple(meta_of(o, keep_values=False) for o in _flat_tensors(out)),
                func._overloadname,
            )
            return fn(call)
        except Exception as exc:  # a formula bug must never break the user's step
            entry.errors += 1
            if len(self.error_messages) < 20:
                self.error_messages.append(f"{name}: {type(exc).__name__}: {exc}")
            return None

    # --- summaries -----------------------------------------------------------------------
    def uncovered(self) -> dict[str, int]:
        """Op name -> calls that had no formula (decomposed calls excluded)."""
        out: dict[str, int] = {}
        for (_, name), c in self.counts.items():
            n = c.calls - c.covered_calls
            if n:
                out[name] = out.get(name, 0) + n
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def total(self, backward: bool | None = None) -> CostSum:
        """Sum over every key (``backward=True``: only backward ops, False: only forward/optimizer ops)."""
        acc = CostSum()
        for (path, _), c in self.counts.items():
            if backward is None or (path == BACKWARD) == backward:
                acc.merge(c)
        return acc


class _inference_views:
    """Re-enable ADInplaceOrView (excluded while a mode handles an op) when inference mode is on,
    so a CompositeImplicit kernel run by the counter sees views as a plain inference-mode run does."""

    def __enter__(self) -> None:
        self._guard = (
            torch._C._SetExcludeDispatchKeyGuard(_DK.ADInplaceOrView, False)
            if torch.is_inference_mode_enabled()
            else None
        )
        if self._guard is not None:
            self._guard.__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self._guard is not None:
            self._guard.__exit__(*exc)


def _flat_tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat_tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat_tensors(v)]
    return []


__all__ = ["BACKWARD", "Context", "CostCounter", "CostSum", "OpCount", "TensorMeta"]
