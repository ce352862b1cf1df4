"""The memory pass (``recstack profile --memory``, ``recstack memory --measure``): each stage's allocator peak from
torch.profiler's memory events, recorded on the stage nodes, shown by ``show``, beside the prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

import recstack
from recstack.cli import main
from recstack.config.run import RunConfig
from recstack.profiling.stage_memory import stage_peaks
from recstack.schema import check_profile
from recstack.schema.profile_model import MemoryPass, StageMemory
from recstack.schema.profile_model import Profile as ProfileModel
from recstack.zoo.build import resolve_config

N = 1 << 20  # 1 Mi float32: 4 MiB


def _record(prefix: str) -> list:
    rf = torch.autograd.profiler.record_function
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with rf(prefix + "a"):
            held = torch.empty(N)  # held past the stage
            tmp = torch.empty(N)  # freed inside it
            del tmp
        with rf(prefix + "b"):
            small = torch.empty(16)
        del held, small
    return list(prof.profiler.kineto_results.events())


def test_stage_peaks_of_known_allocations() -> None:
    peak, stages = stage_peaks(_record("S::"), "S::")
    # a held 4 MiB and a freed 4 MiB tensor were both live inside a: at least 8 MiB, all allocated there
    assert stages["a"]["peak_bytes"] >= 2 * N * 4
    assert stages["a"]["allocated_bytes"] >= 2 * N * 4
    assert stages["a"]["end_bytes"] >= N * 4
    # b holds what a left (its level on entry) plus its own tensor
    assert stages["b"]["peak_bytes"] >= N * 4 + 16 * 4
    assert peak >= stages["a"]["peak_bytes"]
    assert stage_peaks(_record("S::"), "S::", device="cuda")[1]["a"]["peak_bytes"] == 0  # no CUDA allocator here


def test_stage_memory_schema() -> None:
    ok = StageMemory.model_validate({"peak_bytes": 10, "allocated_bytes": 3, "device": "cpu",
                                     "predicted_peak_bytes": 9})
    assert ok.peak_bytes == 10
    for bad in ({"peak_bytes": -1, "allocated_bytes": 0, "device": "cpu"},
                {"peak_bytes": 1, "allocated_bytes": 0, "device": "tpu"},
                {"peak_bytes": "1", "allocated_bytes": 0, "device": "cpu"}):
        with pytest.raises(ValueError):
            StageMemory.model_validate(bad)


class _Wide(nn.Module):
    """An embedding bag, then a wide Linear and its ReLU: sizes the physics pins down."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(1000, 64, mode="sum")
        self.mlp = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, 1))

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.embedding(ids, offsets)).squeeze(-1)


def test_memory_pass_on_your_own_model() -> None:
    b, width = 64, 4096
    batches = [recstack.Batch((torch.randint(0, 1000, (b * 4,)), torch.arange(0, b * 4, 4)), torch.rand(b))
               for _ in range(2)]
    prof = recstack.profile(_Wide(width), batches, mode="train", memory=True, iters=2, warmup=2, op_iters=1,
                            cost_model=False, counters=False)
    mem = {st.name: st.extra["memory_peak"] for st in prof.root.children if "memory_peak" in st.extra}
    out = b * width * 4  # one fp32 activation of the wide layer
    # the ReLU's output is allocated while the Linear's output, its input, is live: two of them at once
    assert mem["dense"]["peak_bytes"] >= 2 * out
    assert mem["dense"]["saved_for_backward_bytes"] >= out  # the ReLU saves its output (the second Linear's input)
    assert mem["embedding"]["peak_bytes"] >= b * 64 * 4  # its pooled output
    assert "predicted_peak_bytes" not in mem["dense"]  # no zoo model, no prediction


@pytest.fixture(scope="module")
def memory_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mem") / "rmc1.json"
    assert main(["profile", "rmc1", "--scale", "0.001", "--batch-size", "32", "--mode", "train", "--iters", "2",
                 "--warmup", "2", "--op-iters", "1", "--memory", "-o", str(path), "--quiet"]) == 0
    return path


def test_profile_memory_records_stage_peaks(memory_profile: Path) -> None:
    doc = json.loads(memory_profile.read_text())
    check_profile(doc)  # the fields validate in the profile schema, declared (not kept as unknown keys)
    model = ProfileModel.model_validate(doc)
    assert isinstance(model.memory.memory_pass, MemoryPass) and not model.memory.memory_pass.__pydantic_extra__
    typed = [st.memory_peak for st in model.root.children if st.memory_peak is not None]
    assert len(typed) >= 8 and all(isinstance(m, StageMemory) and not m.__pydantic_extra__ for m in typed)
    assert model.memory.memory_pass.step_peak_bytes >= max(m.peak_bytes for m in typed)
    stages = {c["name"]: c for c in doc["root"]["children"]}
    for name in ("feature_processing", "embedding", "dense", "interaction", "head", "loss", "backward", "optimizer"):
        mem = stages[name]["memory_peak"]
        assert mem["device"] == "cpu" and mem["peak_bytes"] > 0
        assert mem["predicted_peak_bytes"] > 0  # a zoo model: the prediction beside the measurement
    # training: the dense and head stages' Linear layers save their inputs for backward; backward saves nothing
    assert stages["dense"]["memory_peak"]["saved_for_backward_bytes"] > 0
    assert stages["head"]["memory_peak"]["saved_for_backward_bytes"] > 0
    assert stages["backward"]["memory_peak"]["saved_for_backward_bytes"] == 0
    # the embedding stage's output, the pooled embeddings (batch x dim fp32 per table), is live at its end
    tables = resolve_config("rmc1", 0.001, None).resolved_tables()
    assert stages["embedding"]["memory_peak"]["peak_bytes"] >= 32 * sum(t.dim for t in tables) * 4


def test_show_prints_stage_memory(memory_profile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(memory_profile), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "memory pass" in out and "predicted" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("embedding") and "iB" in ln)
    assert len(line.split()) >= 4


def test_memory_measure_beside_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    from recstack.memory.commands import analyse, render

    cfg = RunConfig.build(None, {"model": "rmc1", "scale": 0.001, "batch_size": 16, "mode": "train"})
    doc = analyse(cfg, 1 << 34, measure=True)
    assert doc["provenance"] == "predicted and measured"
    by = {s["stage"]: s for s in doc["stages"]}
    assert by["embedding"]["measured_dynamic_bytes"] >= 16 * 8 * 32 * 4
    assert all(s["measured_dynamic_bytes"] > 0 for s in doc["stages"])
    assert "measured" in render(doc).splitlines()[1]


def test_memory_pass_with_ranks_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "rmc1", "--scale", "0.001", "--nproc", "2", "--memory", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --memory: ") and "Traceback" not in err
