"""Tree assembly: timing-pass stage times plus op-pass proportions -> the run/stage/module/op tree.

Stage and run times are interquartile means over the timing pass's central
steps (step time within p25..p75): robust like a median, and additive, so
stage times (``other`` included) sum to the run time.

Inside a stage ``s`` the op pass supplies what ran and in what proportion.
With ``T`` the stage's timing-pass time and ``P`` its exclusive op-pass time
per step, every module and op node is scaled by ``k = min(1, T / P)``:

* ``T < P`` (the usual case: torch.profiler slows the step down): ``k < 1``
  removes that overhead proportionally; the children then fill the stage up
  to its own glue (``self_time_s``).
* ``T >= P``: the op pass saw less of the stage than the timing pass measured.
  Nothing is scaled up (that would invent work on the ops that were seen);
  the difference ``T - P`` is a child ``[unattributed]`` (level ``op``,
  ``extra.kind = "unattributed"``).

Work outside every stage root is the model's own code. What ran before a
stage root is that stage's ``[caller code]`` child (level ``module``,
``extra.kind = "caller"``): its timing-pass time, the ops the op pass saw
there by op name, and ``[python/framework between ops]`` for the rest. What
ran after the last stage root of a step is ``other``, built the same way.
Those ops keep their op-pass time, scaled down only where they would exceed
the timing-pass time (the op pass's own time outside stages is no guide to
the profiler's slowdown there: it also holds the per-module range hooks'
Python), and the framework filler (``extra.kind = "framework"``) makes the
children sum to the node.

Siblings that would show the same short name get a ``label`` long enough to
tell them apart (:func:`assign_labels`).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from typing import Any

from recstack.noise import bootstrap_ci
from recstack.profiling.modelcode import AFTER, MODEL_CODE
from recstack.profiling.oppass import Folder, RawNode
from recstack.profiling.passes import TimingResult
from recstack.profiling.stats import central_mean, central_steps, median, percentile
from recstack.profiling.timing import CALLER, caller_key, split_caller_key
from recstack.stage_names import FORWARD_STAGES
from recstack.tree import Node

STAGE_ORDER = FORWARD_STAGES + ("loss", "backward", "optimizer", "communication", "other")
UNATTRIBUTED = "[unattributed]"
FRAMEWORK = "[python/framework between ops]"


_NUMBER_LISTS = re.compile(r"\[[0-9eE.,+\-\s\[\]]*\]")  # lists of numbers: the same value as JSON and as Python


def eval_shape(key: str) -> Any:
    """A shape key's value: ``str()`` of lists of numbers read as JSON (~20x faster than ``ast.literal_eval``,
    which compiles it: 4,000 keys cost 0.1 s); other literals as Python's; else the text itself."""
    if _NUMBER_LISTS.fullmatch(key):
        try:
            return json.loads(key)
        except ValueError:  # not JSON (``[1.]``, ``[01]``): Python's reading decides
            pass
    try:
        return ast.literal_eval(key)
    except (ValueError, SyntaxError):
        return key


def raw_to_node(raw: RawNode, parent_path: str, factor: float, steps: int) -> Node:
    """One op-pass node (summed over ``steps``) as a per-step tree node scaled by ``factor`` (host nodes only:
    a kernel node's time is the device's, which the host-side profiler overhead never inflated)."""
    path = f"{parent_path}/{raw.name}" if parent_path else raw.name
    per_step = raw.us * 1e-6 / max(steps, 1)
    node = Node(
        name=raw.name,
        path=path,
        level=raw.level,
        stage=raw.stage,
        time_s=per_step if raw.level == "kernel" else per_step * factor,  # device time: never a host factor
        calls=int(round(raw.calls / max(steps, 1))),
    )
    if raw.level == "op":
        node.shapes = [eval_shape(k) for k in raw.shapes]
        node.distinct_shapes = len(raw.shapes)
        if raw.dtypes:
            node.dtypes = dict(raw.dtypes)  # input dtype -> calls (the roofline's roof_dtype)
        node.op_pass_time_s = per_step
        if raw.device_us:
            node.device_time_s = raw.device_us * 1e-6 / max(steps, 1)
    if raw.level == "kernel":
        node.device = "cuda"
    node.children = [raw_to_node(c, path, factor, steps) for c in raw.children.values()]
    node.children.sort(key=lambda n: -n.time_s)
    node.self_time_s = max(0.0, node.time_s - sum(c.time_s for c in node.children if c.level != "kernel"))
    return node


