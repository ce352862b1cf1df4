"""The model's own code, attributed by what its ops compute: ``[model code]`` under the stage they belong to.

Code that runs outside every stage root and stage method (a model's ``forward`` between module calls,
its helper methods, a mixed module's own code) is timed as the interval before the next stage root,
and was charged to that stage as ``[caller code]`` (or to ``other`` after the last root), whatever it
computed: an FM written in ``forward`` before the deep MLP ran as dense's caller code, a final
``logit + fm`` and sigmoid as ``other``. The dataflow trace (:mod:`recstack.profiling.dataflow`) logs
every op of one step with its module, the storages it read and wrote and its evidence. From that log,
once the stage roots are known, each op of the model's own code gets a stage:

1. its own evidence (an interaction op, a lookup, a layer settled as dense/head, ...);
2. otherwise the stage of the first later op that reads what it wrote (through other such ops): code
   that prepares a stage's input belongs to that stage (slicing IDs for a lookup: embedding; summing
   embeddings that an FM then squares: interaction), which is the caller-code convention by dataflow;
3. otherwise (nothing with a stage reads it: the model's output) the latest stage, in forward order,
   among the ops that wrote its inputs (a final sigmoid of the head's logit: head).

An op whose stage is not the one its interval is charged to is *moved*: the op pass matches its
events to the logged ops (interval by interval, in order, by name: :class:`Matcher`) and measures each
event's share of the interval (from the end of the previous event, so the Python that issued an op
goes with it); the timing pass's interval time is split in those proportions, and the moved part
becomes the child ``[model code]`` of the op's stage (``extra.kind = "model_code"``, ``moved_from``:
which intervals it came from). What stays is the caller code (or ``other``) of its own stage.
``run.model_code`` records, per stage, the ops and the evidence.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recstack.stage_names import FORWARD_STAGES

if TYPE_CHECKING:
    from recstack.profiling.dataflow import Flow, OpRecord
    from recstack.profiling.methods import StageMethod

MODEL_CODE = "[model code]"
AFTER = "other"  # the interval after the last stage root (inference); in training the loss region follows
ORDER = {s: i for i, s in enumerate(("embedding", "dense", "sequence", "interaction", "head"))}
WINDOW = 16  # how far ahead the matcher looks for an event's op after a mismatch


@dataclass
class Planned:
    """One logged op of the model's own code: its name and the stage it belongs to (None: no stage says)."""

    name: str
    stage: str | None


@dataclass
class ModelCodePlan:
    """Per interval (the stage whose root runs next, or :data:`AFTER`), the model's own ops in order."""

    intervals: dict[str, list[Planned]] = field(default_factory=dict)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)  # stage -> run.model_code entry

    def moves(self) -> bool:
        """Whether any op belongs to a stage other than its interval's."""
        return any(p.stage not in (None, k) for k, ops in self.intervals.items() for p in ops)


def _root_stage(path: str, roots: dict[str, str]) -> str | None:
    """The stage of the innermost stage root at or above module ``path`` (None: outside every root)."""
    while True:
        if path in roots:
            return roots[path]
        if not path:
            return None
        path = path.rpartition(".")[0]


def _stages(log: list[OpRecord], ctx: list[str | None]) -> list[str | None]:
    """Each op's stage: its root's or stage method's (``ctx``), else rules 1-3 of the module docstring."""
    own = [c if c is not None else _evidence_stage(op) for op, c in zip(log, ctx, strict=True)]
    stage = list(own)
    readers: dict[int, list[int]] = {}  # op -> the ops that read what it wrote (before it was written again)
    last_writer: dict[int, int] = {}
    producers: list[list[int]] = []
    for i, op in enumerate(log):
        producers.append([last_writer[k] for k in op.reads if k in last_writer])
        for k in op.reads:
            w = last_writer.get(k)
            if w is not None:
                readers.setdefault(w, []).append(i)
        for k in op.writes:
            last_writer[k] = i
    for i in range(len(log) - 1, -1, -1):  # rule 2: the stage of what reads it (later ops first)
        if stage[i] is None:
            stage[i] = next((stage[r] for r in readers.get(i, ()) if stage[r] is not None), None)
    for i in range(len(log)):  # rule 3: the latest stage among what wrote its inputs
        if stage[i] is None:
            ups = [stage[p] for p in producers[i] if stage[p] in ORDER]
            stage[i] = max(ups, key=ORDER.__getitem__) if ups else None
    return stage


def _evidence_stage(op: OpRecord) -> str | None:
    ev = op.evidence
    return ev.stage if ev is not None and ev.stage in FORWARD_STAGES else None


