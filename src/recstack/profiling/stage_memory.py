"""The memory pass's figures (``recstack profile --memory``): each stage's allocator peak from torch.profiler's memory
events, and the typed accessors of a stage node's ``memory_peak`` (the schema's ``StageMemory``). No torch import:
``show`` and the report read these."""

from __future__ import annotations

from typing import Any

SAVED = "recstack.saved::"  # a zero-length range per tensor autograd saves: its storage's bytes (the memory pass)


def stage_peaks(events: list[Any], prefix: str, device: str = "cpu") -> tuple[int, dict[str, dict[str, int]]]:
    """From one step's torch.profiler events (``profile_memory=True``): the step's peak of live bytes above its start,
    and per ``prefix``-named range (``prefix + stage``) ``{"peak_bytes", "allocated_bytes", "end_bytes"}`` and,
    where the step marked the tensors autograd saved (:data:`SAVED` ranges), ``"saved_bytes"``: their sum inside it.

    The memory events of ``device``'s allocator are summed in order (a free is a negative event); the level on
    entering a range counts as part of its peak (what the stage holds from the start). A stage entered more than
    once keeps its largest peak, the sum of its allocations and its last end level. Levels are clamped at zero
    (frees of what was allocated before the step lower the running sum).
    """
    import bisect

    kind = "CUDA" if device == "cuda" else "CPU"
    mem = sorted((e.start_ns(), e.nbytes()) for e in events
                 if e.name() == "[memory]" and kind in str(e.device_type()))
    times, level, running = [], [], 0
    for t, n in mem:
        running += n
        times.append(t)
        level.append(running)
    saved = sorted((e.start_ns(), int(e.name()[len(SAVED):])) for e in events if e.name().startswith(SAVED))
    saved_at = [t for t, _n in saved]
    out: dict[str, dict[str, int]] = {}
    for e in events:
        if not e.name().startswith(prefix):
            continue
        lo, hi = bisect.bisect_left(times, e.start_ns()), bisect.bisect_right(times, e.end_ns())
        entry = level[lo - 1] if lo else 0
        peak = max([entry, *level[lo:hi]])
        alloc = sum(n for _t, n in mem[lo:hi] if n > 0)
        st = out.setdefault(e.name()[len(prefix):], {"peak_bytes": 0, "allocated_bytes": 0, "end_bytes": 0})
        st["peak_bytes"] = max(st["peak_bytes"], max(peak, 0))
        st["allocated_bytes"] += alloc
        st["end_bytes"] = max(level[hi - 1] if hi else 0, 0)
        lo, hi = bisect.bisect_left(saved_at, e.start_ns()), bisect.bisect_right(saved_at, e.end_ns())
        if saved:
            st["saved_bytes"] = st.get("saved_bytes", 0) + sum(n for _t, n in saved[lo:hi])
    return max([0, *level]), out


def set_stage_memory(node: Any, figures: dict[str, Any]) -> None:
    """Record a stage's memory-pass figures on its node (validated as the schema's ``StageMemory``)."""
    from recstack.schema.profile_model import StageMemory

    node.memory_peak = StageMemory.model_validate(figures).model_dump(exclude_none=True)


def stage_memory(node: Any) -> Any:
    """The stage's ``StageMemory`` (schema model), or None where the memory pass did not run."""
    from recstack.schema.profile_model import StageMemory

    raw = node.memory_peak
    return None if raw is None else StageMemory.model_validate(raw)


def mark_saved_tensors(exclude: set[int]) -> Any:
    """A ``torch.autograd.graph.saved_tensors_hooks`` context that marks each storage autograd saves for backward
    once (a :data:`SAVED` range named by its bytes), storages in ``exclude`` (parameters, buffers) not."""
    import torch

    seen = set(exclude)

    def pack(t: Any) -> Any:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse and other storage-less tensors: not marked
            return t
        key = storage.data_ptr()
        if key and key not in seen and t.device.type != "meta":
            seen.add(key)
            with torch.autograd.profiler.record_function(f"{SAVED}{storage.nbytes()}"):
                pass
        return t

    return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