def _filler(name: str, stage: str, time_s: float, kind: str, note: str) -> Node:
    """A synthetic op-level child that makes a stage's children account for its whole time."""
    return Node(name=name, path=f"{stage}/{name}", level="op", stage=stage, time_s=time_s, self_time_s=time_s,
                calls=0, extra={"kind": kind, "note": note})


def _per_step_sum(a: list[float], b: list[float]) -> list[float]:
    return [x + y for x, y in zip(a, b, strict=True)] if a and b else a or b


def stage_node(name: str, samples: list[float], central: list[int], raw: RawNode | None, folder: Folder,
               caller_samples: list[float] | None = None, model_samples: list[float] | None = None,
               moved_from: dict[str, float] | None = None) -> Node:
    """A forward/train stage: timing-pass time, op-pass children scaled by ``min(1, T/P)``, unattributed rest;
    plus its ``[caller code]`` child when the model's own code ran before the stage root, and its
    ``[model code]`` child when the model's own code elsewhere computed this stage's work."""
    t = central_mean(samples, central) if samples else 0.0
    outside = [caller_node(name, caller_samples, central, folder)] if caller_samples else []
    if model_samples:
        outside.append(model_code_node(name, model_samples, central, folder, moved_from or {}))
    whole = samples
    for extra in (caller_samples, model_samples):
        whole = _per_step_sum(whole, extra or [])
    node = Node(name=name, path=name, level="stage", stage=name, time_s=t + sum(c.time_s for c in outside),
                calls=1)
    if whole:
        node.time_s_p10, node.time_s_p90 = percentile(whole, 10), percentile(whole, 90)
    if folder.steps:  # with no op pass, a stage has no children
        p = Folder.stage_exclusive_us(raw) * 1e-6 / folder.steps if raw is not None else 0.0
        factor = min(1.0, t / p) if p > 0 else 0.0
        node.op_pass_time_s, node.apportion_factor = p, factor
        if raw is not None:
            node.children = [raw_to_node(c, name, factor, folder.steps) for c in raw.children.values()]
            node.children.sort(key=lambda c: -c.time_s)
        if t - p > 1e-12 + 1e-9 * t:  # not float rounding
            node.children.append(_filler(
                UNATTRIBUTED, name, t - p, "unattributed",
                "timing-pass time of this stage that the op pass did not see (not spread over the ops it saw)"))
    node.children.extend(outside)
    node.self_time_s = max(0.0, node.time_s - sum(c.time_s for c in node.children))
    return node


def _fill_outside(node: Node, raw: RawNode | None, steps: int, note: str) -> None:
    """Children of a node of code outside every stage root: the op pass's ops by name, scaled down only
    where they would exceed the node's timing-pass time, and a framework filler for the rest."""
    t = node.time_s
    ops = sum(c.us for c in raw.children.values()) * 1e-6 / steps if raw is not None else 0.0
    factor = min(1.0, t / ops) if ops > 0 else 0.0
    node.apportion_factor = factor
    if raw is not None:
        node.children = [raw_to_node(c, node.path, factor, steps) for c in raw.children.values()]
        node.children.sort(key=lambda c: -c.time_s)
    # Always present after an op pass (0 where the ops fill the node), so every profile has the same shape.
    rest = max(0.0, t - sum(c.time_s for c in node.children))
    filler = _filler(FRAMEWORK, node.stage or "other", rest, "framework", note)
    filler.path = f"{node.path}/{FRAMEWORK}"
    node.children.append(filler)
    node.self_time_s = max(0.0, node.time_s - sum(c.time_s for c in node.children))


