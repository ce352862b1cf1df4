"""The zoo's architectures: one record each (model class, footprint hooks, correlate features, stage hints).

A zoo model's YAML names its ``arch``; everything the rest of recstack knows about that architecture is its
:class:`Arch` record. The ten built-in records are :data:`BUILTIN_ARCHS` below (their model classes live in
:mod:`recstack.zoo.models`). A new architecture is one more module in this package,
``recstack/zoo/archs/NAME.py``, holding its model class and ``ARCH = Arch(name="NAME", ...)``: the file's name
joins the config's ``arch`` choices, and the module is imported only when its record is needed (building,
footprint, correlate, the profiler's type rules), so validating a config, ``zoo list`` and the CLI's startup
need no torch. Classes and hooks are named ``"module:attribute"`` for the same reason.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# Types below are Any where they would be the zoo's config, layers or footprint: those modules read this registry.
ModelConfig = Table = Lengths = StageActs = RecModel = Any


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Arch:
    """One architecture: what building, the footprint model, correlate and the profiler's rules need of it."""

    name: str
    model: str
    """``module:Class`` of its :class:`~recstack.zoo.models.RecModel` subclass (built as ``Class(cfg, backend)``)."""
    activations: str
    """``module:function`` ``(cfg, tables, lengths) -> [StageActs]``: the footprint's stages after embedding."""
    interaction: str | None = "concat"
    """correlate's interaction category (concat, dot, dcn, fm, gmf, dot-product); None: the config's ``interaction``."""
    attention: bool = False
    """correlate feature: attends over a behaviour sequence."""
    recurrent: bool = False
    """correlate feature: runs a recurrent cell over the sequence."""
    sequence_length: Callable[[ModelConfig, list[Table]], float] | None = None
    """correlate's sequence length; None: the longest sequence table's pooling (0 without one)."""
    tasks: bool = False
    """has one head per task (``tasks`` in the config, ``--tasks``)."""
    embedding_out_saved: bool = False
    """footprint: the embedding stage's output is kept for backward (read again after the forward)."""
    child_stages: Mapping[str, str] = field(default_factory=dict)
    """stage of each arch-specific top-level child (the shared ``sparse_arch`` etc. are in footprint.stages)."""
    stage_types: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """stage -> class names of its own layers the profiler's type rule places there."""
    stage_words: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """stage -> lower-case words in its layers' class names the type rule places there."""

    def model_class(self) -> type:
        cls: type = _load(self.model)
        return cls

    def dense_stages(self, cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
        stages: list[StageActs] = _load(self.activations)(cfg, tables, lengths)
        return stages

    def interaction_of(self, cfg: ModelConfig) -> str:
        return str(cfg.interaction) if self.interaction is None else self.interaction

    def sequence_length_of(self, cfg: ModelConfig, tables: list[Table]) -> float:
        if self.sequence_length is not None:
            return float(self.sequence_length(cfg, tables))
        return float(max((t.pooling for t in tables if t.kind == "sequence"), default=0.0))


def _dien_steps(cfg: ModelConfig, tables: list[Table]) -> float:
    """DIEN's sequence is one pooled table per step (``behaviour_0 .. behaviour_{n-1}``)."""
    prefix = (cfg.sequence_tables or "behaviour") + "_"
    return float(sum(1 for t in tables if t.name.startswith(prefix)))


_M = "recstack.zoo.models:"
_A = "recstack.zoo.footprint.activations:"
_SEQ = MappingProxyType({"sequence": ("TransformerBlock", "BehaviourTransformer")})

BUILTIN_ARCHS: tuple[Arch, ...] = (
    Arch("dlrm", _M + "DLRM", _A + "dlrm_stages", interaction=None,
         stage_types={"interaction": ("DCNInteraction",)}),
    Arch("ncf", _M + "NCF", _A + "ncf_stages", interaction="gmf"),
    Arch("wnd", _M + "WideAndDeep", _A + "wnd_stages"),
    Arch("mtwnd", _M + "MultiTaskWideAndDeep", _A + "wnd_stages", tasks=True, child_stages={"task_towers": "head"}),
    Arch("din", _M + "DIN", _A + "din_stages", attention=True, embedding_out_saved=True,
         child_stages={"attention": "sequence"}),
    Arch("dien", _M + "DIEN", _A + "dien_stages", attention=True, recurrent=True, sequence_length=_dien_steps,
         child_stages={"interest_extractor": "sequence", "interest_evolution": "sequence"}),
    Arch("deepfm", _M + "DeepFM", _A + "deepfm_stages", interaction="fm",
         stage_types={"interaction": ("FMInteraction",)}),
    Arch("twotower", _M + "TwoTower", _A + "twotower_stages", interaction="dot-product",
         child_stages={"query_dense_arch": "dense", "candidate_dense_arch": "dense"},
         stage_types={"interaction": ("InBatchDotProduct",)}),
    Arch("bst", _M + "BST", _A + "bst_stages", attention=True, child_stages={"transformer": "sequence"},
         stage_types=_SEQ),
    Arch("hstu", _M + "HSTU", _A + "hstu_stages", interaction="dot-product", attention=True,
         child_stages={"encoder": "sequence"},
         stage_types={"sequence": ("HSTULayer", "HSTUAttentionStack"), "interaction": ("InBatchDotProduct",)},
         stage_words={"sequence": ("hstu",)}),
)
_BY_NAME = {a.name: a for a in BUILTIN_ARCHS}


def _added_names() -> list[str]:
    """Architectures added as modules of this package (by file name; nothing is imported)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


@functools.cache
def names() -> tuple[str, ...]:
    """Every architecture's name: the built-in ones in their order, then the added ones by name."""
    return (*_BY_NAME, *(n for n in _added_names() if n not in _BY_NAME))


@functools.cache
def get(name: str) -> Arch:
    """The record of architecture ``name`` (one of :func:`names`; an added one's module is imported now)."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name not in names():
        raise KeyError(f"unknown architecture {name!r}; the architectures are {', '.join(names())}")
    record = importlib.import_module(f"{__name__}.{name}").ARCH
    if not isinstance(record, Arch) or record.name != name:
        raise TypeError(f"{__name__}.{name}.ARCH must be an Arch named {name!r}")
    return record


def all_archs() -> tuple[Arch, ...]:
    return tuple(get(n) for n in names())


@functools.cache
def stage_types(stage: str) -> frozenset[str]:
    """Class names of the zoo's own layers that the profiler's type rule places in ``stage``."""
    return frozenset(t for a in all_archs() for t in a.stage_types.get(stage, ()))


@functools.cache
def stage_words(stage: str) -> tuple[str, ...]:
    """Lower-case words of the zoo's own layer class names that place a layer in ``stage``."""
    return tuple(w for a in all_archs() for w in a.stage_words.get(stage, ()))


@functools.cache
def child_stages() -> Mapping[str, str]:
    """Stage of every arch-specific top-level child name."""
    return MappingProxyType({k: v for a in all_archs() for k, v in a.child_stages.items()})
