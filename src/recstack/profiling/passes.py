"""The measurement passes of a profile, one function each: warm-up and discovery, timing pass, op pass.

Each pass takes the model, the :class:`~recstack.profiling.runner.Step` that
runs one step, the pre-generated batches (cycled) and the stage roots, and
returns plain data; :mod:`recstack.profiling.assemble` turns that data into
the Profile tree. None of them generates input inside a timed region.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # torch loads when a pass runs, not with the module (the trace importer needs none)
    from torch import nn

    from recstack.profiling.stage_rules import StageRules

from recstack.profiling.native_stderr import quiet_native
from recstack.profiling.oppass import STAGE, STEP, Folder, install_range_hooks, profiler_range
from recstack.profiling.regions import Regions
from recstack.profiling.rules import NeverRanRoot, StageMap, detect_stages, hand_down_roots
from recstack.profiling.timing import ForwardWrappers, StageTimer, _Region, install_stage_hooks


class Step(Protocol):
    """What the passes need of :class:`recstack.profiling.runner.Step` (kept as a protocol so this
    module does not import the runner that calls it)."""

    train: bool

    def run(self, batch: Any, region: Callable[[str], Any] | None = None) -> None: ...


def _no_regions() -> None:
    return None


@dataclass
class Discovery:
    """What the warm-up found: the modules that ran (first call order, every depth) and the stage map."""

    order: list[str]
    smap: StageMap
    never_ran: dict[str, NeverRanRoot]
    methods: list[Any] = field(default_factory=list)  # recstack.profiling.methods.StageMethod
    model_code: Any = None  # recstack.profiling.modelcode.ModelCodePlan (None: no dataflow trace)

    def regions(self, other: Regions | None) -> Regions | None:
        """``other`` (or None) plus the stage methods, as one :class:`Regions` for both passes."""
        if not self.methods:
            return other
        from recstack.profiling.methods import MethodRegions

        return MethodRegions(self.methods, other)

    @property
    def roots(self) -> dict[str, str]:
        """Stage roots that time a stage: module path -> stage (``other`` roots are not boundaries)."""
        return {p: pl.stage for p, pl in self.smap.placements.items() if pl.root and pl.stage and pl.stage != "other"}


def record_call_order(model: nn.Module, run_once: Callable[[], None]) -> list[str]:
    """Module paths of ``model`` in the order their ``forward`` first ran during ``run_once()``, at every depth.

    Every module's ``forward`` is wrapped for this one step, the same way the
    timing and op passes wrap stage roots, so a module counts as run exactly
    when those wrappers would fire (also for ``module.forward(x)`` called
    directly, which forward hooks miss).
    """
    order: list[str] = []
    seen: set[str] = set()
    wrappers = ForwardWrappers()
    for path, mod in model.named_modules():

        def mark(_path: str = path) -> None:
            if _path not in seen:
                seen.add(_path)
                order.append(_path)

        wrappers.wrap(mod, mark, _nothing)
    try:
        run_once()
    finally:
        wrappers.remove()
    return order


def _nothing() -> None:
    return None


def warm_up_and_discover(
    model: nn.Module, step: Step, batches: list[Any], warmup: int, rules: StageRules | None,
    forward: Callable[[Any], Any] | None = None,
) -> Discovery:
    """Warm-up steps (at least two); the second records which modules run, which places stages and hands
    down never-run roots. ``forward(batch)`` calls the model: one more forward, under
    :class:`recstack.profiling.dataflow.StageFlow`, shows what each module computes (stages from dataflow);
    without it, or where that trace fails (a warning says why), types and names place the stages.

    The first step runs plain, so an error in the model's own code surfaces
    with the user's frames innermost (the recording wrappers are recstack's
    frames; :mod:`recstack.usercode` would call such an error recstack's).
    """
    n = len(batches)
    step.run(batches[0])
    order = record_call_order(model, lambda: step.run(batches[1 % n]))
    for i in range(max(0, warmup - 2)):
        step.run(batches[(i + 2) % n])
    from recstack.profiling.dataflow import try_trace_stages

    flow = try_trace_stages(model, forward, batches[0]) if forward is not None else None
    smap = detect_stages(model, rules, order, flow)
    never_ran = hand_down_roots(smap, order)
    found = Discovery(order=order, smap=smap, never_ran=never_ran)
    if flow is not None:
        from recstack.profiling.methods import find_stage_methods
        from recstack.profiling.modelcode import plan_model_code

        found.methods = find_stage_methods(flow, smap)
        found.model_code = plan_model_code(flow, found.roots, found.methods, step.train)
    return found


COUNTER_STEPS = 5
"""Stage steps after the timed ones that take the kernel counters (getrusage where the stage changes)."""


@dataclass
class TimingResult:
    """Per-step samples of the timing pass (seconds): A (plain) and B (stage hooks) steps and B's stages."""

    plain: list[float] = field(default_factory=list)
    timed: list[float] = field(default_factory=list)
    stage_samples: dict[str, list[float]] = field(default_factory=dict)
    timer: StageTimer | None = None  # holds the per-step getrusage deltas of the counter steps (timer.rusage_steps)
    counter_steps: list[float] = field(default_factory=list)  # the counter steps' times (their central ones count)


