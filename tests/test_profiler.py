"""The hierarchical profiler on real models: stages, attribution, overhead, JSON, trace, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from _batches import raw_batch

import recstack
from recstack.errors import ConfigError
from recstack.profiling.rules import StageRule, StageRules
from recstack.tree import Profile
from recstack.zoo import build_model, builtin_names

TINY = 0.0005

EXPECTED_STAGES = {
    "rmc1": {"feature_processing", "embedding", "dense", "interaction", "head"},
    "rmc2": {"feature_processing", "embedding", "dense", "interaction", "head"},
    "rmc3": {"feature_processing", "embedding", "dense", "interaction", "head"},
    "ncf": {"feature_processing", "embedding", "dense", "interaction", "head"},
    "wnd": {"feature_processing", "embedding", "dense", "interaction", "head"},
    "mtwnd": {"feature_processing", "embedding", "dense", "interaction", "head"},
    "din": {"feature_processing", "embedding", "sequence", "head"},
    "dien": {"feature_processing", "embedding", "sequence", "head"},
}


def _profile(name: str, backend: str = "torch", mode: str = "inference", batch: int = 32, **kw):
    model = build_model(name, scale=TINY, backend=backend, mode=mode)
    return recstack.profile(
        model,
        lambda i: raw_batch(model, batch, seed=i),
        batch_size=batch,
        mode=mode,
        iters=kw.pop("iters", 4),
        warmup=kw.pop("warmup", 1),
        op_iters=1,
        num_batches=2,
        run_info={"model": name, "backend": backend},
        **kw,
    )


def _stages(prof: Profile) -> set[str]:
    return {c.name for c in prof.root.children if c.time_s > 0 and c.name != "other"}


@pytest.mark.parametrize("backend", ["torch", "torchrec", "tbe"])
@pytest.mark.parametrize("name", builtin_names())
def test_every_zoo_model_profiles_with_stages_found(name, backend):
    train = _profile(name, backend, mode="train", iters=2, warmup=1)
    assert _stages(train) == EXPECTED_STAGES[name] | {"loss", "backward", "optimizer"}
    prof = _profile(name, backend)
    assert _stages(prof) == EXPECTED_STAGES[name]
    assert prof.run["grad_mode"] == "inference_mode"
    emb = prof.stage("embedding")
    ops = {n.name for n in emb.walk() if n.level == "op"}
    want = {"torch": "aten::embedding_bag", "torchrec": "aten::embedding_bag", "tbe": "fbgemm::int_nbit_split_embedding"}
    assert any(o.startswith(want[backend]) or o == "aten::_embedding_bag" for o in ops), ops


@pytest.mark.parametrize("backend", ["torch", "torchrec", "tbe"])
def test_train_mode_has_loss_backward_optimizer(backend):
    prof = _profile("rmc1", backend, mode="train")
    names = {c.name for c in prof.root.children}
    assert {"loss", "backward", "optimizer"} <= names
    bw = prof.stage("backward")
    per_stage = {c.name for c in bw.children if c.level == "stage"}
    assert {"embedding", "head"} <= per_stage, per_stage
    if backend == "tbe":
        assert prof.run["optimizer_fused_into_backward"] is True
        assert prof.run["grad_mode"] == "train"
        assert "fused" in prof.stage("optimizer").extra["note"]
    else:
        assert prof.run["optimizer_fused_into_backward"] is False


def test_tbe_train_kernel_runs_inference_under_no_grad():
    model = build_model("rmc1", scale=TINY, backend="tbe", mode="train")
    prof = recstack.profile(model, [raw_batch(model, 8)], iters=2, warmup=0, op_iters=1)
    assert prof.run["grad_mode"] == "no_grad"


def test_children_add_up_and_ops_nest():
    prof = _profile("rmc3", batch=64, iters=6)
    for stage in prof.root.children:
        kids = sum(c.time_s for c in stage.children)
        assert kids <= stage.time_s * 1.0001
        if stage.name != "other":
            assert kids >= 0.5 * stage.time_s, stage.name
    for node in prof.nodes():
        if node.children and node.level in ("module", "op"):
            assert sum(c.time_s for c in node.children) <= node.time_s * 1.0001 + 1e-12, node.path
    linear = [n for n in prof.stage("dense").walk() if n.name == "aten::linear"]
    assert linear and any(c.name == "aten::addmm" for c in linear[0].children)
    paths = [n.path for n in prof.nodes()]
    assert len(paths) == len(set(paths))
    addmm = next(n for n in prof.nodes() if n.name == "aten::addmm")
    assert addmm.extra["distinct_shapes"] >= 1 and addmm.extra["shapes"]
    assert addmm.flops > 0 and addmm.bytes > 0  # the cost model fills it (tests/test_costmodel.py)
    assert addmm.intensity == pytest.approx(addmm.flops / addmm.bytes)


def test_other_is_small_for_zoo_model():
    prof = _profile("rmc2", batch=256, iters=8, warmup=2)
    other = prof.stage("other")
    assert other is not None
    assert other.time_s < 0.05 * prof.root.time_s, (other.time_s, prof.root.time_s)


def test_overhead_and_latency_fields():
    prof = _profile("ncf", batch=128, iters=6)
    ov = prof.overhead
    lo, hi = ov["stage_pass_ratio_ci"]
    assert lo <= ov["stage_pass_ratio"] <= hi
    assert ov["uninstrumented_step_s"] > 0 and ov["op_pass_ratio"] > 0
    lat = prof.root.extra["latency_s"]
    assert lat["p50"] <= lat["p90"] <= lat["p99"]
    assert prof.root.extra["throughput_samples_per_s"] == pytest.approx(128 / lat["p50"])
    for st in prof.root.children:
        assert st.extra["time_s_p10"] <= st.time_s <= st.extra["time_s_p90"] + 1e-12
    # stage times (other included) are means over the same central steps: they add up to the run
    assert sum(st.time_s for st in prof.root.children) == pytest.approx(prof.root.time_s, rel=1e-9)
    assert prof.root.extra["time_s_p10"] <= prof.root.time_s <= prof.root.extra["time_s_p90"]


def test_save_load_lossless(tmp_path):
    prof = _profile("din")
    path = prof.save(tmp_path / "p.json")
    again = Profile.load(path)
    assert again.to_dict() == json.loads(path.read_text())
    assert again.to_dict() == prof.to_dict()
    d = json.loads(path.read_text())
    assert d["schema"] == "recstack.profile" and isinstance(d["schema_version"], int)
    for key in ("run_id", "run", "environment", "overhead", "ranks", "root"):
        assert key in d
    for key in ("model", "batch_size", "mode", "backend", "dtype", "threads", "device", "seed"):
        assert key in d["run"]
    for key in ("python", "torch", "recstack", "cpu_model", "cores", "host"):
        assert key in d["environment"]
    node = d["root"]["children"][0]
    for key in ("name", "path", "level", "stage", "time_s", "self_time_s", "calls", "children", "flops", "bytes", "intensity"):
        assert key in node


def test_load_rejects_bad_files(tmp_path):
    from recstack.errors import DataError

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="cannot read"):
        Profile.load(bad)
    bad.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(DataError, match="not a recstack profile"):
        Profile.load(bad)


def test_stage_rules_override(tmp_path):
    rules = StageRules(rules=[StageRule(match="over_arch", stage="dense")])
    prof = _profile("rmc1", stage_rules=rules)
    assert "head" not in _stages(prof)
    assert prof.run["stage_roots"]["over_arch"] == {"stage": "dense", "rule": "user:over_arch"}
    bad = tmp_path / "rules.yaml"
    bad.write_text("rules:\n  - {match: 'x', stage: nonsense}\n")
    with pytest.raises(ConfigError, match="rules.0"):
        _profile("rmc1", stage_rules=str(bad))


def test_trace_ranges_enclose_ops(tmp_path):
    trace = tmp_path / "t.json"
    _profile("rmc1", trace=str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    stages = [e for e in events if e.get("name", "").startswith("recstack.stage::embedding")]
    bags = [e for e in events if e.get("name") == "aten::embedding_bag"]
    assert stages and bags
    s = stages[0]
    inside = [b for b in bags if s["ts"] <= b["ts"] and b["ts"] + b["dur"] <= s["ts"] + s["dur"] + 1]
    assert inside


def test_bf16_dense_is_recorded():
    prof = _profile("rmc3", dtype="bf16")
    assert prof.run["dtype"] == "bf16" and prof.run["dtype_note"]


def test_torchrec_dlrm_built_outside_recstack():
    torchrec = pytest.importorskip("torchrec")
    from torchrec.models.dlrm import DLRM
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    tables = [
        EmbeddingBagConfig(name=f"t{i}", embedding_dim=8, num_embeddings=100, feature_names=[f"f{i}"]) for i in range(3)
    ]
    model = DLRM(
        embedding_bag_collection=EmbeddingBagCollection(tables=tables),
        dense_in_features=4,
        dense_arch_layer_sizes=[16, 8],
        over_arch_layer_sizes=[16, 1],
    )
    g = torch.Generator().manual_seed(0)

    def batch(i: int):
        lengths = torch.randint(0, 4, (3 * 16,), generator=g)
        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=["f0", "f1", "f2"], values=torch.randint(0, 100, (int(lengths.sum()),), generator=g), lengths=lengths
        )
        return (torch.rand(16, 4, generator=g), kjt)

    assert torchrec is not None
    for mode in ("inference", "train"):
        prof = recstack.profile(model, batch, batch_size=16, mode=mode, iters=3, warmup=1, op_iters=1)
        assert {"embedding", "dense", "interaction", "head"} <= _stages(prof)
        assert prof.run["stage_roots"]["sparse_arch"]["stage"] == "embedding"


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recstack", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_cli_factory_profile_and_show(tmp_path):
    (tmp_path / "mymodels.py").write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            class Tiny(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embedding = nn.EmbeddingBag(50, 4, mode="sum")
                    self.top_mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

                def forward(self, ids, offsets):
                    return self.top_mlp(self.embedding(ids, offsets))

            def factory(batch_size, seed):
                g = torch.Generator().manual_seed(seed)
                def batch():
                    return (torch.randint(0, 50, (batch_size * 3,), generator=g), torch.arange(0, batch_size * 3, 3))
                return Tiny(), batch
            """
        )
    )
    import os

    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = tmp_path / "p.json"
    r = _cli("profile", "mymodels:factory", "--batch-size", "8", "--iters", "3", "--warmup", "1", "-o", str(out), env=env)
    assert r.returncode == 0, r.stderr
    assert "embedding" in r.stdout and "head" in r.stdout
    prof = Profile.load(out)
    assert {"embedding", "head"} <= _stages(prof)
    r = _cli("show", str(out), "--depth", "1")
    assert r.returncode == 0 and "embedding" in r.stdout
    r = _cli("show", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and r.stderr.startswith("error:")
    r = _cli("profile", "nosuchmod:factory", env=env)
    assert r.returncode == 2 and "nosuchmod" in r.stderr


@pytest.mark.parametrize("backend", ["torch", "tbe"])
def test_embedding_tables_and_memory(backend):
    from recstack.zoo.embedding import hash_ids

    model = build_model("rmc2", scale=TINY, backend=backend)
    batches = [raw_batch(model, 64, seed=i) for i in range(2)]
    prof = recstack.profile(model, batches, iters=2, warmup=0, op_iters=1)
    tables = prof.extra["embedding_tables"]
    assert len(tables) == 32
    t0 = tables[0]
    ids = hash_ids(batches[0].sparse[t0["feature"]].values, t0["rows"])
    assert t0["lookups"] == ids.numel()
    assert t0["unique_rows"] == len(set(ids.tolist()))
    assert t0["bytes_requested"] == t0["lookups"] * 64 * 4
    assert t0["bytes_unique"] == t0["unique_rows"] * 64 * 4
    assert t0["pooling_factor"] == pytest.approx(t0["lookups"] / 64)
    mem = prof.extra["memory"]
    emb = mem["resident_by_stage"]["embedding"]
    assert emb["parameters_bytes"] + emb["buffers_bytes"] >= sum(t["table_bytes"] for t in tables)
    assert mem["peak_step"]["peak_rss_bytes"] > 0
    assert prof.stage("embedding").extra["resident_bytes"] == emb


def test_train_tables_touch_unique_rows():
    model = build_model("rmc1", scale=TINY, backend="torch", mode="train")
    prof = recstack.profile(model, [raw_batch(model, 32)], mode="train", optimizer="adagrad", iters=2, warmup=1, op_iters=1)
    t = prof.extra["embedding_tables"][0]
    assert t["backward_rows_touched"] == t["unique_rows"]
    assert t["optimizer_bytes"] == 5 * t["bytes_unique"]
    assert t["table_bytes"] <= t["optimizer_state_bytes"] <= t["table_bytes"] + 64  # dense state (+ step)
    assert prof.extra["memory"]["resident_by_stage"]["embedding"]["optimizer_state_bytes"] >= t["table_bytes"]


def test_demo_writes_profile_trace_roofline_and_report(tmp_path):
    from recstack.hardware.machine import measure_machine, save_machine

    machine = save_machine(measure_machine(tiny=True), tmp_path / "machine.json")
    out = tmp_path / "demo"
    r = _cli("demo", "--scale", "0.0005", "--batch-size", "32", "--out", str(out), "--machine", str(machine))
    assert r.returncode == 0, r.stderr
    for name in ("rmc1.profile.json", "rmc1.trace.json", "rmc1.roofline.png", "rmc1.roofline.svg", "rmc1.report.html"):
        assert (out / name).stat().st_size > 0, name
    prof = Profile.load(out / "rmc1.profile.json")
    assert prof.run["workload"] == "production"
    assert prof.stage("embedding").extra["bound"] in ("memory", "compute", "overhead")
    assert "report written to" in r.stdout


def test_central_steps_are_robust_and_additive():
    from recstack.profiling.stats import central_mean, central_steps

    totals = [10.0, 11.0, 12.0, 13.0, 100.0, 9.0, 12.5, 11.5]  # one step hit by interference
    idx = central_steps(totals)
    assert 4 not in idx and 5 not in idx and len(idx) == 4
    assert 11.0 <= central_mean(totals, idx) <= 12.5
    a = [t * 0.25 for t in totals]
    b = [t * 0.75 for t in totals]
    assert central_mean(a, idx) + central_mean(b, idx) == pytest.approx(central_mean(totals, idx))
    assert central_steps([5.0]) == [0] and central_steps([]) == []
