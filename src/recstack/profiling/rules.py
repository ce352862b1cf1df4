"""Stage detection: which stage each module belongs to, and which rule said so.

Rules, first match wins, for every module from the root down:

1. user rules (a rules YAML: ``rules: [{match: "<glob on module path>", stage: <stage>}]``);
2. module types: embedding tables and collections (nn.EmbeddingBag/Embedding,
   TorchRec EmbeddingBagCollection/EmbeddingCollection and their fused and
   sharded forms, FBGEMM table-batched kernels) -> embedding; recurrent and
   attention layers (nn.GRU/LSTM/RNN and their cells, nn.MultiheadAttention,
   transformer layers, and classes whose name says Attention/GRU/RNN/LSTM/
   Transformer/Interest/HSTU, the zoo's transformer and HSTU blocks) -> sequence; DCN cross layers
   (LowRankCrossNet, TorchRec's CrossNet family), FM layers, in-batch dot-product scoring and classes
   named *Interaction*/FM/Cross -> interaction;
   feature-processing classes (recstack's FeatureProcessing, KJT transforms) -> feature_processing;
3. name hints on the module's own name (``sparse_arch``, ``dense_arch``,
   ``inter_arch``, ``over_arch``, ``tower``, ``attention``, ...);
4. an unnamed stack of Linear layers is ``dense``, except the last such stack the
   forward pass runs at the top level, which is the ``head``.

The outermost module that matches is the *stage root*; its descendants inherit
its stage (``rule: inherited``) unless a user rule places them elsewhere, in
which case they become a nested stage root and their time is taken out of the
outer stage. Modules that match nothing stay unassigned; work they do outside
any stage root is ``other``.

A stage root must run to be a timing boundary. Containers (``nn.ModuleDict``,
``nn.ModuleList``, or any module whose own ``forward`` the model never calls)
match rules by name but never run: the model calls their elements directly.
:func:`hand_down_roots` takes the modules a warm-up step saw run and passes a
never-run root's role to its outermost descendants of the same stage that did
run (``rule: inherited-from:<root> (container never ran)``); together they form
one stage.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recstack.zoo import archs

if TYPE_CHECKING:  # torch loads when a model is inspected (the trace importer reads names only)
    from pathlib import Path

    from torch import nn

    from recstack.profiling.dataflow import Flow
    from recstack.profiling.stage_rules import StageRule, StageRules, load_stage_rules  # noqa: F401


_EMBEDDING_TYPES = (
    "EmbeddingBag",
    "Embedding",
    "EmbeddingBagCollection",
    "EmbeddingCollection",
    "FusedEmbeddingBagCollection",
    "FusedEmbeddingCollection",
    "ShardedEmbeddingBagCollection",
    "ShardedEmbeddingCollection",
    "QuantEmbeddingBagCollection",
    "QuantEmbeddingCollection",
    "SplitTableBatchedEmbeddingBagsCodegen",
    "IntNBitTableBatchedEmbeddingBagsCodegen",
    "DenseTableBatchedEmbeddingBagsCodegen",
    "TorchEmbeddings",
    "TorchRecEmbeddings",
    "TBEEmbeddings",
)
_SEQUENCE_TYPES = (
    "GRU",
    "LSTM",
    "RNN",
    "GRUCell",
    "LSTMCell",
    "RNNCell",
    "MultiheadAttention",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "Transformer",
)
_SEQUENCE_WORDS = ("attention", "gru", "rnn", "lstm", "transformer", "interest", "activationunit", "sequence")
# Interaction layers by type, linear stacks or not (DCNv2 cross layers are Linear layers; TorchRec's own kinds too).
_INTERACTION_TYPES = (
    "LowRankCrossNet",
    "CrossNet",
    "LowRankMixtureCrossNet",
    "VectorCrossNet",
    "InteractionDCNArch",
    "InteractionArch",
    "FactorizationMachine",
)
# The zoo's own layer types and words come from its architecture records (recstack.zoo.archs.Arch.stage_types).
_INTERACTION_WORDS = ("interaction", "crossnet", "fm", "gmf", "dotproduct")
_FEATURE_TYPES = ("FeatureProcessing", "FeatureProcessor", "PositionWeightedModule", "KJTTransform")

_NAME_HINTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("feature_processing", ("feature_processing", "feature_processor", "preproc", "preprocess", "fp_")),
    ("embedding", ("sparse_arch", "embedding", "embeddings", "ebc", "tables", "sparse")),
    ("interaction", ("inter_arch", "interaction", "gmf", "fm", "cross", "crossnet")),
    ("sequence", ("attention", "interest", "seq", "sequence", "gru", "rnn", "lstm", "transformer", "encoder")),
    ("head", ("over_arch", "top", "top_mlp", "head", "heads", "tower", "towers", "task", "output", "predict")),
    ("dense", ("dense_arch", "bottom", "bottom_mlp", "dense", "deep", "wide", "mlp")),
)


def rules_of(source: str | Path | dict[str, Any] | StageRules | None) -> StageRules | None:
    """A run's stage rules (``RunConfig.stage_rules``): a YAML file, inline rules (a dict), loaded rules or
    none; the one place they are resolved, errors naming the file (or ``stage_rules``) and the field. The
    pydantic models (:mod:`recstack.profiling.stage_rules`) load only when there are rules to read."""
    if source is None:
        return None
    from recstack.config.loading import parse_config
    from recstack.profiling.stage_rules import StageRules, load_stage_rules

    if isinstance(source, StageRules):
        return source
    if isinstance(source, dict):
        return parse_config(StageRules, source, source="stage_rules")
    return load_stage_rules(source)


@dataclass
class Placement:
    stage: str | None
    rule: str
    root: bool  # True for a stage root (its own timing boundary)
    evidence: dict[str, Any] | None = None  # why (dataflow: the op, its inputs; the name/type hint), for roots


@dataclass
class StageMap:
    """Module path -> placement; ``roots`` lists stage roots in module order."""

    placements: dict[str, Placement] = field(default_factory=dict)

    @property
    def roots(self) -> list[str]:
        return [p for p, pl in self.placements.items() if pl.root]

    def stage_of(self, path: str) -> str | None:
        pl = self.placements.get(path)
        return pl.stage if pl else None


def _is_linear_stack(mod: nn.Module) -> bool:
    from torch import nn

    kids = list(mod.modules())
    linears = sum(isinstance(m, nn.Linear) for m in kids)
    if linears == 0:
        return False
    allowed = (nn.Linear, nn.ReLU, nn.Sigmoid, nn.Tanh, nn.GELU, nn.SiLU, nn.Dropout, nn.LayerNorm,
               nn.BatchNorm1d, nn.Sequential, nn.ModuleList, nn.PReLU, nn.LeakyReLU, nn.Identity)
    return all(isinstance(m, allowed) or m is mod or type(m).__name__ in ("MLP", "Perceptron", "SwishLayerNorm")
               for m in kids)


def _type_rule(mod: nn.Module) -> tuple[str, str] | None:
    from torch import nn

    return _type_rule_by_name(
        type(mod).__name__, lambda: _is_linear_stack(mod),
        embedding=isinstance(mod, (nn.EmbeddingBag, nn.Embedding)),
        sequence=isinstance(mod, (nn.RNNBase, nn.RNNCellBase, nn.MultiheadAttention)))


def _type_rule_by_name(tname: str, linear_stack: Callable[[], bool], *, embedding: bool = False,
                       sequence: bool = False) -> tuple[str, str] | None:
    """The type rule on a class name (``embedding``/``sequence``: the class derives from one of those types)."""
    if tname in _FEATURE_TYPES:
        return "feature_processing", f"type:{tname}"
    if tname in _EMBEDDING_TYPES or embedding:
        return "embedding", f"type:{tname}"
    if tname in _SEQUENCE_TYPES or sequence or tname in archs.stage_types("sequence"):
        return "sequence", f"type:{tname}"
    if tname in _INTERACTION_TYPES or tname in archs.stage_types("interaction"):
        return "interaction", f"type:{tname}"
    low = tname.lower()
    if any(w in low for w in (*_SEQUENCE_WORDS, *archs.stage_words("sequence"))):
        return "sequence", f"type:{tname}"
    if any(w in low for w in _INTERACTION_WORDS) and not linear_stack():
        return "interaction", f"type:{tname}"
    return None


def _name_rule(path: str) -> tuple[str, str] | None:
    last = path.rsplit(".", 1)[-1].lower()
    for stage, hints in _NAME_HINTS:
        for h in hints:
            if last == h or (len(h) > 3 and (last.startswith(h) or last.endswith(h))):
                return stage, f"name:{last}"
    return None


_LINEAR_STACK_NAMES = frozenset({"Linear", "ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Dropout", "LayerNorm",
                                 "BatchNorm1d", "Sequential", "ModuleList", "PReLU", "LeakyReLU", "Identity",
                                 "MLP", "Perceptron", "SwishLayerNorm"})


def detect_stages_by_name(types: dict[str, str | None], rules: StageRules | None = None,
                          call_order: list[str] | None = None) -> StageMap:
    """:func:`detect_stages` for a model known only by module paths and class names (an imported trace).

    ``types``: module path -> class name (None: unknown; ``""`` is the root). Paths whose
    parents are missing get them (a container that never ran). Type rules match class
    names (a subclass of nn.EmbeddingBag with its own name is not recognised by type, only
    by name); a linear stack is a module whose known descendants are all linear-stack classes.
    """
    paths = set(types) | {""}
    for p in list(paths):
        parts = p.split(".") if p else []
        paths.update(".".join(parts[:i]) for i in range(len(parts)))
    kids: dict[str, list[str]] = {p: [] for p in paths}
    for p in sorted(paths, key=lambda q: (q.count("."), q)):
        if p:
            kids[p.rsplit(".", 1)[0] if "." in p else ""].append(p)
    order = {p: i for i, p in enumerate(call_order or [])}
    for ks in kids.values():
        ks.sort(key=lambda q: (order.get(q, len(order)), q))

    def subtree(p: str) -> list[str]:
        out = [p]
        for k in kids[p]:
            out.extend(subtree(k))
        return out

    def linear_stack(p: str) -> bool:
        names = [types.get(q) for q in subtree(p)]
        return "Linear" in names and all(n in _LINEAR_STACK_NAMES for n in names if n is not None and n != "")

    def type_rule(p: str) -> tuple[str, str] | None:
        tname = types.get(p)
        return _type_rule_by_name(tname, lambda: linear_stack(p)) if tname else None

    def children(p: str) -> list[tuple[str, str]]:
        return [(k.rsplit(".", 1)[-1], k) for k in kids[p]]

    return _place(children, type_rule, linear_stack, rules, call_order)


def detect_stages(model: nn.Module, rules: StageRules | None = None, call_order: list[str] | None = None,
                  flow: Flow | None = None) -> StageMap:
    """Place every module of ``model`` in a stage. ``call_order``: module paths in the order forward first ran them
    (any depth; the last-linear-stack rule looks only at the stacks it found). ``flow``: what one traced step
    computed (:func:`recstack.profiling.dataflow.trace_stages`); without it, types and names decide."""
    mods: dict[str, nn.Module] = {"": model}  # every path, a module shared by two paths under both

    def add(path: str, mod: nn.Module) -> None:
        for n, c in mod.named_children():
            q = f"{path}.{n}" if path else n
            mods[q] = c
            add(q, c)

    add("", model)

    def children(p: str) -> list[tuple[str, str]]:
        return [(n, f"{p}.{n}" if p else n) for n, _ in mods[p].named_children()]

    return _place(children, lambda p: _type_rule(mods[p]), lambda p: _is_linear_stack(mods[p]), rules, call_order,
                  flow)


def _flow_placement(flow: Flow, path: str, hint: tuple[str, str] | None) -> Placement | None:
    """The dataflow verdict on ``path`` as a placement; None where it saw no evidence (names and types decide).

    One strong kind (embedding, interaction, sequence) decides whatever the names say. Mixed: no stage (the
    children are placed one by one). Layers placed by position only (not feeding an interaction, not after one)
    give way to a sequence, dense or head hint (a recurrent cell run step by step shows only its layers;
    ``over_arch`` after a DIN's attention pooling is the head); towers whose outputs meet later stay dense.
    """
    v = flow.verdict(path)
    if v is None:
        return None
    ev = v.as_dict(hint)
    if v.mixed:
        return Placement(None, "dataflow:mixed", root=False, evidence=ev)
    assert v.stage is not None
    if not v.firm and hint is not None and hint[0] in ("sequence", "dense", "head") and hint[0] != v.stage:
        ev.update(basis="name or type",
                  why=f"layers only ({v.stage} by their place in the dataflow); the module's {hint[1]} says {hint[0]}")
        return Placement(hint[0], hint[1], root=True, evidence=ev)
    return Placement(v.stage, f"dataflow:{v.stage}", root=True, evidence=ev)


def _place(children: Callable[[str], list[tuple[str, str]]], type_rule: Callable[[str], tuple[str, str] | None],
           linear_stack: Callable[[str], bool], rules: StageRules | None, call_order: list[str] | None,
           flow: Flow | None = None) -> StageMap:
    """The placement walk shared by :func:`detect_stages` and :func:`detect_stages_by_name`."""
    smap = StageMap()
    user = rules.rules if rules else []
    top_linear_stacks: list[str] = []

    def visit(path: str, inherited: str | None) -> None:
        placement: Placement | None = None
        for r in user:
            if path and fnmatch.fnmatchcase(path, r.match):
                placement = Placement(r.stage, f"user:{r.match}", root=r.stage != inherited,
                                      evidence={"basis": "user rule", "why": f"the user rule {r.match!r} says so"})
                break
        if placement is None and inherited is not None:
            placement = Placement(inherited, "inherited", root=False)
        hit = (type_rule(path) or _name_rule(path)) if placement is None and path else None
        if placement is None and path and flow is not None:
            placement = _flow_placement(flow, path, hit)
        if placement is None and path:
            if hit is None and linear_stack(path):
                top_linear_stacks.append(path)
                hit = ("dense", "type:linear-stack")
            if hit is not None:
                placement = Placement(hit[0], hit[1], root=True, evidence={"basis": "name or type", "why": (
                    "no op with dataflow evidence ran in it" if flow is not None else "no dataflow trace")})
        if placement is None:
            placement = Placement(None, "unassigned", root=False)
        smap.placements[path] = placement
        for _name, child in children(path):
            visit(child, placement.stage)

    visit("", None)
    # The last top-level linear stack the forward pass runs is the head.
    if top_linear_stacks:
        order = [p for p in (call_order or []) if p in top_linear_stacks]
        last = order[-1] if order else None
        has_head = any(pl.stage == "head" for pl in smap.placements.values())
        if last is not None and not has_head:
            smap.placements[last] = Placement("head", "order:last-linear-stack", root=True)
            for p, pl in smap.placements.items():
                if p.startswith(last + ".") and pl.rule == "inherited":
                    pl.stage = "head"
    return smap


@dataclass
class NeverRanRoot:
    """A stage root whose forward never ran in the warm-up step, and the descendants that took its role."""

    stage: str
    rule: str
    handed_to: list[str]


def hand_down_roots(smap: StageMap, ran: list[str] | set[str]) -> dict[str, NeverRanRoot]:
    """Give each stage root that never ran a root role on its outermost running descendants of its stage.

    ``ran``: module paths whose forward ran in the warm-up step. A descendant
    qualifies when it ran, is in the root's stage by inheritance, and no module
    between it and the root ran (that module would be the heir instead).
    Nested roots of other stages keep their own role. Updates ``smap`` in
    place (heirs become roots, the container stops being one) and returns the
    never-run roots, outermost first.
    """
    ran_set = set(ran)
    never: dict[str, NeverRanRoot] = {}
    for path in smap.roots:
        pl = smap.placements[path]
        if path in ran_set or pl.stage is None:
            continue
        prefix = path + "." if path else ""
        heirs: list[str] = []
        for p, q in smap.placements.items():
            if not p.startswith(prefix) or p not in ran_set or q.stage != pl.stage or q.root:
                continue
            between = p[len(prefix):].split(".")[:-1]
            ancestors = [prefix + ".".join(between[: i + 1]) for i in range(len(between))]
            if any(a in ran_set or smap.placements[a].root for a in ancestors):
                continue
            heirs.append(p)
        for h in heirs:
            smap.placements[h] = Placement(pl.stage, f"inherited-from:{path} (container never ran)", root=True,
                                           evidence=pl.evidence)
        pl.root = False
        never[path] = NeverRanRoot(stage=pl.stage, rule=pl.rule, handed_to=heirs)
    return never


def __getattr__(name: str) -> Any:
    """``StageRule``, ``StageRules``, ``load_stage_rules``: the pydantic models load when first used (the
    trace importer, given no rules file, never builds them: ~0.1 s of start-up)."""
    if name in ("StageRule", "StageRules", "load_stage_rules"):
        from recstack.profiling import stage_rules

        return getattr(stage_rules, name)
    raise AttributeError(f"module 'recstack.profiling.rules' has no attribute {name!r}")
