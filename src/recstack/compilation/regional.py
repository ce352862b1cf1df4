"""Apply a compile config to a model in place: each region's ``forward`` becomes a compiled function.

``module.forward = <compiled forward>`` (an instance attribute) rather than
``torch.compile(module)`` or ``module.compile()``: the module tree and its
state-dict keys stay as they were (no ``_orig_mod.``), and recstack's
stage-boundary wrappers (:class:`recstack.profiling.timing.ForwardWrappers`,
which wrap ``module.forward``) sit *outside* the compiled region, so stage
times stay measurable. ``module.compile()`` is not used: on built-in modules
such as ``nn.Sequential`` it compiles nothing in torch 2.13.

The compiled functions are built once and kept: :meth:`Compiled.deactivate`
restores the eager forwards and :meth:`Compiled.activate` swaps the compiled
ones back without losing what was compiled (eager and compiled runs of the
same weights on identical inputs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from recstack.compilation.config import WHOLE, DynamicDim, Plan, Region, Settings
from recstack.compilation.observe import CURRENT_REGION
from recstack.errors import ConfigError


def _marker(how: str) -> Callable[[torch.Tensor, int], None] | str:
    """The torch function that marks a dimension ``how``, or why it is unavailable."""
    import torch._dynamo as dynamo

    if how == "unbacked":
        fn = getattr(getattr(dynamo, "decorators", None), "mark_unbacked", None)
    else:
        fn = getattr(dynamo, how, None)
    return fn if callable(fn) else f"unavailable: torch._dynamo has no {how}"


def _select(sig: inspect.Signature | None, args: tuple, kwargs: dict, d: DynamicDim) -> Iterator[torch.Tensor]:
    """The tensors a DynamicDim names among a call's arguments (``*``: all tensor arguments)."""
    if d.arg == "*":
        for v in list(args) + list(kwargs.values()):
            yield from _tensors(v)
        return
    head, _, rest = d.arg.partition(".")
    value: Any = kwargs.get(head)
    if value is None and sig is not None:
        try:
            value = sig.bind_partial(*args, **kwargs).arguments.get(head)
        except TypeError:
            value = None
    for attr in rest.split(".") if rest else []:
        value = getattr(value, attr, None)
    yield from _tensors(value)


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _accepts(sig: inspect.Signature | None, arg: str) -> bool:
    """Whether a forward of ``sig`` can receive argument ``arg`` (``*``, an unknown signature, ``**kwargs``: yes)."""
    if arg == "*" or sig is None:
        return True
    params = sig.parameters
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()):
        return True
    return arg.partition(".")[0] in params


def check_dims(regions: list[tuple[str, Settings, inspect.Signature | None]]) -> None:
    """Every ``dims`` entry must name an argument of some region it applies to (as a rule's glob must match
    a module): one that names nothing would mark nothing, silently. Defaults' dims apply to every region,
    so an entry only one region has is fine."""
    for arg in dict.fromkeys(d.arg for _p, s, _sig in regions for d in s.dims or []):
        users = [(p, sig) for p, s, sig in regions if any(d.arg == arg for d in s.dims or [])]
        if not any(_accepts(sig, arg) for _p, sig in users):
            path, sig = users[0]
            names = ", ".join(n for n in (sig.parameters if sig else {}) if n != "self") or "none"
            raise ConfigError(f"{arg.partition('.')[0]!r} is not an argument of {path or 'the model'}'s forward "
                              f"(its arguments: {names}); use one of them or '*'", field=f"dims[{arg}].arg")


