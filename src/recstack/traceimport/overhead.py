"""The profiler's own cost in an imported trace: estimated from the trace itself, removed from the stage times.

A live profile times its stages in a pass without torch.profiler; a trace has no such pass, so every time
in it includes the profiler's cost of recording the events inside it, which weighs most on stages of many
small ops. The estimate, per recorded event:

    per_event_us = median over wrapper ops of (op time - its child's time) / calls

where a *wrapper op* is an op node each of whose calls ran exactly one child op (not a CUDA runtime call,
which is the op's own launch work) and nothing else that was recorded (``aten::embedding_bag`` -> ``aten::_embedding_bag``, ``aten::to`` -> ``aten::_to_copy``,
``aten::slice`` -> ``aten::as_strided``, ...). Such an op does little besides dispatching to its child, so its exclusive time is
mostly the profiler recording that child (its start and end callbacks, and the shapes under
``record_shapes``): the median is an estimate of the cost of one event, on the high side by the wrapper's
own dispatch. The correction then subtracts, per step, ``per_event_us x`` the events recorded inside each
stage (ops, module ranges and runtime calls, nested ones included; the mean count per step) from that
stage's time (caller code and ``other`` likewise, by their own events), never below zero; the step time
is the sum of its corrected parts. No wrapper op in the trace: no estimate, no correction (said so in ``overhead.method``).

On a GPU trace the correction is bounded by what the profiler can have added (:func:`bounded_cuts`):

* a stage never loses the time its host spent waiting in a synchronising call (``cudaDeviceSynchronize``,
  ``cudaStreamSynchronize``, a blocking ``cudaMemcpy``, their ``hip`` twins, ...): the host waited for the
  device there, and the profiler's per-event cost does not lengthen a wait;
* a step never loses more than its span less the GPU's busy time in it: a step the device kept busy ends
  when the device's work does, and host-side recording cost ahead of the device is hidden in it (the
  stages' cuts are scaled down together to fit).

Each part's cut and which bound set it are recorded (:class:`Cut`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recstack.profiling.oppass import RawNode

HOST_LEVELS = ("op", "module")  # levels whose events the profiler records on the host (kernels are device-side)


@dataclass
class OverheadEstimate:
    per_event_us: float | None  # None: no wrapper op to estimate from
    wrappers: int  # wrapper op nodes the median is over


def wrapper_exclusive_us(root: RawNode, runtime: frozenset[str] = frozenset()) -> list[float]:
    """Exclusive time per call (us) of every wrapper op under ``root`` (see the module docstring). A child
    named in ``runtime`` (a CUDA runtime call: the op's own launch work) does not make a wrapper."""
    out: list[float] = []
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(c for c in node.children.values() if c.level != "kernel")
        kids = [c for c in node.children.values() if c.level in HOST_LEVELS]
        if node.level == "op" and node.calls > 0 and len(kids) == 1 and kids[0].level == "op" \
                and kids[0].calls == node.calls and kids[0].name not in runtime:
            out.append(max(0.0, node.us - kids[0].us) / node.calls)
    return out


def estimate(roots: list[RawNode], runtime: frozenset[str] = frozenset()) -> OverheadEstimate:
    """The median wrapper exclusive time over the trees ``roots`` (stage trees and caller-code trees)."""
    values = sorted(v for r in roots for v in wrapper_exclusive_us(r, runtime))
    if not values:
        return OverheadEstimate(None, 0)
    mid = len(values) // 2
    med = values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])
    return OverheadEstimate(med, len(values))


def recorded_events(node: RawNode) -> int:
    """Host events recorded inside ``node`` (summed calls of its op and module descendants, over every step)."""
    total, stack = 0, list(node.children.values())
    while stack:
        n = stack.pop()
        if n.level != "kernel":
            total += n.calls if n.level in HOST_LEVELS else 0
            stack.extend(n.children.values())
    return total


def corrected(samples_us: list[float], per_step_events: float, per_event_us: float | None) -> list[float]:
    """Per-step times (us) less the estimated profiler cost of the events recorded in them, floored at 0."""
    cut = (per_event_us or 0.0) * per_step_events
    return [max(0.0, u - cut) for u in samples_us]


# Runtime calls in which the host waits for the device (the profiler's per-event cost does not lengthen them).
SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D",
    "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol", "cudaStreamQuery", "cuStreamSynchronize", "cuCtxSynchronize",
    "cuEventSynchronize", "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2", "hipDeviceSynchronize", "hipStreamSynchronize",
    "hipEventSynchronize", "hipMemcpy", "hipMemcpyWithStream", "hipMemcpy2D"})


def wait_us(node: RawNode | None) -> float:
    """Time (us, every step) inside synchronising runtime calls under ``node`` (outermost ones)."""
    if node is None:
        return 0.0
    total, stack = 0.0, list(node.children.values())
    while stack:
        n = stack.pop()
        if n.level == "kernel":
            continue
        if n.name in SYNC_CALLS:
            total += n.us
        else:
            stack.extend(n.children.values())
    return total


@dataclass
class Cut:
    """What the correction removed from one part (a stage, its caller code, ``other``), per step."""

    events: float  # host events recorded in it per step (mean)
    wait_us: float  # its time inside synchronising calls per step (mean)
    cut_us: list[float] = field(default_factory=list)  # removed, per step
    bound: str = "per-event estimate"  # or "waits", "GPU busy": which bound set the cut (the last to bind)


def bounded_cuts(rows: dict[str, list[float]], cuts: dict[str, Cut], per_event_us: float | None,
                 step_us: list[float], busy_us: list[float] | None) -> None:
    """Fill each part's per-step cut: ``per_event_us x events``, at most its time less its waits; then, per
    step, the parts' cuts scaled together to at most the step's span less the GPU's busy time (``busy_us``;
    None: a trace without device events, no such bound)."""
    per = per_event_us or 0.0
    for key, row in rows.items():
        c = cuts[key]
        c.cut_us = []
        for u in row:
            want = per * c.events
            room = max(0.0, u - c.wait_us) if c.wait_us > 0 else max(0.0, u)
            if c.wait_us > 0 and want > room:
                c.bound = "waits"
            c.cut_us.append(min(want, room))
    if busy_us is None:
        return
    for i, (span, busy) in enumerate(zip(step_us, busy_us, strict=True)):
        room = max(0.0, span - busy)
        total = sum(c.cut_us[i] for c in cuts.values())
        if total > room:
            scale = room / total
            for c in cuts.values():
                if c.cut_us[i] > 0:
                    c.cut_us[i] *= scale
                    c.bound = "GPU busy"
