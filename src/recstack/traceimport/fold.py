"""Columns -> the op-pass structures of a live profile: a :class:`Folder` tree and per-step stage samples.

One sweep over every thread's events sorted by (start, longest first), with a
stack of open events per thread, gives every event its parent (stages open in
the order they ran, whichever thread ran them: autograd's backward thread); events that start at the
top of a thread's stack find their step by bisection over the sorted step
ranges (so step lookup costs log(steps) per top-level event, never events x
steps), nested events inherit it. The fold is that of the live op pass
(:mod:`recstack.profiling.oppass`): stage roots (by the stage rules on the
module paths) open stage nodes, modules nest, ops nest as the dispatcher
nested them; ops outside every stage root are the next stage's ``[caller
code]`` (the gap since the previous stage root is its time), those after the
last are ``other``. Autograd and optimizer ranges outside every stage open
the ``backward`` and ``optimizer`` stages. Kernels join the op whose runtime
call launched them, by correlation id.

Per step the sweep records each stage's exclusive time and the caller gaps:
the samples :func:`recstack.profiling.assemble.build_tree` turns into stage
times (interquartile mean), p10 and p90, exactly as for a live profile.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from recstack.profiling.oppass import FLOAT_DTYPES, MAX_SHAPES, Folder, RawNode
from recstack.profiling.passes import TimingResult
from recstack.profiling.rules import (
    StageMap,
    detect_stages_by_name,
    hand_down_roots,
)
from recstack.profiling.timing import CALLER, caller_key, split_caller_key
from recstack.stage_names import TRAIN_STAGES
from recstack.traceimport import overhead
from recstack.traceimport.collect import (
    DEVICE_KINDS,
    MODULE,
    NN_PREFIX,
    NNMODULE,
    OP,
    PSEUDO_STAGE,
    RUNTIME,
    SIG_SEP,
    STEP,
    THROUGH,
    Collector,
    pseudo_stage,
)
from recstack.traceimport.device import step_figures

if TYPE_CHECKING:
    from recstack.profiling.stage_rules import StageRules

SWEEP_BLOCK = 1 << 20  # events turned into Python objects at a time
NOT_FORWARD = (*TRAIN_STAGES, "communication", "other")
BACKWARD_OF = "[backward of "  # + forward stage + "]": backward ranges grouped by the forward stage they undo


@dataclass
class Steps:
    starts: list[float]
    ends: list[float]
    names: list[str]
    source: str  # "ProfilerStep", "--step-range NAME" or "whole trace"


@dataclass
class Folded:
    folder: Folder
    timing: TimingResult
    smap: StageMap
    types: dict[str, str | None]
    steps: Steps
    hierarchy: str
    root_type: str | None
    kernels: int = 0
    kernels_unmatched: int = 0
    outside_steps: int = 0
    signatures: dict[int, tuple[list, list, list]] = field(default_factory=dict)  # id -> dims, types, values
    signature_counts: dict[str, dict[int, int]] = field(default_factory=dict)  # op path -> id -> calls (all steps)
    overhead: overhead.OverheadEstimate = field(default_factory=lambda: overhead.OverheadEstimate(None, 0))
    events_per_step: float = 0.0  # host events recorded per step (the correction's count)
    removed_us: float = 0.0  # profiler time removed per step (mean)
    device: DeviceTotals = field(default_factory=lambda: DeviceTotals())
    cuts: dict[str, overhead.Cut] = field(default_factory=dict)  # per part: what the correction removed


@dataclass
class DeviceTotals:
    """Where the device time of one trace went, by kind (:data:`DEVICE_KINDS`; microseconds, every step)."""

    raw_us: list[float] = field(default_factory=lambda: [0.0] * len(DEVICE_KINDS))  # summed from the raw events
    in_tree_us: list[float] = field(default_factory=lambda: [0.0] * len(DEVICE_KINDS))  # attached to ops in steps
    outside_steps_us: list[float] = field(default_factory=lambda: [0.0] * len(DEVICE_KINDS))  # launched outside
    unlaunched_us: list[float] = field(default_factory=lambda: [0.0] * len(DEVICE_KINDS))  # no launching call found
    by_external_id: int = 0  # device events linked to their op by External id (no runtime call of their correlation)
    by_flow: int = 0  # device events whose correlation came from their ac2g flow (none in their args)
    kernel_kinds: dict[str, str] = field(default_factory=dict)  # kernel node name -> its kind


def _order(c: Collector) -> np.ndarray:
    """Event indices sorted by thread, start, then longest first (a parent before its children)."""
    ts = np.frombuffer(c.cols.ts, dtype=np.float64)
    end = np.frombuffer(c.cols.end, dtype=np.float64)
    thr = np.frombuffer(c.cols.thr, dtype=np.int32)
    return np.lexsort((-end, ts, thr))


def _time_order(c: Collector) -> np.ndarray:
    """Event indices sorted by start, then longest first, every thread together: the sweep keeps one stack per
    thread but opens stages in the order they ran, so a backward on autograd's thread comes after the forward
    on the main thread (swept thread by thread, one thread's ranges took the other's time as caller code)."""
    ts = np.frombuffer(c.cols.ts, dtype=np.float64)
    end = np.frombuffer(c.cols.end, dtype=np.float64)
    return np.lexsort((-end, ts))


def _rows(c: Collector, order: np.ndarray, cols: tuple[str | np.ndarray, ...]):
    """The rows of the named columns (or arrays) in ``order`` (no index), one block of Python objects at a time."""
    arrays = [k if isinstance(k, np.ndarray) else np.frombuffer(getattr(c.cols, k), dtype={
        "d": np.float64, "i": np.int32, "q": np.int64}[getattr(c.cols, k).typecode]) for k in cols]
    for b in range(0, len(order), SWEEP_BLOCK):
        idx = order[b:b + SWEEP_BLOCK]
        yield from zip(*(a[idx].tolist() for a in arrays), strict=True)


def _nn_module_paths(c: Collector, order: np.ndarray) -> tuple[str | None, list[str]]:
    """Give each ``nn.Module: Class_N`` event a path from its nesting (instance names joined by dots); the
    one outermost module, if there is one, is the root (path ``""``). Returns (root class, call order)."""
    kinds, names = c.kinds, c.names
    is_nn = np.array([k == NNMODULE for k in kinds], dtype=bool)
    nid = np.frombuffer(c.cols.nid, dtype=np.int32)
    sel = order[is_nn[nid[order]]] if len(order) else order
    chains: dict[int, tuple[str, ...]] = {}
    stack: list[tuple[float, tuple[str, ...]]] = []
    cur = -1
    for i, t, e, th, n in _blocks_sel(c, sel):
        if th != cur:
            stack, cur = [], th
        while stack and stack[-1][0] <= t:
            stack.pop()
        chain = (stack[-1][1] if stack else ()) + (names[n][len(NN_PREFIX):],)
        chains[i] = chain
        stack.append((e, chain))
    outer = {ch[0] for ch in chains.values()}
    root = next(iter(outer)) if len(outer) == 1 else None
    order_seen: list[str] = []
    seen: set[str] = set()
    aux = c.cols.aux
    for i, chain in chains.items():
        parts = chain[1:] if root is not None else chain
        path = ".".join(parts)
        aux[i] = c.path_id(path, _class_of(chain[-1]))
        if path not in seen:
            seen.add(path)
            order_seen.append(path)
    return (_class_of(root) if root else None), order_seen


def _blocks_sel(c: Collector, sel: np.ndarray):
    ts = np.frombuffer(c.cols.ts, dtype=np.float64)
    end = np.frombuffer(c.cols.end, dtype=np.float64)
    thr = np.frombuffer(c.cols.thr, dtype=np.int32)
    nid = np.frombuffer(c.cols.nid, dtype=np.int32)
    return zip(sel.tolist(), ts[sel].tolist(), end[sel].tolist(), thr[sel].tolist(), nid[sel].tolist(), strict=True)


def _class_of(instance: str) -> str:
    """``MLP_1`` -> ``MLP`` (torch names module events ``nn.Module: <class>_<instance number>``)."""
    base, sep, num = instance.rpartition("_")
    return base if sep and num.isdigit() else instance


def find_steps(c: Collector, order: np.ndarray) -> Steps:
    """The step ranges, sorted by start; the whole trace as one step when there are none."""
    kinds = c.kinds
    nid = np.frombuffer(c.cols.nid, dtype=np.int32)
    is_step = np.array([k == STEP for k in kinds], dtype=bool)
    sel = np.nonzero(is_step[nid])[0] if len(nid) else np.zeros(0, dtype=np.int64)
    ts = np.frombuffer(c.cols.ts, dtype=np.float64)
    end = np.frombuffer(c.cols.end, dtype=np.float64)
    if len(sel):
        sel = sel[np.argsort(ts[sel], kind="stable")]
        source = f"--step-range {c.step_range}" if c.step_range else "ProfilerStep ranges"
        return Steps(ts[sel].tolist(), end[sel].tolist(), [c.names[n] for n in nid[sel].tolist()], source)
    if not len(ts):
        return Steps([], [], [], "whole trace")
    return Steps([float(ts.min())], [float(end.max())], ["whole trace"], "whole trace")


@dataclass(eq=False)
class FoldNode(RawNode):
    """A RawNode of the fold with two references the sweep needs (no ``id()`` keys: the id of a node that is
    merged and freed is reused by a new node, and a cache keyed by it hands back the dead node's entries).

    ``ops``: op children by name id (the sweep's lookup without a key tuple per event); ``into``: the node
    this one's counts were merged into (a step's ops outside every stage, merged into a caller-code tree
    or ``other``), so a kernel whose launching op was merged follows it there."""

    ops: dict[int, FoldNode] = field(default_factory=dict, repr=False)
    kernels: dict[int, FoldNode] = field(default_factory=dict, repr=False)  # kernel children by name id
    into: FoldNode | None = field(default=None, repr=False)

    def child(self, name: str, level: str, stage: str | None) -> FoldNode:
        key = (level, name)
        node = self.children.get(key)
        if node is None:
            node = self.children[key] = FoldNode(name, level, stage)
        return node  # type: ignore[return-value]

    def live(self) -> FoldNode:
        """The node that holds this one's counts now (itself unless it was merged)."""
        node = self
        while node.into is not None:
            node = node.into
        return node


def _merge(src: FoldNode, dst: FoldNode, stage: str) -> None:
    """Add ``src``'s subtree into ``dst``'s (as stage ``stage``); each src node points at its dst (``into``)."""
    for c in src.children.values():
        d = dst.child(c.name, c.level, stage)
        c.into = d  # type: ignore[attr-defined]
        d.us += c.us
        d.calls += c.calls
        d.device_us += c.device_us
        for k, v in c.shapes.items():
            if k in d.shapes or len(d.shapes) < MAX_SHAPES:
                d.shapes[k] = d.shapes.get(k, 0) + v
        for k, v in c.dtypes.items():
            d.dtypes[k] = d.dtypes.get(k, 0) + v
        _merge(c, d, stage)  # type: ignore[arg-type]


class _Sweep:
    """The state of the fold (see the module docstring)."""

    def __init__(self, c: Collector, smap: StageMap, steps: Steps, correct: bool = True) -> None:
        self.c, self.smap, self.steps, self.correct = c, smap, steps, correct
        self.folder = Folder()
        self.folder.root = FoldNode("run", "run", None)
        n = len(steps.starts)
        self.stage_us: dict[str, list[float]] = {}
        self.caller_us: dict[str, list[float]] = {}
        self.boundary = list(steps.starts)
        self.segs: dict[int, FoldNode] = {}
        self.corr: dict[int, FoldNode] = {}  # correlation id of a runtime call in a step -> its launching node
        self.outside_corr: set[int] = set()  # ... of runtime calls outside every step
        self.need_ext, self.k_corr = _device_links(c)
        self.ext_node: dict[int, FoldNode] = {}  # External id -> op node, for the device events that need it
        self.outside_ext: set[int] = set()
        self.seq_stage: dict[int, str] = {}  # autograd sequence number of a forward op -> its forward stage
        self.device = DeviceTotals(raw_us=list(c.device_us))
        self.device.by_flow = sum(1 for a, b in zip(c.cols.k_corr, self.k_corr, strict=True) if a < 0 <= b)
        self.outside = 0
        self.n = n
        self.overhead = overhead.OverheadEstimate(None, 0)
        self.events_per_step = 0.0
        self.removed_us = 0.0  # per step, mean: what the correction took off the step time
        self.cuts: dict[str, overhead.Cut] = {}  # per part (stage, caller key, other): what was removed
        self.root_stage: dict[int, str] = {}  # module path id -> its stage, for stage roots
        for pid, path in enumerate(c.paths):
            pl = smap.placements.get(path)
            if pl is not None and pl.root and pl.stage:
                self.root_stage[pid] = pl.stage

    def seg(self, step: int) -> FoldNode:
        s = self.segs.get(step)
        if s is None:
            s = self.segs[step] = FoldNode("[outside]", "module", None)
        return s

    def samples(self, table: dict[str, list[float]], stage: str) -> list[float]:
        row = table.get(stage)
        if row is None:
            row = table[stage] = [0.0] * self.n
        return row

    def open_stage(self, st: str, outer: str | None, step: int, t: float, e: float) -> FoldNode:
        """A stage root's range begins: its stage node; the outer stage loses the time, or, at the top, the
        ops since the previous boundary become this stage's caller code."""
        root: FoldNode = self.folder.root  # type: ignore[assignment]
        node = root.child(st, "stage", st)
        dur = e - t
        node.us += dur
        node.calls += 1
        self.samples(self.stage_us, st)[step] += dur
        if outer is not None:
            root.child(outer, "stage", outer).nested_us += dur
            self.samples(self.stage_us, outer)[step] -= dur
        else:
            seg = self.segs.pop(step, None)
            if seg is not None and seg.children:
                caller = self.folder.callers.setdefault(st, FoldNode(CALLER, "module", st))
                _merge(seg, caller, st)  # type: ignore[arg-type]
            gap = max(0.0, t - self.boundary[step])
            if gap > 0 or st in self.caller_us or seg is not None:
                self.samples(self.caller_us, st)[step] += gap
            self.boundary[step] = max(self.boundary[step], e)
        return node

    def run(self, order: np.ndarray) -> None:
        c = self.c
        kinds, names, paths = c.kinds, c.names, c.paths
        starts, ends = self.steps.starts, self.steps.ends
        step_of_start = {t: i for i, t in enumerate(starts)}
        root_stage = self.root_stage
        folder, segs = self.folder, self.segs
        stacks: dict[int, list[tuple[float, FoldNode | None, str | None, int, bool]]] = {}
        stack: list[tuple[float, FoldNode | None, str | None, int, bool]] = []
        cur = -1
        op_total = 0.0
        need_ext, ext_node = self.need_ext, self.ext_node
        seq_stage = self.seq_stage
        ext, seq = self.needed_links()
        for t, e, th, n, aux, ty, x, sq in _rows(c, order, ("ts", "end", "thr", "nid", "aux", "ty", ext, seq)):
            if th != cur:  # one stack per thread
                stack, cur = stacks.setdefault(th, []), th
            while stack and stack[-1][0] <= t:
                stack.pop()
            kind = kinds[n]
            if stack:
                _, p_node, p_stage, step, p_op = stack[-1]
                if p_node is None:  # inside an event outside every step
                    self.left_out(kind, aux, x)
                    stack.append((e, None, None, -1, False))
                    continue
                if p_stage is None and not p_op:
                    # outside every stage, not in an op: the parent is the step's segment, which a stage
                    # opened since may have taken (merged into its caller code): the segment open now
                    p_node = segs.get(step) or self.seg(step)
            else:
                if kind == STEP:
                    step = step_of_start.get(t, -1)
                else:
                    j = bisect_right(starts, t) - 1
                    step = j if j >= 0 and t < ends[j] else -1
                if step < 0:
                    self.outside += 1
                    self.left_out(kind, aux, x)
                    stack.append((e, None, None, -1, False))
                    continue
                p_node, p_stage, p_op = self.seg(step), None, False
            if kind == STEP:
                stack.append((e, self.seg(step), None, step, False))
            elif kind == MODULE or kind == NNMODULE:
                st = root_stage.get(aux)
                if st is not None and st != p_stage and not p_op:
                    snode = self.open_stage(st, p_stage, step, t, e)
                    m = snode.child(paths[aux], "module", st)
                    m.us += e - t
                    m.calls += 1
                    stack.append((e, m, st, step, False))
                elif p_stage is None or p_op:
                    stack.append((e, p_node, p_stage, step, p_op))  # outside every stage, or inside an op
                else:
                    m = p_node.child(paths[aux], "module", p_stage)
                    m.us += e - t
                    m.calls += 1
                    stack.append((e, m, p_stage, step, False))
            elif kind == THROUGH:
                stack.append((e, p_node, p_stage, step, p_op))
            else:  # OP, RUNTIME, PSEUDO_STAGE
                if kind == PSEUDO_STAGE and p_stage is None:
                    st = pseudo_stage(names[n]) or "other"
                    p_node, p_stage = self.open_stage(st, None, step, t, e), st
                    if st == "backward" and sq >= 0:
                        p_node = self.backward_of(p_node, sq, t, e)
                elif kind == PSEUDO_STAGE and sq >= 0 and p_stage == "backward" and p_node.level == "stage":
                    p_node = self.backward_of(p_node, sq, t, e)
                elif sq >= 0 and p_stage is not None and p_stage not in NOT_FORWARD:
                    seq_stage.setdefault(sq, p_stage)  # a forward op: its backward belongs to this stage
                kids = p_node.ops  # op children by name id (no key tuples per event)
                node = kids.get(n)
                if node is None:
                    node = kids[n] = p_node.child(names[n], "op", p_stage)
                node.us += e - t
                node.calls += 1
                if not p_op:
                    op_total += e - t
                if kind == RUNTIME:
                    if aux >= 0:
                        self.corr[aux] = p_node if p_op else node
                else:
                    if x >= 0 and x in need_ext:
                        ext_node.setdefault(x, node)  # the outermost op of this External id launched it
                    sh = node.shapes
                    if aux < 0:
                        pass
                    elif aux in sh:
                        sh[aux] += 1
                    elif len(sh) < MAX_SHAPES:
                        sh[aux] = 1  # shape ids: named at the end
                if ty >= 0:
                    node.dtypes[ty] = node.dtypes.get(ty, 0) + 1
                stack.append((e, node, p_stage, step, True))
        folder.op_total_us += op_total

    def needed_links(self) -> tuple[np.ndarray, np.ndarray]:
        """The External id and sequence number columns with only the values the sweep needs (-1 elsewhere:
        small ints Python does not allocate): ids some device event needs, numbers some backward range has."""
        c = self.c
        ext = np.frombuffer(c.cols.ext, dtype=np.int64)
        ext = np.where(np.isin(ext, np.fromiter(self.need_ext, dtype=np.int64)), ext, -1) if self.need_ext \
            else np.full(len(ext), -1, dtype=np.int64)
        seq = np.frombuffer(c.cols.seq, dtype=np.int64)
        nid = np.frombuffer(c.cols.nid, dtype=np.int32)
        is_bwd = np.array([k == PSEUDO_STAGE for k in c.kinds] or [False], dtype=bool)[nid] if len(nid) else \
            np.zeros(0, dtype=bool)
        # a set, not np.unique: that loads numpy.ma (~20 ms of start-up) to ask whether the array is masked
        wanted = np.fromiter(set(seq[is_bwd & (seq >= 0)].tolist()), dtype=np.int64)
        seq = np.where(np.isin(seq, wanted), seq, -1) if len(wanted) else np.full(len(seq), -1, dtype=np.int64)
        return ext, seq

    def backward_of(self, stage: FoldNode, seq: int, t: float, e: float) -> FoldNode:
        """The node a backward range of sequence number ``seq`` goes under: ``[backward of <stage>]`` for the
        forward stage whose op had that number (the trace links them), else the backward stage itself."""
        fwd = self.seq_stage.get(seq)
        if fwd is None:
            return stage
        m = stage.child(f"{BACKWARD_OF}{fwd}]", "module", "backward")
        m.us += e - t
        m.calls += 1
        return m

    def left_out(self, kind: int, aux: int, ext: int) -> None:
        """An event outside every step: what it launched is device time outside every step."""
        if kind == RUNTIME and aux >= 0:
            self.outside_corr.add(aux)
        elif ext >= 0 and ext in self.need_ext:
            self.outside_ext.add(ext)

    def kernels(self) -> tuple[int, int]:
        """Attach the device events to the ops that launched them (by correlation id; else by External id);
        (attached, launched by no op found). Every event's time is counted by kind where it went."""
        c, dev = self.c, self.device
        matched = unmatched = 0
        names, by_corr, in_tree = c.names, self.corr, dev.in_tree_us
        for corr, n, dur, kind, ext in zip(self.k_corr, c.cols.k_nid, c.cols.k_dur, c.cols.k_kind, c.cols.k_ext,
                                           strict=True):
            node = by_corr.get(corr)
            if node is None and ext >= 0 and corr not in self.outside_corr:
                node = self.ext_node.get(ext)
                dev.by_external_id += node is not None
                if node is None and ext in self.outside_ext:
                    corr = -2
            if node is None:
                if corr in self.outside_corr or corr == -2:
                    dev.outside_steps_us[kind] += dur
                else:
                    dev.unlaunched_us[kind] += dur
                    unmatched += 1
                continue
            node = node.live()
            k = node.kernels.get(n)
            if k is None:  # the node's first kernel of this name id (a name's first kernel anywhere among them)
                k = node.kernels[n] = node.child(names[n], "kernel", node.stage)
                dev.kernel_kinds.setdefault(names[n], DEVICE_KINDS[kind])
            k.us += dur
            k.calls += 1
            node.device_us += dur
            in_tree[kind] += dur
            matched += 1
        return matched, unmatched

    def finish(self) -> TimingResult:
        """Ops after the last stage root go to ``other``; the per-step samples in seconds."""
        other = self.folder.root.child("other", "stage", "other")
        for seg in self.segs.values():
            _merge(seg, other, "other")  # type: ignore[arg-type]
        self.segs = {}
        root, callers, n = self.folder.root, self.folder.callers, max(self.n, 1)
        runtime = frozenset(name for name, kind in zip(self.c.names, self.c.kinds, strict=True) if kind == RUNTIME)
        est = self.overhead = overhead.estimate([root, *callers.values()], runtime)
        per = est.per_event_us if self.correct else None

        def events(node: RawNode | None) -> float:
            return overhead.recorded_events(node) / n if node is not None else 0.0

        self.events_per_step = events(root) + sum(events(c) for c in callers.values())
        step_us = [e - s for s, e in zip(self.steps.starts, self.steps.ends, strict=True)]
        rows = {st: [max(0.0, u) for u in row] for st, row in self.stage_us.items()}
        rows.update({caller_key(st): row for st, row in self.caller_us.items()})
        inside = [sum(row[i] for row in rows.values()) for i in range(self.n)]
        rows["other"] = [max(0.0, s - x) for s, x in zip(step_us, inside, strict=True)]
        # Each part less the profiler's cost of its own events, bounded by what the profiler can have added
        # (overhead.bounded_cuts); the step is the sum of its corrected parts.
        cuts = {}
        for key in rows:
            st = split_caller_key(key)
            node = callers.get(st) if st is not None else root.children.get(("stage", key))
            cuts[key] = overhead.Cut(events(node), overhead.wait_us(node) / n)
        busy = [f["busy_s"] * 1e6 for f in step_figures(self.c, self.steps.starts, self.steps.ends)] \
            if len(self.c.cols.k_dur) else None
        overhead.bounded_cuts(rows, cuts, per, step_us, busy)
        self.cuts = cuts if per is not None else {}
        samples = {key: [max(0.0, u - c) * 1e-6 for u, c in zip(row, cuts[key].cut_us, strict=True)]
                   for key, row in rows.items()}
        step_s = [sum(row[i] for row in samples.values()) for i in range(self.n)]
        self.removed_us = sum(s * 1e6 - c * 1e6 for s, c in zip([u * 1e-6 for u in step_us], step_s, strict=True)) / n
        self.folder.steps = self.n
        self.folder.step_us = sum(step_s) * 1e6
        return TimingResult(plain=[], timed=step_s, stage_samples=samples)


def _device_links(c: Collector) -> tuple[set[int], list[int]]:
    """(External ids the device events need: those whose correlation id no runtime call has, each device
    event's correlation id: from its args, else from its ``ac2g`` flow, the flow's end sharing its start)."""
    k_corr = c.cols.k_corr.tolist()
    if not k_corr:
        return set(), k_corr
    missing = [i for i, v in enumerate(k_corr) if v < 0]
    if missing and len(c.cols.f_ts):
        k_ts = c.cols.k_ts
        want = {k_ts[i] for i in missing}
        flow = {t: f for t, f in zip(c.cols.f_ts, c.cols.f_id, strict=True) if t in want}
        for i in missing:
            k_corr[i] = flow.get(k_ts[i], -1)
    nid = np.frombuffer(c.cols.nid, dtype=np.int32)
    is_rt = np.array([k == RUNTIME for k in c.kinds] or [False], dtype=bool)
    rt = set(np.frombuffer(c.cols.aux, dtype=np.int64)[is_rt[nid]].tolist()) if len(nid) else set()
    ext = c.cols.k_ext
    need = {ext[i] for i, v in enumerate(k_corr) if v not in rt and ext[i] >= 0}
    return need, k_corr


def signatures(c: Collector) -> dict[int, tuple[list, list, list]]:
    """Signature id -> (Input Dims, Input type, Concrete Inputs) as decoded JSON (a part that does not
    decode is empty)."""
    out: dict[int, tuple[list, list, list]] = {}
    for raw, i in c.shapes.items():
        parts = [_json_list(p) for p in raw.split(SIG_SEP)] + [[], [], []]
        out[i] = (parts[0], parts[1], parts[2])
    return out


def _json_list(raw: bytes) -> list:
    try:
        v = msgspec.json.decode(raw) if raw else []
    except msgspec.DecodeError:
        return []
    return v if isinstance(v, list) else []


def signature_counts(folder: Folder) -> dict[str, dict[int, int]]:
    """Tree path (as :func:`recstack.profiling.assemble.raw_to_node` names it) -> signature id -> calls."""
    out: dict[str, dict[int, int]] = {}

    def walk(n: RawNode, path: str) -> None:
        if n.shapes:
            out[path] = dict(n.shapes)
        for k in n.children.values():
            walk(k, f"{path}/{k.name}")

    for (_level, name), st in folder.root.children.items():
        for k in st.children.values():
            walk(k, f"{name}/{k.name}")
    for st, caller in folder.callers.items():
        for k in caller.children.values():
            walk(k, f"{st}/{CALLER}/{k.name}")
    return out


def _name_keys(root: RawNode, c: Collector, sigs: dict[int, tuple[list, list, list]]) -> None:
    """Signature and type ids -> the keys the live tree uses (``str`` of the dims list; ``fp32`` ...)."""
    shape_text = {i: str(d) for i, (d, _t, _v) in sigs.items()}
    dtype_of: dict[int, str | None] = {}
    for raw, i in c.types.items():
        try:
            types = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            types = []
        dtype_of[i] = next((FLOAT_DTYPES[d] for d in types if isinstance(d, str) and d in FLOAT_DTYPES), None)
    stack = [root]
    while stack:
        n = stack.pop()
        if n.shapes:
            named: dict[str, int] = {}
            for k, v in n.shapes.items():  # signatures that differ only in types share a shape key
                named[shape_text[k]] = named.get(shape_text[k], 0) + v
            n.shapes = named
        if n.dtypes:
            dt: dict[str, int] = {}
            for k, v in n.dtypes.items():
                if (d := dtype_of.get(k)) is not None:
                    dt[d] = dt.get(d, 0) + v
            n.dtypes = dt
        stack.extend(n.children.values())


def fold(c: Collector, rules: StageRules | None, correct: bool = True) -> Folded:
    """Sweep the collected events into a Folder and per-step samples (see the module docstring); ``correct``:
    remove the profiler's estimated per-event cost from the times (:mod:`recstack.traceimport.overhead`)."""
    order = _order(c)
    root_type = None
    if c.annotate_ranges:
        hierarchy = "recstack.annotate ranges" if any(c.path_types.get(p) for p in c.paths) else "module ranges"
        root_type = c.path_types.get("")
        call_order = _first_seen(c, order)
    elif c.nn_events:
        hierarchy = "nn.Module events (class names; with_stack)"
        root_type, call_order = _nn_module_paths(c, order)
    else:
        hierarchy = "none: ops only (record with recstack.annotate(model), or with_stack, or give --module-map)"
        call_order = []
    types = {p: c.path_types.get(p) for p in c.paths}
    smap = detect_stages_by_name(types, rules, call_order)
    hand_down_roots(smap, set(c.paths))
    steps = find_steps(c, order)
    sweep = _Sweep(c, smap, steps, correct)
    sweep.run(_time_order(c))
    matched, unmatched = sweep.kernels()
    timing = sweep.finish()
    sigs = signatures(c)
    counts = signature_counts(sweep.folder)
    _name_keys(sweep.folder.root, c, sigs)
    for caller in sweep.folder.callers.values():
        _name_keys(caller, c, sigs)
    return Folded(sweep.folder, timing, smap, types, steps, hierarchy, root_type, matched, unmatched, sweep.outside,
                  signatures={i: sigs[i] for per in counts.values() for i in per}, signature_counts=counts,
                  overhead=sweep.overhead, events_per_step=sweep.events_per_step,
                  removed_us=sweep.removed_us, device=sweep.device, cuts=sweep.cuts)


def _first_seen(c: Collector, order: np.ndarray) -> list[str]:
    """Module paths in the order their ranges first start (the call order the head rule reads)."""
    nid = np.frombuffer(c.cols.nid, dtype=np.int32)
    is_mod = np.array([k == MODULE for k in c.kinds], dtype=bool)
    sel = np.nonzero(is_mod[nid])[0] if len(nid) else np.zeros(0, dtype=np.int64)
    ts = np.frombuffer(c.cols.ts, dtype=np.float64)
    sel = sel[np.argsort(ts[sel], kind="stable")]
    aux = np.frombuffer(c.cols.aux, dtype=np.int64)
    out: list[str] = []
    seen: set[int] = set()
    for a in aux[sel].tolist():
        if a not in seen:
            seen.add(a)
            out.append(c.paths[a])
    return out


__all__ = ["OP", "Folded", "fold", "find_steps"]
