"""``import_trace``: a torch.profiler trace (a file, or a folder of per-rank files) -> a recstack Profile.

The tree is assembled exactly as a live profile's (:func:`recstack.profiling.assemble.build_tree`) from
what the trace holds: the step ranges give the run time per step, the stage roots' ranges the stage
times, the ops nested in them the stage's children. Nothing was measured outside the profiler, so the
profiler's per-event cost is estimated from the trace and removed (:mod:`recstack.traceimport.overhead`;
``overhead`` says what was removed, or that it is unknown), and ``run.source`` is ``imported``.
"""

from __future__ import annotations

import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recstack.errors import DataError
from recstack.profiling.assemble import assign_labels, build_tree
from recstack.profiling.timing import caller_key
from recstack.traceimport.collect import DEVICE_KINDS, KNOWN_CATS, Collector, norm_cat
from recstack.traceimport.decode import Header, Truncation
from recstack.traceimport.device import step_figures
from recstack.traceimport.fold import BACKWARD_OF, Folded, fold
from recstack.traceimport.parallel import collect_trace
from recstack.tree import Node, Profile
from recstack.version import __version__

if TYPE_CHECKING:  # pydantic models: loaded only when a rules or module-map file is given
    from recstack.profiling.stage_rules import StageRules
    from recstack.traceimport.module_map import ModuleMap

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
OVERHEAD_UNKNOWN = ("unknown: imported from a torch.profiler trace with no wrapper op to estimate the profiler's "
                    "per-event cost from; every time includes the profiler's own overhead")
OVERHEAD_RAW = ("unknown: imported with --raw-times, the times as the trace recorded them; every time includes "
                "the profiler's own overhead")
OVERHEAD_ESTIMATED = ("estimated from the trace: the profiler's cost per recorded event is taken as the median "
                      "exclusive time of wrapper ops (ops whose every call ran exactly one child op; {n} here), "
                      "and per_event_s x the events recorded in each stage is subtracted from its time per step "
                      "(never below zero, never a stage's time in synchronising calls, never more of a step than its "
                      "span less the GPU's busy time; each stage's overhead_removed_s and overhead_bound say what "
                      "was removed; the step is the sum of its parts); op and module times are scaled to the "
                      "corrected stage times; kernel and device times are never corrected")


@dataclass
class RankTrace:
    """One imported file: its tree and what the import found."""

    path: Path
    rank: int | None
    folded: Folded
    header: Header
    truncation: Truncation | None
    events: int
    notes: list[str] = field(default_factory=list)
    device: dict[str, Any] | None = None  # import.files[].device
    categories: dict[str, int] = field(default_factory=dict)  # complete events per category as spelled
    left_out: dict[str, int] = field(default_factory=dict)  # events whose time is not a time, by side and fault


def trace_files(path: Path) -> list[Path]:
    """The trace files ``path`` names: itself, or the ``*.json``/``*.json.gz`` files of a folder (sorted)."""
    if not path.exists():
        raise DataError(f"TRACE: {path} does not exist (give a torch.profiler .json or .json.gz, or a folder)")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith((".json", ".json.gz")))
        if not files:
            raise DataError(f"TRACE: {path} holds no .json or .json.gz trace files")
        return files
    return [path]


def read_rank(path: Path, rules: StageRules | None, step_range: str | None, module_map: ModuleMap | None,
              correct: bool = True) -> RankTrace:
    """Decode and fold one trace file."""
    if path.stat().st_size == 0:
        raise DataError(f"TRACE: {path} is empty (0 bytes)")
    c, header, trunc = collect_trace(path, step_range, module_map)
    if c.events == 0 and trunc is None:
        raise DataError(f"TRACE: {path}: the trace has no events")
    if c.torch_events == 0:
        raise DataError(f"TRACE: {path}: not a torch.profiler trace: no cpu_op, user_annotation, python_function "
                        "or kernel events (a Chrome trace from another tool?)")
    if step_range is not None and c.step_events == 0:
        raise DataError(f"--step-range: no range named {step_range!r} in {path}")
    folded = fold(c, rules, correct)
    device = _device_record(c, folded)
    notes: list[str] = []
    if folded.steps.source == "whole trace":
        notes.append("no ProfilerStep ranges (and no --step-range): the whole trace is one step")
    if trunc is not None:
        total = f" of {trunc.bytes_total:,}" if trunc.bytes_total else ""
        notes.append(f"truncated trace: read {trunc.events:,} complete events ({trunc.bytes_read:,}{total} bytes); "
                     "the rest of the file is not a complete event")
    if folded.kernels_unmatched:
        lost = sum(folded.device.unlaunched_us) * 1e-3
        notes.append(f"{folded.kernels_unmatched:,} device events had no launching op (correlation id not found; "
                     f"{lost:.3f} ms of device time, in import.files[].device.unlaunched_s)")
    notes += _category_notes(c)
    rank = None
    info = header.distributedInfo or {}
    if isinstance(info.get("rank"), int) and info["rank"] >= 0:
        rank = info["rank"]
    return RankTrace(path, rank, folded, header, trunc, c.events, notes, device,
                     {k: v[0] for k, v in c.categories.items()}, dict(sorted(c.bad_times.items())))


