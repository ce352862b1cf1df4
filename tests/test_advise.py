"""recstack advise: levers from a profile, measured against the baseline, judged by the noise rule.

A user factory with levers built to win (options that remove 20 redundant wide matrix products, or make
them 8x narrower: large, deterministic gaps, combined and measured together) and one built to lose (an option that is cheaper but changes the outputs far beyond the
tolerance, so it is never recommended whatever the host's timing). Real PyTorch, real files, real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import recstack
from recstack.config.run import RunConfig
from recstack.errors import ConfigError, ContendedRunError
from recstack.schema.advice_model import AdviceDocument

SRC = Path(__file__).resolve().parents[1] / "src"

FACTORY = textwrap.dedent('''
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, slow, wide, approx):
            super().__init__()
            self.emb = nn.EmbeddingBag(1000, 32, mode="sum")
            self.dense = nn.Linear(16, 32)
            self.head = nn.Linear(64, 1)
            self.slow, self.wide, self.approx = slow, wide, approx
            self.w = nn.Parameter(torch.randn(256, 256) / 16)
            self.w_wide = nn.Parameter(torch.randn(2048, 256) / 45)

        def forward(self, dense, ids, offsets):
            e = self.emb(ids, offsets)
            d = torch.relu(self.dense(dense))
            x = torch.tanh(d.repeat(1, 8) @ self.w)  # ops outside any module
            for _ in range(20 if self.slow else 0):  # the slow path: a product again, its result discarded;
                torch.tanh(d.repeat(1, 64) @ self.w_wide if self.wide else x @ self.w)  # wide: 8x the work
            out = self.head(torch.cat([e, d], 1)) + x.mean(1, keepdim=True)
            return out.round() if self.approx else out  # approx: far from the exact output


    def make(batch_size, seed, slow=True, wide=True, approx=False):
        torch.manual_seed(seed)
        model = Net(slow, wide, approx)

        def batch(i):
            g = torch.Generator().manual_seed(i)
            return (torch.randn(batch_size, 16, generator=g),
                    torch.randint(0, 1000, (batch_size * 4,), generator=g), torch.arange(0, batch_size * 4, 4))
        return model, batch
''')

FAST = {"iters": 4, "warmup": 2, "op_iters": 1}


@pytest.fixture
def factory_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "advmodel.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "recstack", "--quiet", "advise", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_factory_lever_built_to_win_is_recommended_and_the_lossy_one_never(factory_dir: Path) -> None:
    out = factory_dir / "advice.json"
    run = factory_dir / "run.yaml"
    got = _cli("advmodel:make", "--batch-size", "16", "--levers", "option", "--advise-iters", "48", "--rounds", "12", "-o", str(out),
               "--apply-to", str(run), *[f"--{k.replace('_', '-')}={v}" for k, v in FAST.items()], cwd=factory_dir)
    assert got.returncode == 0, got.stderr
    doc = AdviceDocument.model_validate(json.loads(out.read_text())).model_dump(by_alias=True)
    by = {r["name"]: r for r in doc["ranking"]}
    win, lose = by["slow=False"], by["approx=True"]
    assert win["recommended"] and by["wide=False"]["recommended"], win
    assert win["step"]["speedup"] > 1 and win["deviation"]["max_rel"] == 0.0
    # both winners are independent options: they are combined and the combination measured, not multiplied
    combo = by["slow=False + wide=False"]
    assert combo["kind"] == "combination" and sorted(combo["members"]) == ["slow=False", "wide=False"]
    assert combo["step"]["speedup"] is not None and combo["options"] == {"slow": False, "wide": False}
    assert doc["winner"] in by and by[doc["winner"]]["recommended"]
    # approx=True may time as faster or not; its outputs deviate far beyond the tolerance, so never advised
    assert not lose["recommended"] and lose["within_tolerance"] is False and lose["deviation"]["max_rel"] > 1e-2
    assert "slow=False" in got.stdout and "not tried: backend" in got.stdout
    reasons = {s["name"]: s["reason"] for s in doc["not_tried"]}
    assert "factory" in reasons["backend"] and "factory" in reasons["dtype=bf16"]
    cfg = RunConfig.from_yaml(run)  # --apply-to re-loads as a RunConfig
    assert cfg.model == "advmodel:make" and cfg.batch_size == 16
    assert doc["winner_options"] and all(f"{k}={v!r}" in run.read_text() for k, v in doc["winner_options"].items())


@pytest.fixture(scope="module")
def rmc1_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("advise") / "rmc1.json"
    recstack.profile_zoo("rmc1", scale=0.0005, batch_size=32, cost_model=False, counters=False, **FAST).save(path)
    return path


def test_dtype_levers_are_never_advised_above_the_tolerance(rmc1_profile: Path) -> None:
    doc = recstack.advise("rmc1", scale=0.0005, batch_size=32, levers=["dtype", "table_dtype"], tolerance=1e-9,
                          from_profile=rmc1_profile, rounds=2, advise_iters=4, **FAST)
    tried = [r for r in doc["ranking"] if r["kind"] in ("dtype", "table_dtype")]
    assert tried, doc["not_tried"]
    for r in tried:  # bf16 and fp16/int8 tables change the arithmetic: every deviation exceeds 1e-9
        assert not r["recommended"] and r["within_tolerance"] is False and r["deviation"]["max_rel"] > 1e-9, r
    assert doc["winner"] is None
    AdviceDocument.model_validate(doc)


def test_strict_gives_no_advice_on_a_contended_profile(rmc1_profile: Path, tmp_path: Path) -> None:
    data = json.loads(rmc1_profile.read_text())
    data["environment"]["contention"] = {**(data["environment"].get("contention") or {}), "detected": True,
                                         "evidence": ["CPUs oversubscribed (test)"]}
    busy = tmp_path / "busy.json"
    busy.write_text(json.dumps(data))
    with pytest.raises(ContendedRunError, match="contended"):
        recstack.advise("rmc1", scale=0.0005, batch_size=32, from_profile=busy, strict=True)


def test_from_a_profile_of_another_model_is_refused(rmc1_profile: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="profile of rmc1, not rmc2"):
        recstack.advise("rmc2", scale=0.0005, batch_size=32, from_profile=rmc1_profile)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    got = _cli("rmc1", "--from", str(garbage), cwd=tmp_path)
    assert got.returncode == 2 and got.stderr.startswith("error:") and "Traceback" not in got.stderr, got.stderr


@pytest.mark.parametrize("args, field", [
    (["rmc1", "--levers", "bogus"], "--levers"),
    (["rmc1", "--from", "missing.json"], "--from"),
    (["rmc1", "--goal", "fastest"], "--goal"),
    (["rmc1", "--device", "cuda"], "--device"),  # the what-ifs are timed on the CPU
    (["rmc1", "--compile", "cfg.yaml"], "--compile"),  # an eager baseline: compile is a lever
])
def test_bad_input_is_one_error_line_and_exit_2(args: list[str], field: str, tmp_path: Path) -> None:
    got = _cli(*args, cwd=tmp_path)
    assert got.returncode == 2, got.stderr
    assert got.stderr.startswith("error:") and field in got.stderr and "Traceback" not in got.stderr, got.stderr


def test_budget_cuts_levers_and_p99_says_it_is_not_implemented(rmc1_profile: Path) -> None:
    # 0.001 min: builds stop after 0.03 s, before the first what-if (the baseline's build alone takes longer)
    doc = recstack.advise("rmc1", scale=0.0005, batch_size=32, goal="p99", budget_min=0.001,
                          from_profile=rmc1_profile, rounds=2, advise_iters=4, **FAST)
    assert doc["ranking"] == [] and doc["winner"] is None
    reasons = [s["reason"] for s in doc["not_tried"]]
    assert any(r.startswith("--budget") for r in reasons), reasons
    assert any(s["name"] == "batch_size" and "latency" in s["reason"] for s in doc["not_tried"])  # p99: no batch lever
    assert any(s["name"] == "compile" and "--levers compile" in s["reason"] for s in doc["not_tried"])  # opt-in
    assert any("p99 is not implemented" in n for n in doc["notes"])
    AdviceDocument.model_validate(doc)