def timing_pass(
    model: nn.Module,
    step: Step,
    batches: list[Any],
    roots: dict[str, str],
    iters: int,
    sync: Callable[[], None] | None,
    regions: Regions | None = None,
) -> TimingResult:
    """A (uninstrumented) / B (stage timing) steps, interleaved on the same batch; then up to
    :data:`COUNTER_STEPS` more B steps that also take getrusage where the stage changes, for the stages'
    kernel counters (a syscall of ~2 us at each of a step's stage changes was 3-10% of a 0.2 ms step: the
    timed steps take none).

    ``other`` per B step is its step time minus the sum of its stage times; ``regions`` time as stages too
    (without getrusage at their boundaries: their faults and switches count in the enclosing stage).
    """
    n = len(batches)
    timer = StageTimer(sync, rusage=False)
    res = TimingResult()
    for i in range(iters):
        batch = batches[i % n]
        res.plain.append(_plain_step(step, batch, sync))
        total = _stage_step(model, step, batch, roots, timer, regions)
        res.timed.append(total)
        acc = {k: v * 1e-9 for k, v in timer.acc.items()}
        acc["other"] = max(0.0, total - sum(acc.values()))
        for k in set(res.stage_samples) | set(acc):
            res.stage_samples.setdefault(k, [0.0] * i).append(acc.get(k, 0.0))
    res.timer = StageTimer(sync)
    for i in range(min(iters, COUNTER_STEPS)):
        res.counter_steps.append(_stage_step(model, step, batches[i % n], roots, res.timer, regions))
    return res


def _stage_step(model: nn.Module, step: Step, batch: Any, roots: dict[str, str], timer: StageTimer,
                regions: Regions | None) -> float:
    """One step with the stage wrappers (and regions) installed around it: its time in seconds."""
    region = (lambda s: _Region(timer, s)) if step.train else None
    # regions first: a region patching a module's forward then wraps the module itself, and the stage
    # wrapper around it (removed first) never becomes what the region's close puts back
    # (no getrusage at regions' boundaries: on a rank it cost ~2-4% of the step, benchmarks/LOG.md)
    undo = _no_regions if regions is None else regions.install(model, timer.enter_unmarked, timer.exit_unmarked)
    try:
        wrappers = install_stage_hooks(model, roots, timer)
        try:
            timer.reset()
            t0 = timer.start()
            step.run(batch, region)
            t1 = timer.stop()
        finally:
            wrappers.remove()
    finally:
        undo()
    return (t1 - t0) * 1e-9


def _plain_step(step: Step, batch: Any, sync: Callable[[], None] | None) -> float:
    if sync:
        sync()
    t0 = time.perf_counter_ns()
    step.run(batch)
    if sync:
        sync()
    return (time.perf_counter_ns() - t0) * 1e-9


@dataclass
class OpPassResult:
    """The folded op-pass tree and the op pass's step times (seconds, including the profiler's cost)."""

    folder: Folder
    steps_s: list[float]


def op_pass(
    model: nn.Module,
    step: Step,
    batches: list[Any],
    roots: dict[str, str],
    op_iters: int,
    sync: Callable[[], None] | None,
    export_trace: Callable[[Any], None] | None = None,
    opaque: frozenset[str] = frozenset(),
    regions: Regions | None = None,
    plan: Any = None,
) -> OpPassResult:
    """``op_iters`` steps under torch.profiler with stage and module ranges, folded into one tree;
    modules in ``opaque`` (inside compiled regions) get no range of their own.

    ``export_trace(prof)`` writes the Chrome trace (torch.profiler can export it once); ``plan`` (a
    :class:`~recstack.profiling.modelcode.ModelCodePlan`) attributes the model's own code by its dataflow.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    n = len(batches)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])

    def op_region(s: str) -> Any:
        return profiler_range(STAGE + s)

    folder = Folder(plan)
    steps_s: list[float] = []
    with _ranges_installed(model, roots, opaque, regions), \
            quiet_native(profile(activities=acts, record_shapes=True)) as prof:
        for i in range(op_iters):
            batch = batches[i % n]
            t0 = time.perf_counter_ns()
            with profiler_range(f"{STEP}{i}"):
                step.run(batch, op_region if step.train else None)
            if sync:
                sync()
            steps_s.append((time.perf_counter_ns() - t0) * 1e-9)
    folder.fold(prof.events())
    if export_trace is not None:
        export_trace(prof)
    return OpPassResult(folder=folder, steps_s=steps_s)


@contextlib.contextmanager
def _ranges_installed(model: nn.Module, roots: dict[str, str], opaque: frozenset[str],
                      regions: Regions | None) -> Iterator[None]:
    """The op pass's stage and module ranges around the stage roots (and ``regions``), removed on leaving."""
    undo = _no_regions if regions is None else regions.install(model, *_stage_ranges())  # first, as in timing_pass
    try:
        range_wrappers = install_range_hooks(model, roots, opaque)
        try:
            yield
        finally:
            range_wrappers.remove()
    finally:
        undo()