def _kinds(values: list[float]) -> dict[str, float]:
    return {k: v * 1e-6 for k, v in zip(DEVICE_KINDS, values, strict=True)}


def _device_record(c: Collector, f: Folded) -> dict[str, Any] | None:
    """``import.files[].device``: where the trace's device time went, and per step GPU busy, idle, overlap."""
    d = f.device
    if not len(c.cols.k_dur) and not c.range_us:
        return None
    return {
        "raw_s": _kinds(d.raw_us), "in_tree_s": _kinds(d.in_tree_us), "outside_steps_s": _kinds(d.outside_steps_us),
        "unlaunched_s": _kinds(d.unlaunched_us), "linked_by_external_id": d.by_external_id,
        "correlation_from_flow": d.by_flow,
        "ranges_s": {k: v * 1e-6 for k, v in sorted(c.range_us.items())},
        "steps": step_figures(c, f.steps.starts, f.steps.ends),
    }


def _category_notes(c: Collector) -> list[str]:
    """Notes on what the import did not read as it was written: unknown categories, impossible times."""
    notes = []
    unknown = {k: v[0] for k, v in c.categories.items() if norm_cat(k) not in KNOWN_CATS}
    if unknown:
        notes.append("events of categories recstack does not know, read as host ops: " +
                     ", ".join(f"{k!r} ({n:,})" for k, n in sorted(unknown.items())))
    if c.bad_times:
        notes.append("events left out, their time is not a time: " +
                     ", ".join(f"{k} ({n:,})" for k, n in sorted(c.bad_times.items())))
    return notes


def _device_times(root: Node) -> None:
    """``device_time_s`` on every run, stage and module node: the device time its ops launched (per step)."""
    def total(n: Node) -> float:
        own = (n.device_time_s or 0.0) if n.level == "op" else 0.0
        below = sum(total(k) for k in n.children if k.level != "kernel")
        if n.level != "op" and below > 0:
            n.device_time_s = below
        return own + below if n.level != "op" else own + below

    total(root)


def _corrections(root: Node, f: Folded) -> None:
    """Per stage, its caller code and ``other``: what the overhead correction removed, per step (mean)."""
    def put(node: Node, key: str) -> None:
        cut = f.cuts.get(key)
        if cut is None:
            return
        node.overhead_removed_s = sum(cut.cut_us) * 1e-6 / max(len(cut.cut_us), 1)
        node.overhead_events_per_step = cut.events
        node.overhead_bound = cut.bound

    for st in root.children:
        put(st, st.name)
        caller = next((c for c in st.children if c.kind == "caller"), None)
        if caller is not None:
            put(caller, caller_key(st.name))


def _tree(rt: RankTrace, model_name: str) -> Node:
    f = rt.folded
    # Every step, not the interquartile ones: the ops are summed over every step, and so are the stages.
    root = build_tree(model_name, f.timing, f.folder, central=list(range(len(f.timing.timed))))
    for n in root.walk():
        if n.level == "module" and n.name.startswith(BACKWARD_OF):
            n.kind = "backward_of"
        elif n.level == "module":
            pl = f.smap.placements.get(n.name)
            n.module_type = f.types.get(n.name)
            n.rule = pl.rule if pl else None
        elif n.level == "kernel":
            n.device_kind = f.device.kernel_kinds.get(n.name)
    _device_times(root)
    _corrections(root, f)
    assign_labels(root)
    return root