def caller_node(stage: str, samples: list[float], central: list[int], folder: Folder) -> Node:
    """``<stage>/[caller code]``: the model's own code that ran outside every stage just before the stage's root."""
    t = central_mean(samples, central)
    node = Node(name=CALLER, path=f"{stage}/{CALLER}", level="module", stage=stage, time_s=t, calls=0,
                extra={"kind": "caller",
                       "note": "the model's own code run outside every stage root just before this stage's root "
                               "(input slicing, concatenation, Python between module calls)"})
    _fill(node, folder.callers.get(stage), folder, "Python and the dispatcher between the caller's ops")
    return node


def model_code_node(stage: str, samples: list[float], central: list[int], folder: Folder,
                    moved_from: dict[str, float]) -> Node:
    """``<stage>/[model code]``: the model's own code whose ops compute this stage's work, wherever it ran
    (its share of the intervals it ran in; :mod:`recstack.profiling.modelcode`)."""
    t = central_mean(samples, central)
    node = Node(name=MODEL_CODE, path=f"{stage}/{MODEL_CODE}", level="module", stage=stage, time_s=t, calls=0,
                extra={"kind": "model_code", "moved_from": moved_from,
                       "note": "the model's own code (outside every stage root) whose ops, by their dataflow, are "
                               "this stage's work; moved here from the caller code or `other` it ran in"})
    _fill(node, folder.model_code.get(stage), folder, "Python and the dispatcher between these ops")
    return node


def _fill(node: Node, raw: RawNode | None, folder: Folder, note: str) -> None:
    if folder.steps:
        _fill_outside(node, raw, folder.steps, note)
    else:
        node.self_time_s = node.time_s


def split_model_code(stage_samples: dict[str, list[float]], folder: Folder, central: list[int]
                     ) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:
    """``stage_samples`` with each interval's moved share (op pass: :meth:`Folder.moved_fractions`) taken out
    of its caller code (or ``other``) and put under the key ``<stage>/[model code]``; and per stage, the
    seconds per step it took from each interval."""
    out = dict(stage_samples)
    moved_from: dict[str, dict[str, float]] = {}
    for (interval, stage), frac in folder.moved_fractions().items():
        src_key = "other" if interval == AFTER else caller_key(interval)
        src = stage_samples.get(src_key)
        if not src:
            continue
        moved = [min(1.0, frac) * v for v in src]
        out[src_key] = [max(0.0, a - m) for a, m in zip(out[src_key], moved, strict=True)]
        key = f"{stage}/{MODEL_CODE}"
        out[key] = _per_step_sum(out.get(key, []), moved)
        moved_from.setdefault(stage, {})[interval] = central_mean(moved, central)
    return out, moved_from


def other_node(samples: list[float], central: list[int], folder: Folder) -> Node:
    """``other``: what ran after the last stage root of a step: ops by name, Python/framework time between."""
    t = central_mean(samples, central) if samples else 0.0
    node = Node(name="other", path="other", level="stage", stage="other", time_s=t, calls=1)
    if samples:
        node.time_s_p10, node.time_s_p90 = percentile(samples, 10), percentile(samples, 90)
    if not folder.steps:
        node.self_time_s = t
        return node
    inside_us = sum(Folder.stage_exclusive_us(c) for k, c in folder.root.children.items() if k != ("stage", "other"))
    node.op_pass_time_s = max(0.0, folder.step_us - inside_us) * 1e-6 / folder.steps
    _fill_outside(node, folder.root.children.get(("stage", "other")), folder.steps,
                  "outside every stage and every op: Python after the last stage root, the dispatcher, hooks")
    return node


