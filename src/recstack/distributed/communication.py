"""The ``communication`` stage of a rank's tree: TorchRec's distribution and every other collective.

Its children are the phases:

* ``input_dist``: the KJT all-to-alls (splits, lengths, values) and their re-layout;
* ``output_dist``: the pooled-embedding all-to-all or reduce-scatter and its wait;
* ``backward_all_to_all``: the same collectives' backward (training; for row-wise
  the reduce-scatter's backward all-gather);
* ``dense_all_reduce``: DDP's gradient all-reduce of the dense layers (training);
* ``other_collectives``: any other collective.

A phase's time comes from one of two places (its ``source``). The forward
phases are timed on the rank as stages of their own, ``communication.<phase>``
(:mod:`recstack.distributed.comm_regions`): they become the phase with their
measured time and their op-pass children apportioned against it. Collectives
found by name in the other stages (the backward ones, DDP's all-reduce, any
outside the marked code) are taken out of the stage they ran in: the
outermost matching op of each subtree (TorchRec's own ranges
``[splits_dist]_...``, ``[output_dist]_...``, ``## all2all_data:... ##``, the
awaitables' ``wait()`` ranges, ``All2All_*``, and the c10d/gloo ops
``c10d::alltoall_base_``, ``c10d::allreduce_``, ``gloo:all_to_all``), with its
apportioned time subtracted from every ancestor up to the stage, so that stage
times still add up to the run.

Each phase has two children that add up to it: ``collective`` (the
torch.distributed calls, ``c10d::...`` ops and, from the worker's
:func:`~recstack.distributed.collective_timing.waits_recorded`, the
``c10d::Work.wait`` ranges: the main thread inside the collectives) and
``torchrec_overhead`` (TorchRec's ranges with those taken out: its ops around
the calls, such as the KJT re-layout, and its Python).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from recstack.profiling.assemble import FRAMEWORK
from recstack.tree import Node

COMM_STAGE = "communication"
MEASURED_PREFIX = COMM_STAGE + "."  # a phase a rank timed as a stage of its own (comm_regions)
_COMM = re.compile(
    r"\[splits_dist\]|\[input_dist\]|\[output_dist|all2all|All2All|alltoall|all_to_all|allreduce|all_reduce|"
    r"reduce_scatter|ReduceScatter|allgather|all_gather|c10d::|gloo:|nccl:|record_param_comms|"
    r"KJT\w*Awaitable|PooledEmbeddingsAwaitable|EmbeddingBagCollectionAwaitable|SequenceEmbeddingsAwaitable|"
    r"EmbeddingCollectionAwaitable|reducer::"
)
_CALL = re.compile(r"c10d::|gloo:|nccl:|record_param_comms")
PHASES = ("input_dist", "output_dist", "backward_all_to_all", "dense_all_reduce", "other_collectives")


def is_communication(name: str) -> bool:
    return bool(_COMM.search(name))


def phase_of(name: str, stage: str) -> str:
    if stage == "backward":
        if re.search(r"allreduce|all_reduce|reducer::", name):
            return "dense_all_reduce"
        return "backward_all_to_all" if re.search(r"all2all|alltoall|all_to_all|reduce_?scatter|all_?gather", name,
                                                  re.I) else "other_collectives"
    if re.search(r"splits_dist|input_dist|KJT|kjt", name):
        return "input_dist"
    if re.search(r"output_dist|Pooled|EmbeddingBagCollectionAwaitable|EmbeddingCollectionAwaitable|Sequence|"
                 r"reduce_scatter|ReduceScatter", name):
        return "output_dist"
    return "other_collectives"


def split_communication(root: Node) -> Node:
    """Gather ``root``'s communication into a stage ``communication`` (in place); returns it.

    Phases the ranks timed as stages of their own (``communication.<phase>``, see
    :mod:`recstack.distributed.comm_regions`) become that phase with their measured time; collectives
    found by name in the other stages (the backward ones, anything outside those regions) are moved out
    of them and join their phase."""
    measured = _take_measured_phases(root)
    moved = _move_named(root, set(measured))
    comm = Node(name=COMM_STAGE, path=COMM_STAGE, level="stage", stage=COMM_STAGE, time_s=0.0, calls=1)
    for phase in PHASES:
        own = measured.get(phase)
        nodes = (own.children if own is not None else []) + moved[phase]
        if not nodes:
            continue
        pnode = Node(name=phase, path=f"{COMM_STAGE}/{phase}", level="module", stage=COMM_STAGE,
                     time_s=sum(n.time_s for n in nodes), calls=1, extra={"kind": "communication"})
        pnode.extra.update(_measured_figures(own, moved[phase]))
        _split_phase(pnode, _merge_same_name(nodes))
        comm.children.append(pnode)
    comm.time_s = sum(c.time_s for c in comm.children)
    comm.note = ("TorchRec's forward input and output distribution timed as stages of their own (timing "
                 "pass), the collectives found by name elsewhere moved out of their stages (op-pass times "
                 "apportioned there); see docs/distributed.md")
    root.children = [c for c in root.children if c.name != COMM_STAGE] + [comm]
    root.children.sort(key=lambda n: -n.time_s)
    return comm


def _move_named(root: Node, timed: set[str]) -> dict[str, list[Node]]:
    """The outermost collective ops of every other stage, taken out of it (their time leaves every ancestor),
    by phase; a timed phase's part of backward that the move emptied goes too.

    A range named for a ``timed`` phase with no torch.distributed call in it stays: it is TorchRec's
    range around the phase's region (``[output_dist]_<module>`` around the output dist's forward), the
    region's time already out of it, and what is left is TorchRec's Python outside the region, which the
    timing pass counted in this stage too."""
    moved: dict[str, list[Node]] = {p: [] for p in PHASES}
    for stage in list(root.children):
        if stage.level != "stage" or stage.name == COMM_STAGE:
            continue

        def to_move(n: Node, _stage: str = stage.name) -> bool:
            return _is_comm_op(n) and (phase_of(n.name, _stage) not in timed or _has_call(n))

        taken = 0.0
        for chain in _outermost(stage, [stage], to_move):
            node = _detach(chain)
            moved[phase_of(node.name, stage.name)].append(node)
            taken += node.time_s
        if taken:
            stage.communication_moved_s = taken
            if stage.time_s_p10 is not None:  # the stage's spread, shifted by what moved out
                stage.time_s_p10 = max(0.0, stage.time_s_p10 - taken)
            if stage.time_s_p90 is not None:
                stage.time_s_p90 = max(0.0, stage.time_s_p90 - taken)
        stage.children = [c for c in stage.children if not (c.level == "stage" and c.name.startswith(
            MEASURED_PREFIX) and c.time_s <= 0 and not c.children)]
    return moved


def _take_measured_phases(root: Node) -> dict[str, Node]:
    """The ``communication.<phase>`` stages, taken out of ``root``: their children (op-pass nodes
    apportioned against the phase's own measured time) plus a filler for the time in no op or range
    (TorchRec's Python between its ranges). Model code the rank ran just before a phase's region outside
    every stage (``[caller code]``) is not communication: it joins ``other``."""
    out: dict[str, Node] = {}
    other = root.child("other")
    for stage in [c for c in root.children if c.level == "stage" and c.name.startswith(MEASURED_PREFIX)]:
        root.children.remove(stage)
        phase = stage.name[len(MEASURED_PREFIX):]
        for caller in [c for c in stage.children if c.kind == "caller"]:
            stage.children.remove(caller)
            stage.time_s -= caller.time_s
            del stage.time_s_p10, stage.time_s_p90  # they were of the phase and its caller together
            if other is not None:
                _join_other(other, caller)
        glue = max(0.0, stage.time_s - sum(c.time_s for c in stage.children))
        if glue > 0:
            stage.children.append(Node(name=FRAMEWORK, path=f"{stage.path}/{FRAMEWORK}", level="op",
                                       stage=COMM_STAGE, time_s=glue, self_time_s=glue, calls=0,
                                       extra={"kind": "framework", "note": "time in the phase's region outside "
                                              "every op and range the op pass saw: TorchRec's Python"}))
        stage.measured_s = stage.time_s
        out[phase] = stage
    return out


def _join_other(other: Node, caller: Node) -> None:
    """A timed phase's ``[caller code]`` becomes ``other``'s (merged with one already there)."""
    del caller.time_s_p10, caller.time_s_p90
    _repath(caller, f"{other.path}/{caller.name}", stage=other.stage or "other")
    merged = _merge_same_name(other.children + [caller])
    other.children = sorted(merged, key=lambda n: -n.time_s)
    other.time_s += caller.time_s
    del other.time_s_p10, other.time_s_p90  # its spread was of the steps without it


def _measured_figures(own: Node | None, moved: list[Node]) -> dict[str, object]:
    """What a phase's time is: timed as a stage (``measured_s``, its spread and the op pass's apportioning
    factor) and/or ``moved_s`` found by name in other stages (op-pass times apportioned there)."""
    out: dict[str, object] = {"source": "timing pass" if own is not None and not moved else
                              "op pass, apportioned" if own is None else "timing pass + op pass"}
    if own is not None:
        keys = ("measured_s", "apportion_factor", "op_pass_time_s", "rusage") + (
            () if moved else ("time_s_p10", "time_s_p90"))  # the spread is the timed part's: only when it is all
        out.update(own.pick(*keys))
    if moved:
        out["moved_s"] = sum(n.time_s for n in moved)
    return out


def is_collective_call(name: str) -> bool:
    """A torch.distributed call itself: the dispatcher's c10d op, a backend range, or the wait on its Work."""
    return bool(_CALL.match(name))


def _split_phase(pnode: Node, nodes: list[Node]) -> None:
    """Give the phase two children: ``collective`` (every torch.distributed call and Work wait under its
    TorchRec ranges, taken out of them: the rank's main thread inside the collectives) and
    ``torchrec_overhead`` (the ranges with what is left: TorchRec's ops around the calls and its Python)."""
    calls = [n for n in nodes if is_collective_call(n.name)]  # a call found on its own, outside TorchRec's ranges
    nodes = [n for n in nodes if not is_collective_call(n.name)]
    for n in nodes:
        calls.extend(_detach(chain) for chain in _outermost(n, [n], lambda c: is_collective_call(c.name)))
    parts = []
    for name, kids, note in (
            ("collective", _merge_same_name(calls), "torch.distributed calls and the waits on their Work (op pass, "
             "apportioned): the rank's main thread inside the collectives, waiting for peers and transfer"),
            ("torchrec_overhead", [n for n in nodes if n.time_s > 0 or n.children], "TorchRec's ranges around the "
             "collectives without them (op pass, apportioned): its ops (re-layout, copies, allocation) and Python")):
        part = Node(name=name, path=f"{pnode.path}/{name}", level="module", stage=COMM_STAGE,
                    time_s=sum(k.time_s for k in kids), calls=1, extra={"kind": name, "note": note})
        for k in kids:
            _repath(k, f"{part.path}/{k.name}")
        part.children = sorted(kids, key=lambda n: -n.time_s)
        part.self_time_s = 0.0
        parts.append(part)
    pnode.children = sorted(parts, key=lambda n: -n.time_s)
    pnode.time_s = sum(c.time_s for c in parts)
    pnode.self_time_s = 0.0


def _has_call(n: Node) -> bool:
    return is_collective_call(n.name) or any(_has_call(c) for c in n.children)


def _is_comm_op(n: Node) -> bool:
    return n.level in ("op", "kernel") and is_communication(n.name)


def _outermost(node: Node, chain: list[Node], match: Callable[[Node], bool]) -> list[list[Node]]:
    """Chains node..found for the outermost nodes below ``node`` that ``match``."""
    found = []
    for c in node.children:
        if match(c):
            found.append(chain + [c])
        else:
            found.extend(_outermost(c, chain + [c], match))
    return found


def _detach(chain: list[Node]) -> Node:
    """Take the chain's last node out of its parent; its time (and its op-pass time, from the ops holding
    one) leaves every ancestor on the chain."""
    node, parents = chain[-1], chain[:-1]
    parents[-1].children.remove(node)
    raw = node.op_pass_time_s
    for p in parents:
        p.time_s = max(0.0, p.time_s - node.time_s)
        if isinstance(raw, (int, float)) and isinstance(p.op_pass_time_s, (int, float)):
            p.op_pass_time_s = max(0.0, p.op_pass_time_s - raw)
    return node


def _merge_same_name(nodes: list[Node]) -> list[Node]:
    """Nodes moved from several places with the same name become one (times and calls add up)."""
    by_name: dict[str, Node] = {}
    for n in nodes:
        prev = by_name.get(n.name)
        if prev is None:
            by_name[n.name] = n
            continue
        prev.time_s += n.time_s
        prev.self_time_s += n.self_time_s
        prev.calls += n.calls
        prev.children.extend(n.children)
        for k in ("flops", "bytes"):
            a, b = getattr(prev, k), getattr(n, k)
            setattr(prev, k, None if a is None and b is None else (a or 0) + (b or 0))
        if isinstance(n.op_pass_time_s, (int, float)):
            prev.op_pass_time_s = (prev.op_pass_time_s or 0.0) + n.op_pass_time_s
    return list(by_name.values())


def _repath(node: Node, path: str, stage: str = COMM_STAGE) -> None:
    """Give ``node`` the path ``path`` and stage ``stage``, and its subtree paths below it (siblings that
    share a name get ``#k``)."""
    node.path = path
    node.stage = stage
    seen: dict[str, int] = {}
    for c in node.children:
        k = seen.get(c.name, 0)
        seen[c.name] = k + 1
        _repath(c, f"{path}/{c.name}" + (f"#{k}" if k else ""), stage)
