"""The zoo: configs at published sizes, tiny builds on every backend, matching outputs, preflight."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _batches import raw_batch

import recstack.zoo
from recstack.errors import ConfigError, MemoryPreflightError
from recstack.zoo import build_model, builtin_names, summary
from recstack.zoo.build import BuildOptions, memory_estimate, resolve_config
from recstack.zoo.memory import check_fits

TINY = 0.0005


def test_published_sizes_match_models_md():
    s = {n: summary(n) for n in builtin_names()}
    assert s["rmc1"]["tables"] == 8 and s["rmc1"]["rows"] == 32_000_000
    assert s["rmc1"]["table_bytes"] == 8 * 4_000_000 * 32 * 4  # ~4.1 GB
    assert s["rmc1"]["lookups_per_sample"] == 8 * 80
    assert s["rmc2"]["tables"] == 32 and s["rmc2"]["table_bytes"] == 32 * 500_000 * 64 * 4
    assert s["rmc3"]["table_bytes"] == 10 * 2_000_000 * 32 * 4
    assert s["ncf"]["table_bytes"] == (2 * 140_000 + 2 * 28_000) * 64 * 4  # ~86 MB
    assert s["wnd"]["tables"] == 27 and s["mtwnd"]["tables"] == 43 and s["dien"]["tables"] == 43
    assert s["din"]["lookups_per_sample"] == 3 + 250 + 3 + 3
    # RMC1 dense: bottom 128-64-32, top 288-256-64-1 -> 2 x MACs
    macs = 128 * 64 + 64 * 32 + 288 * 256 + 256 * 64 + 64 * 1
    assert s["rmc1"]["dense_flops_per_sample"] == 2 * macs
    # DIEN: GRU 32->64 and AUGRU 64->64 over 40 steps, FC 64->64 + score, top 160-200-80-2
    dien = 40 * 3 * (32 * 64 + 64 * 64) + 40 * (64 * 64 + 64) + 40 * 3 * (64 * 64 + 64 * 64) + 160 * 200 + 200 * 80 + 80 * 2
    assert s["dien"]["dense_flops_per_sample"] == 2 * dien
    for name, row in s.items():
        assert row["params"] > row["dense_params"] > 0, name


def test_scale_changes_rows_only():
    full, small = summary("rmc2"), summary("rmc2", scale=0.01)
    assert small["rows"] == 32 * 5000
    assert small["dense_flops_per_sample"] == full["dense_flops_per_sample"]
    assert small["lookups_per_sample"] == full["lookups_per_sample"]


@pytest.mark.parametrize("name", builtin_names())
def test_backends_match(name):
    outs = {}
    for backend in ("torch", "torchrec", "tbe"):
        model = build_model(name, scale=TINY, backend=backend, seed=7)
        batch = raw_batch(model, 12, seed=1)
        with torch.no_grad():
            outs[backend] = model(batch)
    ref = outs["torch"]
    assert ref.shape[0] == 12 and torch.isfinite(ref).all()
    assert ref.std() > 0  # outputs depend on inputs
    for backend in ("torchrec", "tbe"):
        torch.testing.assert_close(outs[backend], ref, rtol=1e-5, atol=1e-6)


def test_seed_changes_weights():
    a = build_model("rmc1", scale=TINY, seed=1)
    b = build_model("rmc1", scale=TINY, seed=2)
    batch = raw_batch(a, 8)
    with torch.no_grad():
        assert not torch.allclose(a(batch), b(batch))


def test_tbe_runs_fbgemm_table_batched_ops():
    from torch.profiler import ProfilerActivity, profile

    for mode, needle in (("inference", "fbgemm::int_nbit_split_embedding"), ("train", "fbgemm::split_embedding")):
        model = build_model("rmc1", scale=TINY, backend="tbe", mode=mode)
        batch = raw_batch(model, 8)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            if mode == "train":
                model.loss(model(batch), batch.labels).backward()
            else:
                with torch.inference_mode():
                    model(batch)
        names = {e.name for e in prof.events()}
        assert any(n.startswith(needle) for n in names), sorted(n for n in names if "fbgemm" in n)
        assert not any(n == "aten::embedding_bag" for n in names)


def test_tbe_training_kernel_needs_no_grad_not_inference_mode():
    model = build_model("rmc1", scale=TINY, backend="tbe", mode="train")
    assert model.sparse_arch.supports_inference_mode is False
    assert model.sparse_arch.fused_optimizer is True
    batch = raw_batch(model, 4)
    with torch.no_grad():
        assert model(batch).shape == (4, 1)


@pytest.mark.parametrize("table_dtype,tol", [("fp16", 2e-3), ("int8", 3e-2)])
def test_tbe_quantised_tables_close_to_fp32(table_dtype, tol):
    ref = build_model("rmc2", scale=TINY, backend="torch", seed=3)
    q = build_model("rmc2", scale=TINY, backend="tbe", table_dtype=table_dtype, seed=3)
    batch = raw_batch(ref, 8)
    with torch.no_grad():
        e_ref = ref.sparse_arch(ref.feature_processing(batch))
    with torch.inference_mode():
        e_q = q.sparse_arch(q.feature_processing(batch))
    for name in e_ref:
        scale = e_ref[name].abs().max().item()
        assert (e_q[name] - e_ref[name]).abs().max().item() <= tol * max(scale, 1e-3) * 10


@pytest.mark.parametrize("backend", ["torch", "torchrec", "tbe"])
def test_train_step_updates_tables(backend):
    model = build_model("rmc1", scale=TINY, backend=backend, mode="train")
    batch = raw_batch(model, 16)
    w0 = {k: v.clone() for k, v in model.sparse_arch.table_weights().items()}
    params = [p for n, p in model.named_parameters() if not model.sparse_arch.fused_optimizer or not n.startswith("sparse_arch")]
    opt = torch.optim.SGD(params, lr=0.5)
    loss = model.loss(model(batch), batch.labels)
    loss.backward()
    opt.step()
    w1 = model.sparse_arch.table_weights()
    assert any(not torch.equal(w0[k], w1[k]) for k in w0)


def test_mtwnd_tasks_parameter():
    model = build_model("mtwnd", scale=TINY, tasks=3)
    batch = raw_batch(model, 5)
    with torch.no_grad():
        assert model(batch).shape == (5, 3)
    with pytest.raises(ConfigError, match="--tasks"):
        resolve_config("rmc1", tasks=2)


def test_dien_cells_are_config_choices(tmp_path):
    cfg = resolve_config("dien", TINY).model_copy(update={"evolution_cell": "rnn", "extractor_cell": "rnn"})
    model = build_model(cfg)
    with torch.no_grad():
        assert model(raw_batch(model, 4)).shape == (4, 2)


def test_din_handles_variable_length_sequences():
    model = build_model("din", scale=TINY)
    batch = raw_batch(model, 6)
    lens = batch.sparse["behaviour_items"].lengths
    assert int(lens.max()) <= 250 and lens.min() >= 1
    with torch.no_grad():
        out = model(batch)
    assert out.shape == (6, 2)


def test_bf16_dense_layers():
    model = build_model("rmc3", scale=TINY)
    model.set_dense_dtype(torch.bfloat16)
    with torch.no_grad():
        out = model(raw_batch(model, 4))
    assert out.dtype == torch.bfloat16
    assert model.sparse_arch.bags["t_0"].weight.dtype == torch.float32


def test_memory_preflight_refuses_with_fitting_scale(monkeypatch):
    monkeypatch.setenv("RECSTACK_MEMORY_LIMIT", str(1 * 2**30))
    with pytest.raises(MemoryPreflightError) as info:
        build_model("rmc1", scale=1.0)
    msg = str(info.value)
    assert "needs" in msg and "--scale" in msg
    fit = float(msg.rsplit("--scale ", 1)[1].split()[0])
    est = memory_estimate(resolve_config("rmc1", fit), BuildOptions())
    check_fits(est, model="rmc1", scale=fit)  # the suggested scale fits
    model = build_model("rmc1", scale=fit / 100)
    assert model is not None


def test_train_estimate_counts_optimizer_state():
    cfg = resolve_config("rmc2", 0.01)
    inf = memory_estimate(cfg, BuildOptions(mode="inference"))
    tr = memory_estimate(cfg, BuildOptions(mode="train", backend="torchrec", optimizer="adagrad"))
    assert tr.table_grads == inf.tables and tr.optimizer_state == inf.tables


def test_bad_configs_name_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\narch: dlrm\nembedding_dim: 8\ndense_features: 4\ntables: [{name: t, rows: -5}]\n")
    with pytest.raises(ConfigError, match=r"tables\.0\.rows"):
        resolve_config(str(bad))
    bad.write_text(
        "name: x\narch: dlrm\nembedding_dim: 8\ndense_features: 4\ntables: [{name: t, rows: 50}]\n"
        "bottom_mlp: [4, 8]\ntop_mlp: [99, 1]\n"
    )
    with pytest.raises(ConfigError, match=r"top_mlp\[0\].*16"):
        build_model(str(bad))
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        resolve_config(str(bad))
    with pytest.raises(ConfigError, match="unknown model"):
        resolve_config("rmc9")


def test_user_yaml_model_builds(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text(
        "name: mine\narch: dlrm\nembedding_dim: 8\ndense_features: 4\n"
        "tables: [{name: t, rows: 100, count: 3, pooling: 2}]\n"
        "bottom_mlp: [4, 8]\ninteraction: dot\ntop_mlp: [14, 4, 1]\n"
    )
    model = build_model(str(p))
    with torch.no_grad():
        assert model(raw_batch(model, 3)).shape == (3, 1)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recstack", *args], capture_output=True, text=True, timeout=120)


def test_cli_zoo_list_json():
    r = run_cli("zoo", "list", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == builtin_names()
    for key in ("name", "tables", "rows", "table_bytes", "lookups_per_sample", "dense_flops_per_sample", "params"):
        assert key in rows[0]


def test_cli_zoo_show_and_errors():
    r = run_cli("zoo", "show", "din", "--scale", "0.001")
    assert r.returncode == 0, r.stderr
    assert "attention" in r.stdout and "behaviour_items" in r.stdout
    r = run_cli("zoo", "show", "nosuch")
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr
    r = run_cli("zoo", "list", "--scale", "-1")
    assert r.returncode == 2 and "--scale" in r.stderr


def test_architecture_registry_is_the_one_list_of_archs_and_models():
    """The arch literal, the shipped models and the sweep preset come from the registry and configs/."""
    from recstack.sweeps.presets import PRESETS
    from recstack.zoo import archs
    from recstack.zoo.config import ARCHS, BUILTIN, ModelConfig, load_model_config

    shipped = {p.stem for p in (Path(recstack.zoo.__file__).parent / "configs").glob("*.yaml")}
    assert set(BUILTIN) == shipped and len(BUILTIN) == len(shipped)
    assert PRESETS["characterise"]["grid"]["model"] == list(BUILTIN)
    assert ARCHS == archs.names() and ModelConfig.model_fields["arch"].annotation.__args__ == ARCHS
    assert {load_model_config(n).arch for n in BUILTIN} == set(ARCHS)  # every record is used by a shipped model
    for a in archs.all_archs():  # every record's class and footprint hook resolve
        assert a.model_class().__name__ and callable(archs._load(a.activations))
    with pytest.raises(KeyError, match="the architectures are dlrm, ncf"):
        archs.get("nope")