def plan_model_code(flow: Flow, roots: dict[str, str], methods: list[StageMethod], train: bool) -> ModelCodePlan:
    """The model's own ops per interval, each with its stage (module docstring), from the trace's log."""

    by_method = {(m.path, m.method): m.stage for m in methods}
    ops: list[OpRecord] = []
    ctx: list[str | None] = []
    nxt: list[int] = []  # index into boundaries of the next boundary after each op
    boundaries: list[str] = []  # stage of each boundary in order (a root entered, a stage method's first op)
    in_method: str | None = None
    for entry in flow.log:
        if isinstance(entry, str):
            if entry in roots:
                boundaries.append(roots[entry])
            continue
        c = _root_stage(entry.module, roots)
        m = by_method.get((entry.module, entry.method)) if c is None and entry.method else None
        if m is not None and m != in_method:
            boundaries.append(m)
        in_method = m
        ops.append(entry)
        ctx.append(c if c is not None else m)
        nxt.append(len(boundaries))
    stage = _stages(ops, ctx)
    after = "loss" if train else AFTER
    plan = ModelCodePlan()
    for op, c, s, b in zip(ops, ctx, stage, nxt, strict=True):
        if c is not None:
            continue
        interval = boundaries[b] if b < len(boundaries) else after
        plan.intervals.setdefault(interval, []).append(Planned(op.name, s))
        if s is not None and s != interval:
            _note(plan, s, interval, op)
    return plan


def _note(plan: ModelCodePlan, stage: str, interval: str, op: OpRecord) -> None:
    """``run.model_code[stage]``: the first op with evidence (else the first op), ops by name, intervals."""
    entry = plan.evidence.setdefault(stage, {"stage": stage, "ops": {}, "moved_from": [],
                                             "evidence": {"basis": "dataflow"}})
    entry["ops"][op.name] = entry["ops"].get(op.name, 0) + 1
    if interval not in entry["moved_from"]:
        entry["moved_from"].append(interval)
    ev = entry["evidence"]
    if op.evidence is not None and op.evidence.stage == stage and "op" not in ev:
        ev.update(op.evidence.as_dict())
    elif "op" not in ev and "why" not in ev:
        ev["why"] = (f"{op.name} has no evidence of its own; what it computes flows into (or, at the output, "
                     f"comes out of) the {stage} stage")


class Matcher:
    """Matches the op pass's events of one interval to the plan's ops in order (one per step: :meth:`reset`).

    The profiler records an op and the ops it calls (``aten::linear`` -> ``aten::t``, ``aten::addmm``);
    the trace saw the ops the dispatcher reached below composites. An event takes the planned ops
    whose names appear, in order, in its subtree; where its first name is not next, the next
    :data:`WINDOW` planned ops are searched (an op one pass saw and the other did not).
    """

    def __init__(self, plan: ModelCodePlan) -> None:
        self.plan = plan
        self.pos: dict[str, int] = {}
        self.matched = 0
        self.events = 0

    def reset(self) -> None:
        self.pos = {}

    def stage_of(self, interval: str, evt: Any) -> str | None:
        """The stage of the planned ops ``evt`` matched (the most common; None: none matched, or no stage)."""
        ops = self.plan.intervals.get(interval)
        self.events += 1
        if not ops:
            return None
        names = list(_preorder(evt))
        p = self.pos.get(interval, 0)
        took = _take(ops, p, names)
        if not took:
            ahead = next((q for q in range(p + 1, min(p + WINDOW, len(ops))) if ops[q].name in names), None)
            if ahead is None:
                return None
            p, took = ahead, _take(ops, ahead, names)
        self.pos[interval] = p + len(took)
        self.matched += 1
        stages = Counter(s for s in took if s is not None)
        return stages.most_common(1)[0][0] if stages else None


def _take(ops: list[Planned], p: int, names: list[str]) -> list[str | None]:
    """The stages of ``ops[p:]`` matched in order by ``names`` (an event's subtree in pre-order)."""
    took: list[str | None] = []
    for n in names:
        if p + len(took) < len(ops) and ops[p + len(took)].name == n:
            took.append(ops[p + len(took)].stage)
    return took


def _preorder(evt: Any) -> Any:
    yield evt.name
    for c in sorted(evt.cpu_children, key=lambda e: e.time_range.start):
        yield from _preorder(c)


__all__ = ["AFTER", "MODEL_CODE", "Matcher", "ModelCodePlan", "Planned", "plan_model_code"]
