"""The per-stage counter replay (recstack.profiling.counters_replay) with real perf and a real model.

Hardware events are unavailable on most CI hosts (virtual machines without a
PMU), so the replay is counted with a software event (``task-clock``), which
needs only perf with ``--control`` (>= 5.10); without it those tests skip.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from recstack.hardware.counters import PerfStatus, detect_perf
from recstack.profiling.counters_replay import capture_stage_calls, measure_stages

REPEATS = 5


class Twice(nn.Module):
    """Calls its ``block`` twice per forward (as a model does with a module list it loops over)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.head = nn.Linear(8, 1)
        self.unused = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.block(x)))


def _step(model: nn.Module, x: torch.Tensor):
    def run() -> None:
        with torch.inference_mode():
            model(x)

    return run


@pytest.fixture(scope="module")
def perf() -> PerfStatus:
    status = detect_perf()
    if status.perf is None or not status.control:
        pytest.skip(f"perf with --control is needed: {status.reason}")
    return status


def test_capture_records_each_outermost_root_call() -> None:
    model, x = Twice(), torch.randn(4, 8)
    calls = capture_stage_calls(model, _step(model, x), {"block": "dense", "block.0": "inner", "head": "head"})
    assert len(calls["dense"]) == 2 and len(calls["inner"]) == 2 and len(calls["head"]) == 1
    assert calls["dense"][0][0] is model.block and calls["dense"][0][1][0] is x  # module, args
    with pytest.raises(ValueError, match="nope"):
        capture_stage_calls(model, _step(model, x), {"nope": "dense"})


def test_replay_counts_each_stage_in_its_own_session(perf: PerfStatus) -> None:
    model, x = Twice(), torch.randn(4, 8)
    roots = {"block": "dense", "head": "head", "unused": "idle"}
    res = measure_stages(model, _step(model, x), roots, REPEATS, events=["task-clock"], status=perf)
    assert res["available"] is True and res["perf"] == perf.version
    assert res["stages"]["idle"] == {"available": False, "reason": "stage root was not called during the step"}
    for stage, calls in (("dense", 2), ("head", 1)):
        s = res["stages"][stage]
        assert s["roots"] == [next(p for p, st in roots.items() if st == stage)]
        assert s["root_calls_per_step"] == calls and s["calls"] == REPEATS
        clock = s["events"]["task-clock"]
        assert clock["status"] == "counted" and clock["value"] > 0


def test_replay_without_usable_perf_says_why() -> None:
    model, x = Twice(), torch.randn(4, 8)
    absent = PerfStatus(False, "perf is not installed")
    res = measure_stages(model, _step(model, x), {"head": "head"}, REPEATS, status=absent)
    assert res == {"available": False, "reason": "perf is not installed"}
