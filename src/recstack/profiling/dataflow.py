"""Stages from dataflow: classify modules by what flows through their ops in one forward step.

One forward runs under :class:`StageFlow`, a :class:`recstack.tagmode.TagMode` (the same
per-storage tag propagation the request-sharing analysis uses). Tags are bit sets:
one *origin* bit per batch input tensor and one per embedding lookup (each lookup
call: two features sharing a table are two origins), and four flags:

* ``SEQ``: derived from a lookup indexed by a ``[batch, L]`` index with ``L > 1``
  (a behaviour sequence), from unpooled rows (``FLAT``) padded to ``[batch, L, D]``,
  or given to a recurrent module. A value is *sequence-shaped* when it carries ``SEQ``
  and one of its axes has such a length ``L`` (pooling over the time axis removes it).
  IDs of several fields offset into one table (``ids + offsets``, ``FIELDS``) are
  fields, not a sequence, and count as several features;
* ``DEEP``: has passed through a layer (a matrix product or convolution with a
  parameter operand);
* ``MET``: derived from an interaction op (features have met);
* ``JOIN``: a concatenation of two or more separately processed streams (values
  that each passed through layers, from different lookups).

Every op gets the union of its inputs' tags and is classed by what flows into it:

* **embedding**: ``embedding``/``embedding_bag``/``index_select``/``index`` (or an
  FBGEMM embedding op) reading a parameter table by index;
* **sequence**: a recurrent op (GRU/LSTM/RNN); or a product, a layer, a layer norm
  or a softmax on a sequence-shaped value (attention over positions, per-position layers);
* **interaction** (only where the operands carry several features' vectors): a
  contraction (``bmm``/``mm``/``matmul``/attention) of two values derived from lookups,
  none a parameter (DLRM's pairwise dots, attention over
  fields, cross layers' ``x0 . (W x)``, inner products); an elementwise product of
  lookup-derived values from different lookups, or with one not yet through a layer
  (FM, CIN's outer products, cross layers; a gate multiplying a stream by a function
  of itself is not one); the square of a sum of several features' raw vectors (FM);
  the first layer over a ``JOIN`` (a fusion of two streams); and a layer whose input
  has met and whose output feeds another interaction op (CIN's compressions, AFM's
  attention weights);
* **layers** (weak evidence): any other layer. After the step, a layer whose input
  has met is *head*, a layer on the model output's path with no layer or strong op
  after it is *final*; others are *dense*.

A module's verdict sums its subtree's ops: one strong kind (embedding, interaction,
sequence) decides; two or more make it *mixed* (no stage of its own: its children are
placed one by one); with layers only it is *head* when a layer in it is head, or when
it holds a final layer and its own input came out of another layer; otherwise *dense*.
Each verdict keeps its evidence: the first op of the deciding kind, the module it ran
in, a description of its inputs, and the op counts by kind.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from recstack.tagmode import TagMode, tensor_key, walk

SEQ, DEEP, MET, JOIN, FLAT, FIELDS = 1, 2, 4, 8, 16, 32
_FLAGS = SEQ | DEEP | MET | JOIN | FLAT | FIELDS
STRONG = ("embedding", "interaction", "sequence")

_LOOKUPS = frozenset({"aten::embedding", "aten::embedding_bag", "aten::_embedding_bag",
                      "aten::_embedding_bag_forward_only", "aten::index_select", "aten::index"})
_LAYERS = frozenset({"aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::addmv",
                     "aten::mv", "aten::convolution", "aten::_convolution", "aten::linear", "aten::mkldnn_convolution"})
_CONTRACTIONS = frozenset({"aten::bmm", "aten::mm", "aten::matmul", "aten::baddbmm", "aten::addbmm", "aten::addmm",
                           "aten::dot", "aten::vdot", "aten::mv", "aten::linalg_vecdot",
                           "aten::_scaled_dot_product_attention_math",
                           "aten::_scaled_dot_product_flash_attention_for_cpu",
                           "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
                           "aten::_scaled_dot_product_cudnn_attention", "aten::_native_multi_head_attention"})
_PRODUCTS = frozenset({"aten::mul", "aten::mul_"})
_SQUARES = frozenset({"aten::pow", "aten::square"})
_PER_POSITION = frozenset({"aten::native_layer_norm", "aten::_softmax", "aten::_log_softmax"})
_JOINS = frozenset({"aten::cat", "aten::stack"})
_PADDING = ("index_put", "scatter", "padded", "pad_sequence")  # ops that lay flat rows out as [batch, L, D]
_RECURRENT = ("aten::gru", "aten::lstm", "aten::rnn_tanh", "aten::rnn_relu", "aten::_thnn_fused_gru_cell",
              "aten::_thnn_fused_lstm_cell", "aten::quantized_gru", "aten::quantized_lstm", "aten::mkldnn_rnn")


@dataclass
class Evidence:
    """One op that says which stage its module is in."""

    stage: str
    op: str
    module: str
    inputs: list[str]
    why: str
    layer: int | None = None  # a layer op's id (its stage is settled after the step)
    met: bool = False  # a layer whose input has met
    final: bool = False  # a layer on the output's path with nothing after it
    feeds: bool = False  # a layer whose output reaches an interaction op

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, "module": self.module or "<model>", "inputs": list(self.inputs), "why": self.why}


@dataclass
class Verdict:
    """What a module's subtree computes: its stage (None: mixed or no evidence) and why."""

    stage: str | None
    strong: bool
    counts: dict[str, int]
    evidence: Evidence | None = None
    firm: bool = True  # False: layers placed by position only (a name or type hint may say otherwise)

    @property
    def mixed(self) -> bool:
        return self.stage is None and sum(self.counts.get(s, 0) > 0 for s in STRONG) > 1

    def as_dict(self, hint: tuple[str, str] | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {"basis": "dataflow", "ops_by_stage": dict(self.counts)}
        if self.evidence is not None:
            d.update(self.evidence.as_dict())
        if hint is not None:
            d["hint"] = f"{hint[1]} -> {hint[0]}"
        return d


@dataclass
class OpRecord:
    """One op of the traced step, for attributing the model's own code (:mod:`recstack.profiling.modelcode`)."""

    name: str
    module: str  # the innermost running module ("": the model's own code)
    method: str | None  # the module's own method it ran in (not ``forward``), for non-leaf modules
    reads: list[int]  # storage keys of its inputs (parameters and buffers left out)
    writes: list[int]  # storage keys of its outputs
    evidence: Evidence | None  # what the op says about its stage (a layer's is settled by Flow.finish)


@dataclass
class Flow:
    """Evidence of one traced step, per innermost module path (``""``: the model's own code)."""

    ops: dict[str, list[Evidence]] = field(default_factory=dict)
    after_layer: dict[str, bool] = field(default_factory=dict)
    seq_input: dict[str, bool] = field(default_factory=dict)  # a module given a sequence-shaped value
    methods: dict[tuple[str, str], list[Evidence]] = field(default_factory=dict)  # (module, own method) -> ops
    ran: list[str] = field(default_factory=list)
    log: list[OpRecord | str] = field(default_factory=list)  # every op, and every module entry (its path), in order

    def _subtree(self, path: str) -> list[Evidence]:
        if not path:
            return [e for evs in self.ops.values() for e in evs]
        pre = path + "."
        return [e for p, evs in self.ops.items() if p == path or p.startswith(pre) for e in evs]

    @staticmethod
    def _entry(flags: dict[str, bool], path: str) -> bool:
        """``flags[path]``; for a module that never ran (a container), any of its descendants'."""
        if path in flags:
            return flags[path]
        pre = path + "."
        return any(v for p, v in flags.items() if p.startswith(pre))

    def verdict(self, path: str) -> Verdict | None:
        """The stage the ops of ``path``'s subtree show, or None where it ran no op with evidence."""
        evs = self._subtree(path)
        if not evs:
            return None
        counts: dict[str, int] = {}
        for e in evs:
            counts[e.stage] = counts.get(e.stage, 0) + 1
        if counts.get("interaction") and path and self._entry(self.seq_input, path):
            # products inside a module given a behaviour sequence (a recurrent cell gated by attention scores)
            first = next(e for e in evs if e.stage == "interaction")
            n = counts.pop("interaction")
            counts["sequence"] = counts.get("sequence", 0) + n
            evs = [Evidence("sequence", first.op, first.module, first.inputs,
                            f"{first.why}, inside a module whose input is a behaviour sequence")
                   if e is first else e for e in evs if e.stage != "interaction" or e is first]
        strong = [s for s in STRONG if counts.get(s)]
        if len(strong) == 1:
            return Verdict(strong[0], True, counts, next(e for e in evs if e.stage == strong[0]))
        if strong:
            return Verdict(None, True, counts)
        head = next((e for e in evs if e.stage == "head"), None)
        if head is None and self._entry(self.after_layer, path):
            head = next((e for e in evs if e.final), None)
            if head is not None:
                head = Evidence("head", head.op, head.module, head.inputs,
                                "the last layer before the model's output, and the module's input came out of "
                                "another layer")
        if head is not None:
            return Verdict("head", False, counts, head, firm=head.met)
        meets = next((e for e in evs if e.feeds), None)  # a layer whose output meets other features later
        if meets is not None:
            return Verdict("dense", False, counts, Evidence(
                "dense", meets.op, meets.module, meets.inputs,
                "a layer on features before they meet (its output feeds an interaction)"))
        return Verdict("dense", False, counts, evs[0], firm=False)


class StageFlow(TagMode):
    """Tags lookups, sequences, layers and interactions through one forward (module docstring)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__(model)
        self.tables = {tensor_key(p): n for n, p in model.named_parameters()}
        self.tables.update({tensor_key(b): n for n, b in model.named_buffers() if b.dim() >= 1})
        self.names: dict[int, str] = {}  # origin bit -> what it is
        self.lookups = 0  # mask of lookup origin bits
        self.raw = 0  # mask of raw bits: each lookup's second bit, cleared by the first layer a value passes
        self.seq_lens: set[int] = set()
        self._next = _FLAGS + 1
        self._layers: dict[int, frozenset[int]] = {}  # storage -> layer ops since the last strong op
        self._layer_ev: list[Evidence] = []
        self._feeds: set[int] = set()  # layer ops whose output reached an interaction op
        self._layer_in: dict[int, frozenset[int]] = {}  # layer op -> the layer ops its input came out of
        self.flow = Flow()
        self._ran: set[str] = set()
        self._recurrent = {p: type(m).__name__ for p, m in model.named_modules() if isinstance(m, nn.RNNBase)}
        self._cells = {p: type(m).__name__ for p, m in model.named_modules() if isinstance(m, nn.RNNCellBase)}
        self._modules = dict(model.named_modules())
        self._parents = {p for p, m in self._modules.items() if next(m.children(), None) is not None}
        self._evidence: Evidence | None = None  # the running op's, if it recorded one

    # -- origins -------------------------------------------------------------------------------
    def _origin(self, name: str) -> int:
        bit = self._next
        self._next <<= 1
        self.names[bit] = name
        return bit

    def tag_inputs(self, batch: Any) -> None:
        """One origin per tensor of the batch (tuples, lists, dicts, dataclasses and plain objects' fields)."""
        for path, t in _tensors(batch):
            self.set_tag(t, self._origin("input" + "".join(f"[{p!r}]" for p in path)))

    # -- module tracking -----------------------------------------------------------------------
    def on_enter(self, path: str, args: Any, kwargs: Any) -> Any:
        given = [t for _, t in walk((args, kwargs))]
        if path in self._recurrent and given:
            self._recurrent_input(path, given[0])
        if path in self._cells and given:
            self._record(Evidence("sequence", f"{self._cells[path]} (module)", path,
                                  [self.describe(given[0], self.tag_of(given[0]))], "a recurrent cell (one time step)"))
        after = any(self._layers.get(tensor_key(t)) for t in given)
        self.flow.after_layer[path] = self.flow.after_layer.get(path, False) or after
        seq = any(self._seq_shaped(t, self.tag_of(t)) for t in given)
        self.flow.seq_input[path] = self.flow.seq_input.get(path, False) or seq
        if path not in self._ran:
            self._ran.add(path)
            self.flow.ran.append(path)
        self.flow.log.append(path)
        return None

    def _recurrent_input(self, path: str, x: torch.Tensor) -> None:
        """A recurrent layer's input is a sequence (its time axis: dim 1 batch first, else dim 0)."""
        mod = self.model.get_submodule(path)
        if x.dim() < 2:
            return
        steps = int(x.shape[1] if getattr(mod, "batch_first", False) or x.dim() == 2 else x.shape[0])
        if steps > 1:
            self.seq_lens.add(steps)
        tag = self.tag_of(x)
        self.set_tag(x, tag | SEQ)
        self._record(Evidence("sequence", f"{self._recurrent[path]} (module)", path, [self.describe(x, tag | SEQ)],
                              f"a recurrent layer over a sequence of {steps} steps"))

    # -- description ---------------------------------------------------------------------------
    def _seq_shaped(self, t: torch.Tensor, tag: int) -> bool:
        return bool(tag & SEQ) and t.dim() >= 2 and any(s in self.seq_lens for s in t.shape)

    def describe(self, t: torch.Tensor, tag: int) -> str:
        """``[shape] from <origins>`` with the flags that matter (sequence, after a layer, features met)."""
        names: list[str] = []
        for bit, name in self.names.items():
            if tag & bit and name and name not in names:
                names.append(name)
        what = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "") if names else "constants"
        flags = [w for f, w in ((SEQ, "sequence"), (DEEP, "after a layer"), (MET, "features met")) if tag & f]
        if tag & SEQ and not self._seq_shaped(t, tag):
            flags.remove("sequence")
        return f"{list(t.shape)} from {what}" + (f" ({', '.join(flags)})" if flags else "")

    def _record(self, ev: Evidence) -> None:
        self._evidence = ev
        self.flow.ops.setdefault(ev.module, []).append(ev)
        method = self._method(ev.module)
        if method is not None:
            self.flow.methods.setdefault((ev.module, method), []).append(ev)

    def _method(self, path: str) -> str | None:
        """The method of module ``path`` (not ``forward``) the running op was called from, if any."""
        mod = self._modules.get(path)
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_locals.get("self") is mod:
                name = frame.f_code.co_name
                return None if name in ("forward", "_call_impl", "_wrapped_call_impl", "__call__") else name
            frame = frame.f_back
        return None

    # -- dispatch ------------------------------------------------------------------------------
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        ins = [t for _, t in walk((args, kwargs))]
        tags = [self.tag_of(t) for t in ins]
        before = [self._layers.get(tensor_key(t), frozenset()) for t in ins]
        out = func(*args, **kwargs)
        outs = [t for _, t in walk(out)]
        self._evidence = None
        try:
            tag, layers = self._classify(func._schema.name, ins, tags, before, outs)
        except Exception:  # evidence is best effort: an op it cannot read passes its inputs' tags on
            tag, layers = _union(tags), frozenset().union(*before)
        for t in outs:
            self.set_tag(t, tag)
            self._layers[tensor_key(t)] = layers
        self._log_op(func._schema.name, ins, outs)
        return out

    def _log_op(self, name: str, ins: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
        path = self.path
        method = self._method(path) if path in self._parents else None  # a leaf module's own code is forward
        reads = [k for k in map(tensor_key, ins) if k not in self.tables]
        self.flow.log.append(OpRecord(name, path, method, reads, [tensor_key(t) for t in outs], self._evidence))

    def _classify(self, name: str, ins: list[torch.Tensor], tags: list[int], before: list[frozenset[int]],
                  outs: list[torch.Tensor]) -> tuple[int, frozenset[int]]:
        """The outputs' tag and layer set; records the op's evidence where it has any."""
        is_table = [tensor_key(t) in self.tables for t in ins]
        acts = [(t, g, b) for t, g, b, p in zip(ins, tags, before, is_table, strict=True) if not p]
        union = _union(g for _, g, _ in acts)
        layers = frozenset().union(*(b for _, _, b in acts))
        vec = [(t, g) for t, g, _ in acts if g & self.lookups]
        seq = [(t, g) for t, g in vec if self._seq_shaped(t, g)]
        path = self.path

        def described() -> list[str]:  # only for ops that are evidence: describing costs a walk of the origins
            return [self.describe(t, g) for t, g, _ in acts if g][:4]

        none: frozenset[int] = frozenset()
        if self._is_lookup(name, ins, is_table):
            fbgemm = name.startswith("fbgemm::")  # its weights may be plain attributes: named by its module
            table = None if fbgemm else next(t for t, p in zip(ins, is_table, strict=True) if p and t.dim() >= 2)
            table_name = self.tables[tensor_key(table)] if table is not None else f"{path or '<model>'} (fbgemm)"
            ints = [t for t, p in zip(ins, is_table, strict=True)
                    if not p and t.dtype in (torch.int32, torch.int64) and t.dim() >= 1]
            index = max(ints, key=lambda t: t.numel()) if ints else None  # FBGEMM: indices beside offsets
            bit = self._origin(table_name)
            fields = index is not None and bool(self.tag_of(index) & FIELDS)
            if table is None or fields:  # an FBGEMM kernel's tables, or one table's fields: several features
                bit |= self._origin(table_name)
            raw = self._origin("") | (self._origin("") if bit & (bit - 1) else 0)  # as many as the origins
            tag = union & ~_FLAGS | bit | raw
            if name in ("aten::embedding", "aten::index_select", "aten::index") and index is not None \
                    and index.dim() >= 2 and index.shape[-1] > 1 and not fields:
                tag |= SEQ
                self.seq_lens.add(int(index.shape[-1]))
            elif index is not None and index.dim() == 1 and outs and outs[0].dim() == 2 \
                    and outs[0].shape[0] == index.numel() > 1:
                tag |= FLAT  # one row per ID, unpooled: a jagged sequence if it is padded to [batch, L, D] later
            self.lookups |= bit
            self.raw |= raw
            what = [f"table {table_name}" + (f" {list(table.shape)}" if table is not None else "")] + described()
            self._record(Evidence("embedding", name, path, what, "reads rows of a parameter table by index"))
            return tag, none
        if name.startswith(_RECURRENT):
            self._record(Evidence("sequence", name, path, described(), "a recurrent layer over a sequence"))
            return union | SEQ, none
        if name in _LAYERS and any(is_table) and union:
            return self._layer(name, path, union, layers, seq, vec, described)
        several = bin(_union(g for _, g in vec) & self.lookups).count("1") >= 2  # vectors of several features
        if name in _CONTRACTIONS and len(vec) >= 2 and (several or seq):
            return self._combine(name, path, union, layers, seq, described, "multiplies several features' vectors")
        if name in _PRODUCTS and len(vec) >= 2 and (several or seq):
            bits = {g & self.lookups for _, g in vec}
            if seq or len(bits) > 1 or any(g & self.raw for _, g in vec):
                return self._combine(name, path, union, layers, seq, described,
                                     "multiplies vectors of different features, or raw feature vectors with "
                                     "values derived from them")
        if name in _SQUARES and len(vec) == 1 and not seq and bin(vec[0][1] & self.raw).count("1") >= 2:
            return self._combine(name, path, union, layers, seq, described,
                                 "squares a sum of several features' vectors (a factorisation machine)")
        if name in _PER_POSITION and seq:
            self._record(Evidence("sequence", name, path, described(),
                                  "normalises or weighs each position of a behaviour sequence"))
            return union, none
        if union & FLAT and any(w in name for w in _PADDING) and outs and outs[0].dim() >= 3 \
                and outs[0].shape[1] > 1 and any(g & FLAT and t.dim() < outs[0].dim() for t, g in vec):
            self.seq_lens.add(int(outs[0].shape[1]))  # flat rows padded to [batch, L, D]: a sequence
            return union & ~FLAT | SEQ, layers
        if name in ("aten::add", "aten::add_") and self._field_offsets(ins, tags):
            return union | FIELDS, layers  # IDs of several fields shifted into one table: columns are fields
        if name in _JOINS:
            streams = {g & self.lookups for t, g in vec
                       if g & DEEP and not g & (MET | self.raw) and not self._seq_shaped(t, g)}
            if len(streams) >= 2:
                return union | JOIN, layers
        return union, layers

    @staticmethod
    def _field_offsets(ins: list[torch.Tensor], tags: list[int]) -> bool:
        """``ids [batch, F] + offsets [F]`` (constant, one per column): pytorch-fm's layout of F fields in one table."""
        if len(ins) != 2 or any(t.is_floating_point() for t in ins):
            return False
        (a, ga), (b, gb) = sorted(zip(ins, tags, strict=True), key=lambda x: -x[0].numel())
        return ga != 0 and gb == 0 and a.dim() == 2 and a.shape[1] > 1 and b.numel() == a.shape[1]

    def _is_lookup(self, name: str, ins: list[torch.Tensor], is_table: list[bool]) -> bool:
        """A read of table rows by index: an aten lookup on a parameter table, or an FBGEMM embedding kernel
        (its weights may be plain attributes, not parameters)."""
        if name.startswith("fbgemm::") and "embedding" in name and ("lookup" in name or "forward" in name):
            return True
        if name not in _LOOKUPS:
            return False
        has_table = any(p and (t.is_floating_point() or t.dtype == torch.uint8) and t.dim() >= 2
                        for t, p in zip(ins, is_table, strict=True))
        return has_table and any(not t.is_floating_point() for t, p in zip(ins, is_table, strict=True) if not p)

    def _layer(self, name: str, path: str, union: int, layers: frozenset[int], seq: list, vec: list,
               described: Callable[[], list[str]]) -> tuple[int, frozenset[int]]:
        out = union & ~JOIN & ~self.raw | DEEP
        if seq:
            self._record(Evidence("sequence", name, path, described(), "a layer over each position of a behaviour "
                                                                     "sequence"))
            return out, frozenset()
        if union & JOIN and vec:
            self._feeds.update(layers)
            self._record(Evidence("interaction", name, path, described(),
                                  "the first layer over a concatenation of separately processed streams (where "
                                  "they meet)"))
            return out | MET, frozenset()
        ev = Evidence("dense", name, path, described(), "a layer on features before they meet",
                      layer=len(self._layer_ev), met=bool(union & MET))
        self._layer_ev.append(ev)
        self._layer_in[len(self._layer_ev) - 1] = layers
        self._record(ev)
        return out, frozenset({ev.layer})

    def _combine(self, name: str, path: str, union: int, layers: frozenset[int], seq: list,
                 described: Callable[[], list[str]],
                 why: str) -> tuple[int, frozenset[int]]:
        if seq:
            lens = sorted(self.seq_lens)
            self._record(Evidence("sequence", name, path, described(),
                                  f"combines values along a behaviour sequence's time axis (length {lens})"))
            return union, frozenset()
        self._feeds.update(layers)
        self._record(Evidence("interaction", name, path, described(), why))
        return union & ~JOIN | MET, frozenset()

    def finish(self, output: Any) -> Flow:
        """Settle the layers' stages now that the output is known; the flow of the step."""
        final: set[int] = set()
        for _, t in _tensors(output):
            final |= self._layers.get(tensor_key(t), frozenset())
        todo = list(self._feeds)  # a layer feeding one that feeds an interaction feeds it too (met inputs only)
        while todo:
            lay = todo.pop()
            if self._layer_ev[lay].met:
                for up in self._layer_in.get(lay, ()):
                    if up not in self._feeds:
                        self._feeds.add(up)
                        todo.append(up)
        for ev in self._layer_ev:
            assert ev.layer is not None
            ev.final = ev.layer in final
            ev.feeds = ev.layer in self._feeds
            if ev.met and ev.layer in self._feeds:
                ev.stage, ev.why = "interaction", ("a layer inside an interaction: its input has met and its "
                                                   "output feeds another interaction op")
            elif ev.met:
                ev.stage, ev.why = "head", "a layer after features met (its input comes from an interaction)"
        return self.flow


def _union(tags: Any) -> int:
    u = 0
    for g in tags:
        u |= g
    return u


def _tensors(obj: Any, path: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[tuple[Any, ...], torch.Tensor]]:
    """Every tensor in a nest of tuples, lists, dicts, dataclasses and plain objects' fields (a
    KeyedJaggedTensor, a library's batch class), with its path; four levels deep at most."""
    if isinstance(obj, torch.Tensor):
        return [(path, obj)]
    if depth >= 4 or obj is None or isinstance(obj, (str, bytes, int, float, bool, nn.Module, type)):
        return []
    items: Any
    if isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    elif isinstance(obj, dict):
        items = obj.items()
    elif dataclasses.is_dataclass(obj):
        items = ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj))
    elif isinstance(getattr(obj, "__dict__", None), dict):
        items = vars(obj).items()
    else:
        return []
    return [x for k, v in items for x in _tensors(v, (*path, k), depth + 1)]


def trace_stages(model: nn.Module, forward: Callable[[Any], Any], batch: Any) -> Flow:
    """One forward of ``model`` on ``batch`` (``forward(batch)`` calls it) under :class:`StageFlow`."""
    mode = StageFlow(model)
    with torch.no_grad(), mode:
        mode.tag_inputs(batch)
        out = forward(batch)
    return mode.finish(out)


def try_trace_stages(model: nn.Module, forward: Callable[[Any], Any], batch: Any) -> Flow | None:
    """:func:`trace_stages`, or None (with a warning) where the model cannot run under the mode."""
    try:
        return trace_stages(model, forward, batch)
    except Exception as exc:  # the user's model, under a dispatch mode: anything may fail; names still work
        warnings.warn(f"stages: the dataflow trace failed ({type(exc).__name__}: {exc}); stages come from module "
                      "types and names", stacklevel=2)
        return None


__all__ = ["DEEP", "JOIN", "MET", "SEQ", "STRONG", "Evidence", "Flow", "OpRecord", "StageFlow", "Verdict", "trace_stages", "try_trace_stages"]