def memory_pass(model: nn.Module, step: Step, batch: Any, roots: dict[str, str], sync: Callable[[], None] | None,
                opaque: frozenset[str] = frozenset(), regions: Regions | None = None) -> dict[str, Any]:
    """One step (never a timed one) under torch.profiler's memory events with the op pass's stage ranges:
    ``{"device", "step_peak_bytes", "stages": {stage: {"peak_bytes", "allocated_bytes", "end_bytes"}}}`` from the
    allocator of the model's device (:func:`recstack.profiling.memory.stage_peaks`); on CUDA also the step's
    ``torch.cuda.memory_stats`` peaks (allocated and reserved), reset at the step's start."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from recstack.profiling.stage_memory import mark_saved_tensors, stage_peaks

    optimizer = getattr(step, "optimizer", None)
    if optimizer is not None:  # the last step's gradients freed before the step starts, as the footprint model has it
        optimizer.zero_grad(set_to_none=True)
    on_cuda = any(p.is_cuda for p in model.parameters())
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    if on_cuda:  # untested here (no GPU): exercised by scripts/gpu-check.sh
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
    held = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()] if t.device.type != "meta"}
    saved = mark_saved_tensors(held) if step.train else contextlib.nullcontext()
    with _ranges_installed(model, roots, opaque, regions), \
            quiet_native(profile(activities=acts, profile_memory=True)) as prof, saved:
        step.run(batch, (lambda s: profiler_range(STAGE + s)) if step.train else None)
        if sync:
            sync()
    device = "cuda" if on_cuda else "cpu"
    peak, stages = stage_peaks(list(prof.profiler.kineto_results.events()), STAGE, device)
    out: dict[str, Any] = {"device": device, "step_peak_bytes": peak, "stages": stages}
    if on_cuda:
        stats = torch.cuda.memory_stats()
        out["cuda_peak_allocated_above_start_bytes"] = int(stats.get("allocated_bytes.all.peak", 0)) - int(start)
        out["cuda_peak_reserved_bytes"] = int(stats.get("reserved_bytes.all.peak", 0))
    return out


OP_PASS_RATIO_LIMIT = 3.0
"""An op pass whose median step is beyond this factor of the plain step's, either way, is measured again."""


def op_ratio(ops: OpPassResult, plain_median_s: float) -> float | None:
    """The op pass's median step over the plain median step (None without both)."""
    from recstack.profiling.stats import median

    return median(ops.steps_s) / plain_median_s if ops.steps_s and plain_median_s > 0 else None


def _outside(ratio: float | None) -> bool:
    return ratio is not None and not 1 / OP_PASS_RATIO_LIMIT <= ratio <= OP_PASS_RATIO_LIMIT


def checked_op_pass(run: Callable[[], OpPassResult], plain_median_s: float, *,
                    remeasure: bool = True) -> tuple[OpPassResult, dict[str, Any]]:
    """``run()`` (one op pass); where its ratio to the plain step is beyond :data:`OP_PASS_RATIO_LIMIT` either way,
    once more, keeping the run nearer the plain step. Returns the kept result and what to add to
    ``profile.overhead``: ``op_pass_remeasured`` (both ratios) and, if the kept one is still outside,
    ``op_pass_ratio_flag`` (one sentence; a warning says the same): its proportions are then suspect.
    ``remeasure=False`` (one rank of several: a second op pass on one rank alone would leave the others waiting in
    its collectives) only flags.
    """
    import math
    import warnings

    ops = run()
    first = op_ratio(ops, plain_median_s)
    if not _outside(first):
        return ops, {}
    note: dict[str, Any] = {}
    if remeasure:
        again = run()
        second = op_ratio(again, plain_median_s)
        assert first is not None
        if second is not None and abs(math.log(second)) < abs(math.log(first)):
            ops = again
        note["op_pass_remeasured"] = {"first_ratio": first, "second_ratio": second,
                                      "kept_ratio": op_ratio(ops, plain_median_s)}
    kept = op_ratio(ops, plain_median_s)
    if _outside(kept):
        assert kept is not None
        flag = (f"the op pass ran {kept:.3g}x the plain step, beyond {OP_PASS_RATIO_LIMIT:g}x either way, on "
                f"{'two measurements' if remeasure else 'one rank of several (not re-measured)'}: the proportions "
                "within stages (apportioning) may not hold; profile again on a quiet host")
        note["op_pass_ratio_flag"] = flag
        warnings.warn(f"op pass: {flag}", stacklevel=2)
    return ops, note


def _stage_ranges() -> tuple[Callable[[str], None], Callable[[], None]]:
    """``enter(stage)`` / ``leave()`` that open and close the op pass's stage range (see :class:`Regions`)."""
    open_ranges: list[Any] = []

    def enter(stage: str) -> None:
        rf = profiler_range(STAGE + stage)
        rf.__enter__()
        open_ranges.append(rf)

    def leave() -> None:
        if open_ranges:
            open_ranges.pop().__exit__(None, None, None)

    return enter, leave
