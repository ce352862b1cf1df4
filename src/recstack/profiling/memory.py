"""Memory figures of a profile: bytes resident per stage and per table, and the step's peak.

* Resident bytes (computed from tensor sizes): parameters, buffers and plain
  tensor attributes of every module, assigned to the stage of its stage root (so tables land in
  ``embedding``), plus optimizer state tensors (assigned by the parameter they
  belong to). FBGEMM's training kernel keeps its fused optimizer state as
  module buffers, so it is counted with the tables.
* Peak process memory of one step (measured): on Linux the kernel's peak
  resident set (``VmHWM``) is reset through ``/proc/self/clear_refs`` before
  the step and read after it; the figure is the process's peak RSS during that
  step (model, inputs and temporaries; it includes the Python interpreter).
  With CUDA, ``torch.cuda.max_memory_allocated`` after a reset. Where the
  reset is not permitted, the figure is marked ``lifetime peak``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from recstack.profiling.rules import StageMap


def _tensor_bytes(t: torch.Tensor) -> int:
    return int(t.numel() * t.element_size()) if t.device.type != "meta" else 0


def _stage_of(path: str, smap: StageMap) -> str:
    while True:
        st = smap.stage_of(path)
        if st is not None:
            return st
        if not path:
            return "other"
        path = path.rsplit(".", 1)[0] if "." in path else ""


def resident_by_stage(model: nn.Module, smap: StageMap, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    """``{stage: {"parameters_bytes", "buffers_bytes", "optimizer_state_bytes"}}`` (computed)."""
    out: dict[str, dict[str, int]] = {}
    owner: dict[int, str] = {}
    seen: set[int] = set()
    for mpath, mod in model.named_modules():
        stage = _stage_of(mpath, smap)
        for p in mod.parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            owner[id(p)] = stage
            out.setdefault(stage, {"parameters_bytes": 0, "buffers_bytes": 0, "optimizer_state_bytes": 0})["parameters_bytes"] += _tensor_bytes(p)
        # Registered buffers, and plain tensor attributes (FBGEMM's inference kernel keeps its tables so).
        plain = [v for v in vars(mod).values() if isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter)]
        for b in list(mod.buffers(recurse=False)) + plain:
            if id(b) in seen:
                continue
            seen.add(id(b))
            out.setdefault(stage, {"parameters_bytes": 0, "buffers_bytes": 0, "optimizer_state_bytes": 0})["buffers_bytes"] += _tensor_bytes(b)
    if optimizer is not None:
        for p, state in optimizer.state.items():
            stage = owner.get(id(p), "other")
            n = sum(_tensor_bytes(v) for v in state.values() if isinstance(v, torch.Tensor))
            out.setdefault(stage, {"parameters_bytes": 0, "buffers_bytes": 0, "optimizer_state_bytes": 0})["optimizer_state_bytes"] += n
    return out


def _read_status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_step_memory(run_step: Callable[[], None]) -> dict[str, Any]:
    """Run one step and measure the process's peak memory during it."""
    result: dict[str, Any] = {"provenance": "measured"}
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    reset = False
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        reset = True
    except OSError:
        pass
    before = _read_status_kb("VmRSS")
    run_step()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        result["cuda_peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
    hwm = _read_status_kb("VmHWM")
    if hwm is None:
        import resource

        result["peak_rss_bytes"] = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
        result["basis"] = "lifetime peak (getrusage); /proc is unavailable"
        return result
    result["peak_rss_bytes"] = hwm * 1024
    result["rss_before_step_bytes"] = (before or 0) * 1024
    result["step_increase_bytes"] = max(0, hwm - (before or 0)) * 1024
    result["basis"] = "peak RSS during the step (VmHWM reset via clear_refs)" if reset else (
        "lifetime peak RSS (VmHWM; reset via /proc/self/clear_refs not permitted)"
    )
    return result