def _tensors(v: Any) -> Iterator[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _tensors(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _tensors(x)
    elif dataclasses.is_dataclass(v) and not isinstance(v, type):  # a batch object (recstack's RawBatch)
        for f in dataclasses.fields(v):
            yield from _tensors(getattr(v, f.name))


@dataclass
class CompiledRegion:
    region: Region
    module: nn.Module
    eager_forward: Any  # the instance attribute ``forward`` before (None: the class's)
    compiled_forward: Callable[..., Any]
    code: Any = None  # the code object torch compiles (recompile limits count per code object)
    notes: list[str] = field(default_factory=list)


def _compile_kwargs(s: Settings) -> dict[str, Any]:
    kw: dict[str, Any] = {"backend": s.backend, "fullgraph": bool(s.fullgraph),
                          "dynamic": None if s.dynamic == "auto" else s.dynamic}
    if s.mode and s.mode != "default":
        if s.backend != "inductor":
            raise ConfigError(f"mode {s.mode!r} needs backend inductor (got {s.backend!r})", field="mode")
        kw["mode"] = s.mode
    if s.options:
        if s.backend != "inductor":
            raise ConfigError(f"options {sorted(s.options)} need backend inductor (got {s.backend!r})", field="options")
        if "mode" in kw:
            raise ConfigError("torch.compile takes mode or options, not both: drop one", field="options")
        kw["options"] = dict(s.options)
    return kw


def _wrap(path: str, s: Settings, fn: Callable[..., Any], sig: inspect.Signature | None) -> Callable[..., Any]:
    """The region's forward: mark dynamic dims on the inputs, name the region for the observer, call ``fn``."""
    marks = []
    for d in s.dims or []:
        m = _marker(d.how)
        if isinstance(m, str):
            raise ConfigError(m, field=f"dims[{d.arg}].how")
        marks.append((d, m))
    stance = torch.compiler.set_stance if s.on_recompile == "fail" else None
    calls = [0]  # after the first call there is a cache entry: fail_on_recompile then means no new ones

    def forward(*args: Any, **kwargs: Any) -> Any:
        for d, mark in marks:
            for t in _select(sig, args, kwargs, d):
                if t.dim() > d.dim:
                    mark(t, d.dim)
        token = CURRENT_REGION.set(path)
        try:
            calls[0] += 1
            if stance is not None and calls[0] > 1:
                with stance("fail_on_recompile"):
                    return fn(*args, **kwargs)
            return fn(*args, **kwargs)
        except Exception as exc:
            if not hasattr(exc, "_recstack_region"):  # the innermost region the error passed through
                exc._recstack_region = path  # type: ignore[attr-defined]
            raise
        finally:
            CURRENT_REGION.reset(token)

    forward.__wrapped__ = fn  # type: ignore[attr-defined]
    return forward


class Compiled:
    """A model with a compile plan applied; the compiled forwards are active after construction."""

    def __init__(self, model: nn.Module, plan: Plan) -> None:
        self.model = model
        self.plan = plan
        self.regions: list[CompiledRegion] = []
        self.eager: list[tuple[nn.Module, Any, Callable[..., Any]]] = []
        self.active = False
        self._limit_saved: Any = None
        mods = dict(model.named_modules())
        check_dims([(r.path, r.settings, _signature(mods[r.path].forward)) for r in plan.regions])
        for r in plan.regions:
            self.regions.append(self._build(r, mods[r.path]))
        for r in plan.eager:
            mod = mods[r.path]
            self.eager.append((mod, mod.__dict__.get("forward"), torch.compiler.disable(mod.forward)))
        self.activate()

    def _build(self, r: Region, mod: nn.Module) -> CompiledRegion:
        eager_forward = mod.__dict__.get("forward")
        fwd = mod.forward
        sig = _signature(fwd)
        compiled = torch.compile(fwd, **_compile_kwargs(r.settings))
        code = getattr(getattr(type(mod), "forward", None), "__code__", None)
        return CompiledRegion(r, mod, eager_forward, _wrap(r.path, r.settings, compiled, sig), code=code)

    def recompile_limit(self) -> int | None:
        """The process-wide limit the plan asks for (torch has one; regions asking differently get the smallest)."""
        limits = [r.region.settings.recompile_limit for r in self.regions if r.region.settings.recompile_limit]
        return min(limits) if limits else None

    def activate(self) -> None:
        if self.active:
            return
        for cr in self.regions:
            cr.module.forward = cr.compiled_forward  # type: ignore[method-assign]
        for mod, _prev, disabled in self.eager:
            mod.forward = disabled  # type: ignore[method-assign]
        limit = self.recompile_limit()
        if limit is not None:
            self._limit_saved = _set_limit(limit)
        self.active = True

    def deactivate(self) -> None:
        if not self.active:
            return
        for cr in self.regions:
            _restore(cr.module, cr.eager_forward)
        for mod, prev, _d in self.eager:
            _restore(mod, prev)
        if self._limit_saved is not None:
            _set_limit(self._limit_saved)
            self._limit_saved = None
        self.active = False

    def run_eager(self, path: str) -> None:
        """Keep module ``path`` (inside a compiled region) eager from now on: compile around it."""
        mod = dict(self.model.named_modules())[path]
        self.plan.eager.append(Region(path, Settings(enabled=False), "compiled-around"))
        self.eager.append((mod, mod.__dict__.get("forward"), torch.compiler.disable(mod.forward)))
        mod.forward = self.eager[-1][2]  # type: ignore[method-assign]

    def drop(self, path: str) -> None:
        """Stop compiling region ``path`` (it runs eagerly from now on)."""
        for cr in [c for c in self.regions if c.region.path == path]:
            _restore(cr.module, cr.eager_forward)
            self.regions.remove(cr)
        self.plan.regions = [r for r in self.plan.regions if r.path != path]

    @contextlib.contextmanager
    def eager_mode(self) -> Iterator[None]:
        was = self.active
        self.deactivate()
        try:
            yield
        finally:
            if was:
                self.activate()

    def shared_budgets(self) -> list[dict[str, Any]]:
        """Regions whose forwards are one code object: torch's recompile limit counts them together."""
        by_code: dict[Any, list[str]] = {}
        for cr in self.regions:
            key = cr.code if cr.code is not None and not _is_builtin(cr.module) else ("builtin-module-wrapper",)
            by_code.setdefault(key, []).append(cr.region.path or "<model>")
        return [{"regions": paths, "why": "one code object (same class forward, or torch's shared wrapper of "
                 "built-in nn modules): one recompile budget"} for paths in by_code.values() if len(paths) > 1]

    def describe(self) -> dict[str, Any]:
        return {
            "mode": "none" if not self.regions else ("whole-model" if self.plan.whole_model else "regional"),
            "regions": [{"path": cr.region.path or "<model>", "module_path": cr.region.path, "rule": cr.region.rule,
                         "settings": cr.region.settings.model_dump(mode="json", exclude_none=True)}
                        for cr in self.regions],
            "eager_inside": [r.path for r in self.plan.eager],
            "recompile_limit": self.recompile_limit(),
            "shared_recompile_budgets": self.shared_budgets(),
        }


def _is_builtin(mod: nn.Module) -> bool:
    return type(mod).__module__.startswith("torch.nn")


def _restore(mod: nn.Module, previous: Any) -> None:
    if previous is None:
        mod.__dict__.pop("forward", None)
    else:
        mod.forward = previous  # type: ignore[method-assign]


def _set_limit(limit: int) -> int | None:
    """Set dynamo's recompile limit (``recompile_limit``, formerly ``cache_size_limit``); return the old one."""
    cfg = torch._dynamo.config
    name = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
    old = getattr(cfg, name, None)
    setattr(cfg, name, limit)
    return old


def region_of_path(plan: Plan, path: str) -> str | None:
    """The compiled region containing module ``path`` (itself or an ancestor), or None."""
    for r in plan.regions:
        if r.path == WHOLE or path == r.path or path.startswith(r.path + "."):
            return r.path
    return None


__all__ = ["Compiled", "CompiledRegion", "region_of_path"]