def build_tree(model_name: str, timing: TimingResult, folder: Folder, central: list[int] | None = None) -> Node:
    """The run node with one child per stage seen by either pass, in :data:`STAGE_ORDER`.

    ``central``: the steps the run and stage times average over (default: the interquartile ones)."""
    central = central_steps(timing.timed) if central is None else central
    root = Node(name=model_name, path="run", level="run", stage=None, time_s=central_mean(timing.timed, central),
                calls=1)
    root.time_s_p10, root.time_s_p90 = percentile(timing.timed, 10), percentile(timing.timed, 90)
    op_stages = {name for (level, name) in folder.root.children if level == "stage"}
    stage_samples, moved_from = split_model_code(timing.stage_samples, folder, central)
    callers = {st: stage_samples[k] for k in stage_samples if (st := split_caller_key(k))}
    models = {st: stage_samples[f"{st}/{MODEL_CODE}"] for st in moved_from}
    plain = {k for k in stage_samples if split_caller_key(k) is None and not k.endswith(f"/{MODEL_CODE}")}
    names = sorted(plain | set(callers) | set(models) | op_stages | {"other"},
                   key=lambda s: (STAGE_ORDER.index(s) if s in STAGE_ORDER else 99, s))
    for sname in names:
        samples = stage_samples.get(sname, [])
        if sname == "other":
            root.children.append(other_node(samples, central, folder))
        else:
            raw = folder.root.children.get(("stage", sname))
            root.children.append(stage_node(sname, samples, central, raw, folder, callers.get(sname),
                                            models.get(sname), moved_from.get(sname)))
    root.self_time_s = max(0.0, root.time_s - sum(c.time_s for c in root.children))
    assign_labels(root)
    return root


def _short(node: Node, parent: Node) -> str:
    """The name a renderer shows: a module nested in a module by its last path component."""
    if node.level == "module" and parent.level == "module":
        return node.name.rsplit(".", 1)[-1]
    return node.name


def _disambiguate(paths: list[str]) -> list[str]:
    """Shortest dotted suffixes (at least one component) that tell ``paths`` apart."""
    parts = [p.split(".") for p in paths]
    out = []
    for i, comps in enumerate(parts):
        n = 1
        while n < len(comps) and any(
            j != i and other[-n:] == comps[-n:] for j, other in enumerate(parts)
        ):
            n += 1
        out.append(".".join(comps[-n:]))
    return out


def assign_labels(root: Node) -> None:
    """Set ``label`` on every node: its short name, or enough of its module path where siblings share one."""
    root.label = root.name
    for parent in root.walk():
        groups: dict[str, list[Node]] = {}
        for c in parent.children:
            groups.setdefault(_short(c, parent), []).append(c)
        for short, nodes in groups.items():
            if len(nodes) == 1:
                nodes[0].label = short
                continue
            for n, label in zip(nodes, _disambiguate([n.name for n in nodes]), strict=True):
                n.label = label


def outermost_ops(root: Node) -> Iterable[Node]:
    """Op nodes recorded by the op pass that no other op encloses (synthetic filler nodes excluded)."""
    stack = [root]
    while stack:
        n = stack.pop()
        for c in n.children:
            if c.level == "op" and c.op_pass_time_s is not None:
                yield c
            elif c.level in ("stage", "module"):
                stack.append(c)


def overhead_figures(timing: TimingResult, op_steps_s: list[float], folder: Folder, run_t: float,
                     wall_s: float) -> dict[str, Any]:
    """What the measurement cost: A/B ratio of the timing pass with its CI, and the op pass's slowdown."""
    plain = timing.plain
    a_med = median(plain)
    ratios = [b / a for a, b in zip(plain, timing.timed, strict=True) if a > 0]
    return {
        "uninstrumented_step_s": a_med,
        "uninstrumented_step_s_p10": percentile(plain, 10),
        "uninstrumented_step_s_p90": percentile(plain, 90),
        "stage_pass_step_s": run_t,
        "stage_pass_ratio": median(ratios),
        "stage_pass_ratio_ci": list(bootstrap_ci(ratios)),
        "op_pass_step_s": median(op_steps_s) if op_steps_s else None,
        "op_pass_ratio": (median(op_steps_s) / a_med) if op_steps_s and a_med > 0 else None,
        "op_pass_op_time_s": (folder.op_total_us * 1e-6 / folder.steps) if folder.steps else None,
        "pairs": len(ratios),
        "profiling_wall_s": wall_s,
        "method": "A/B interleaved: A uninstrumented, B stage hooks; ratio = median of per-pair B/A, "
        "95% bootstrap CI of that median; op pass under torch.profiler with module ranges",
    }
