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
sys.path.insert(0, str(Path(__file__).parent))
from test_report import EVIL, _open, browser  # noqa: E402, F401  (the headless Chromium of the report tests)

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


@pytest.fixture(scope="module")
def factory_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One CLI run on the factory with every output: -o, --apply-to, --report and --store."""
    d = tmp_path_factory.mktemp("advfactory")
    (d / "advmodel.py").write_text(FACTORY)
    got = _cli("advmodel:make", "--batch-size", "16", "--levers", "option", "--advise-iters", "48", "--rounds", "12",
               "-o", "advice.json", "--apply-to", "run.yaml", "--report", "advice.html", "--store", "results.duckdb",
               *[f"--{k.replace('_', '-')}={v}" for k, v in FAST.items()], cwd=d)
    return d, got


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "recstack", "--quiet", "advise", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_factory_lever_built_to_win_is_recommended_and_the_lossy_one_never(factory_run) -> None:
    factory_dir, got = factory_run
    out, run = factory_dir / "advice.json", factory_dir / "run.yaml"
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


def test_advice_page_renders_the_ranked_levers_and_their_stage_bars(browser, factory_run) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    d, got = factory_run
    assert got.returncode == 0, got.stderr
    doc = json.loads((d / "advice.json").read_text())
    _open(browser, d / "advice.html")  # no JS error, no console error, rendered, no image fetched
    rows = browser.find_elements(By.CSS_SELECTOR, "#ranking tbody tr")
    assert [r.get_attribute("data-name") for r in rows] == [r["name"] for r in doc["ranking"]]
    assert browser.find_element(By.ID, "winner").text == f"winner: {doc['winner']}"
    drawn = [r for r in doc["ranking"] if r["recommended"] or r["kind"] == "combination"]
    cards = browser.find_elements(By.CSS_SELECTOR, "#bars .lever-bars")
    assert [c.get_attribute("data-name") for c in cards] == [r["name"] for r in drawn] and drawn
    for card, r in zip(cards, drawn, strict=True):  # the step and every timed stage, before and after
        for which in ("before", "after"):
            assert len(card.find_elements(By.CSS_SELECTOR, f"rect.bar.{which}")) == 1 + len(r["stage_times"]) > 1
    # strings from the host (process names in the notes, a lever's reason) stay text: no markup, no script
    from recstack.report.advice import write_advice_html

    doc["notes"].append(EVIL)
    doc["ranking"][0]["reason"] = EVIL
    _open(browser, write_advice_html(doc, d / "evil.html"))
    assert EVIL in browser.find_element(By.ID, "notes").text and EVIL in browser.find_element(By.ID, "ranking").text


def test_every_what_if_is_a_row_of_the_stores_advice_table(factory_run) -> None:
    d, got = factory_run
    assert got.returncode == 0, got.stderr
    doc = json.loads((d / "advice.json").read_text())
    rows = recstack.results.load(d / "results.duckdb", "advice").sort_values("rank")
    assert list(rows["name"]) == [r["name"] for r in doc["ranking"]] and list(rows["winner"]).count(True) == 1
    top = rows.iloc[0]
    assert top["name"] == doc["winner"] and top["step_speedup"] == doc["ranking"][0]["step"]["speedup"]
    assert json.loads(top["options"]) == doc["winner_options"] and top["model"] == "advmodel:make"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    shown = subprocess.run([sys.executable, "-m", "recstack", "results", str(d / "results.duckdb"), "--table",
                            "advice"], env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and doc["winner"] in shown.stdout, shown.stderr


def test_a_newer_or_damaged_store_is_refused_before_measuring(tmp_path: Path) -> None:
    from recstack.store import db

    newer = tmp_path / "newer.duckdb"
    db.migrate(newer)
    with db.connect(newer) as con:
        con.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    (tmp_path / "junk.duckdb").write_bytes(b"not a duckdb file" * 64)
    for store, says in (("newer.duckdb", "newer than this recstack"), ("junk.duckdb", "junk.duckdb")):
        got = _cli("rmc1", "--store", store, cwd=tmp_path)
        assert got.returncode == 2 and got.stderr.startswith("error:") and says in got.stderr, got.stderr
        assert "Traceback" not in got.stderr


def test_training_levers_compare_the_loss_after_n_steps(rmc1_profile: Path) -> None:
    from recstack.advisor import measure
    from recstack.advisor.loss import LOSS_STEPS, loss_gate

    cfg = RunConfig(model="rmc1", scale=0.0005, batch_size=32, mode="train", **FAST)
    a, b = (measure.build(measure.Arm(n, cfg), capture=True) for n in ("a", "b"))
    assert a.loss == b.loss and a.loss_steps == LOSS_STEPS  # same seed, same batches: the very same loss
    doc = recstack.advise(config=cfg, levers=["dtype", "fused_optimizer"], tolerance=1e-9,
                          from_profile=rmc1_profile, rounds=2, advise_iters=4)
    tried = [r for r in doc["ranking"] if r["kind"] in ("dtype", "fused_optimizer")]
    assert tried, doc["not_tried"]
    for r in tried:  # both arms trained the same steps; bf16's loss differs from fp32's: never advised at 1e-9
        assert r["loss"]["steps"] == LOSS_STEPS and r["loss"]["base"] == a.loss, r
        assert not r["recommended"] and (r["kind"] != "dtype" or r["loss"]["rel_dev"] > 1e-9)
    # a lever beyond the tolerance on the loss alone is never advised, whatever its speed
    loss = {"steps": LOSS_STEPS, "base": 1.0, "what_if": 1.05, "rel_dev": 0.05}
    kept, why = loss_gate((True, "faster beyond noise"), loss, 1e-2)
    assert not kept and f"after {LOSS_STEPS} steps deviates 0.05" in why
    assert loss_gate((True, "faster"), {**loss, "rel_dev": 0.0}, 1e-2) == (True, "faster")


def test_compile_levers_bars_are_the_compile_analysis_stage_medians_per_sample() -> None:
    from recstack.advisor.stagebars import compile_stage_times

    stages = {"run": {"eager_s": 3.0, "compiled_s": 2.0, "speedup": 1.5},  # the step: drawn from the step result
              "dense": {"eager_s": 2.0, "compiled_s": 1.0, "speedup": 2.0},
              "head": {"eager_s": 1.0, "compiled_s": None, "speedup": None, "unavailable": "inside a region"}}
    assert compile_stage_times(stages, 4) == {"dense": {"base_s": 0.5, "what_if_s": 0.25},
                                              "head": {"base_s": 0.25, "what_if_s": None}}


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
        assert r["loss"] is None  # inference: no loss to compare
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