def import_trace(path: str | Path, *, rules: StageRules | None = None, step_range: str | None = None,
                 module_map: ModuleMap | None = None, model: str | None = None, correct_overhead: bool = True,
                 machine: dict[str, Any] | None = None, machine_file: str | None = None) -> Profile:
    """Import a trace file or a folder of per-rank traces (see the module docstring).

    ``correct_overhead``: remove the profiler's per-event cost, estimated from the trace, from the stage and
    step times (:mod:`recstack.traceimport.overhead`; ``overhead`` in the profile says what was removed).
    A truncated file is imported as far as it is complete, with a warning (``Profile.import_``
    says how much was read). ``machine``: classify every node against it (roofline, bound classes).
    """
    from recstack.analysis.pipeline import analyse

    files = trace_files(Path(path))
    ranks = [read_rank(p, rules, step_range, module_map, correct_overhead) for p in files]
    numbers = [r.rank for r in ranks]
    if None in numbers or len(set(numbers)) != len(numbers):
        numbers = list(range(len(ranks)))  # no (or clashing) distributedInfo.rank: by file order
    ranks = [r for _, r in sorted(zip(numbers, ranks, strict=True), key=lambda x: x[0])]
    numbers.sort()
    first = ranks[0]
    name = model or first.folded.root_type or Path(files[0].name.split(".")[0]).name
    from recstack.traceimport.cost import price_tree

    trees = [_tree(r, name) for r in ranks]
    costs = [price_tree(t, r.folded) for t, r in zip(trees, ranks, strict=True)]
    for r in ranks:
        for note in r.notes:
            warnings.warn(f"{r.path.name}: {note}", stacklevel=2)
    env = {"recstack": __version__, "torch": None, "python": None}
    prof = Profile(
        run_id=uuid.uuid4().hex[:12],
        run=_run_info(name, ranks, first),
        environment=env,
        overhead=_overhead(first.folded, correct_overhead),
        root=trees[0],
        ranks=[{"rank": n, "root": None if i == 0 else t.to_dict(), "shards": []}
               for i, (n, t) in enumerate(zip(numbers, trees, strict=True))],
        extra={"import": _import_info(ranks, numbers), "cost_model": costs[0]},
    )
    analyse(prof, machine=machine, machine_file=machine_file)
    return prof


def _overhead(f: Folded, correct: bool) -> dict[str, Any]:
    """``overhead`` of an imported profile: the estimate and the correction (rank 0's, the root tree's)."""
    per = f.overhead.per_event_us
    if not correct:
        return {"method": OVERHEAD_RAW}
    if per is None:
        return {"method": OVERHEAD_UNKNOWN}
    return {"method": OVERHEAD_ESTIMATED.format(n=f.overhead.wrappers), "per_event_s": per * 1e-6,
            "events_per_step": f.events_per_step, "removed_step_s": f.removed_us * 1e-6}


def _run_info(name: str, ranks: list[RankTrace], first: RankTrace) -> dict[str, Any]:
    f = first.folded
    return {
        "model": name,
        "source": "imported",
        "trace": str(first.path) if len(ranks) == 1 else str(first.path.parent),
        "iters": len(f.steps.starts),
        "stage_roots": {p: {"stage": pl.stage, "rule": pl.rule} for p, pl in f.smap.placements.items()
                        if pl.root and pl.stage},
        "unassigned_modules": [p for p, pl in f.smap.placements.items() if p and pl.stage is None and "." not in p],
    }


def _import_info(ranks: list[RankTrace], numbers: list[int]) -> dict[str, Any]:
    return {
        "files": [{"file": str(r.path), "rank": n, "events": r.events, "steps": len(r.folded.steps.starts),
                   "kernels": r.folded.kernels, "truncated": r.truncation is not None, "notes": r.notes,
                   "categories": r.categories, "left_out": r.left_out, "device": r.device}
                  for n, r in zip(numbers, ranks, strict=True)],
        "steps_from": ranks[0].folded.steps.source,
        "hierarchy": ranks[0].folded.hierarchy,
        "time_statistic": "mean over every step (stages, modules and ops alike)",
        "notes": [n for r in ranks for n in r.notes],
    }
