"""The hierarchical profiler on real models: stages, attribution, overhead, JSON, trace, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

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
    "dlrmv2": {"feature_processing", "embedding", "dense", "interaction", "head"},
    "deepfm": {"feature_processing", "embedding", "dense", "interaction", "head"},
    "twotower": {"feature_processing", "embedding", "dense", "interaction"},
    "bst": {"feature_processing", "embedding", "sequence", "head"},
    "hstu": {"feature_processing", "embedding", "sequence", "interaction"},
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


GOLDEN = Path(__file__).parent / "data" / "zoo_stage_modules.json"


def _modules_by_stage(prof: Profile) -> dict[str, list[str]]:
    """Stage -> the sorted names of the module nodes under it (every depth; not the bracketed residues such as
    ``[caller code]``, whose presence depends on measured time)."""
    return {s.name: sorted({n.name for n in s.walk() if n.level == "module" and not n.name.startswith("[")})
            for s in prof.root.children if s.name != "other"}


def _check_golden(key: str, got: dict[str, list[str]]) -> None:
    """Compare with tests/data/zoo_stage_modules.json; RECSTACK_UPDATE_GOLDEN=1 rewrites the entry instead."""
    import os

    data = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("RECSTACK_UPDATE_GOLDEN") == "1":
        data[key] = got
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return
    assert key in data, f"no golden for {key}: run with RECSTACK_UPDATE_GOLDEN=1 once and review the diff"
    assert got == data[key], key


@pytest.mark.parametrize("backend", ["torch", "torchrec", "tbe"])
@pytest.mark.parametrize("name", builtin_names())
def test_every_zoo_model_profiles_with_stages_found(name, backend):
    train = _profile(name, backend, mode="train", iters=2, warmup=1)
    assert _stages(train) == EXPECTED_STAGES[name] | {"loss", "backward", "optimizer"}
    prof = _profile(name, backend)
    assert _stages(prof) == EXPECTED_STAGES[name]
    # which module lands in which stage, against a golden written before the stage rules changed
    for mode, p in (("train", train), ("inference", prof)):
        _check_golden(f"{name}/{backend}/{mode}", _modules_by_stage(p))
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
    assert prof.run["loss"]["function"] == "model.loss" and prof.run["loss"]["labels"] == "batch"
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
        # children (with [unattributed] where the op pass saw less) plus the stage's own glue make the stage
        kids = sum(c.time_s for c in stage.children)
        assert kids <= stage.time_s * (1 + 1e-9) + 1e-15, stage.name
        assert kids + stage.self_time_s == pytest.approx(stage.time_s, rel=1e-9, abs=1e-15), stage.name
        factor = stage.extra.get("apportion_factor")
        assert factor is None or 0.0 <= factor <= 1.0, (stage.name, factor)  # apportioning never scales up
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


def _assert_ops_accounted(prof: Profile) -> None:
    """Every op the op pass recorded lands in the tree: outermost ops' op-pass times sum to its total."""
    from recstack.profiling.assemble import outermost_ops

    placed = sum(n.extra["op_pass_time_s"] for n in outermost_ops(prof.root))
    total = prof.overhead["op_pass_op_time_s"]
    assert total > 0
    assert placed == pytest.approx(total, rel=0.01)


@pytest.mark.parametrize("mode", ["inference", "train"])
def test_every_op_lands_in_the_tree(mode):
    _assert_ops_accounted(_profile("din", mode=mode, iters=2))


def test_caller_code_goes_to_the_stage_it_prepares_and_other_is_explained():
    prof = _container_profile()  # its forward slices and concatenates outside every stage
    callers = {st.name: st.child("[caller code]") for st in prof.root.children if st.child("[caller code]")}
    # ids[:, :2] is sliced before the embedding roots run; torch.cat feeds the head's tower
    assert "aten::slice" in {c.name for c in callers["embedding"].children}
    assert "aten::cat" in {c.name for c in callers["head"].children}
    for st, node in callers.items():
        assert node.level == "module" and node.extra["kind"] == "caller" and node.stage == st
        assert node.children[-1].extra["kind"] == "framework"
        assert sum(c.time_s for c in node.children) == pytest.approx(node.time_s, rel=1e-9, abs=1e-15)
        ops = [c for c in node.children if c.extra.get("kind") is None]
        assert all(c.level == "op" and c.name.startswith("aten::") for c in ops)  # by op name, no modules
    other = prof.stage("other")  # after the last stage root: nothing but the return
    kinds = {c.name: c.extra.get("kind") for c in other.children}
    assert kinds.get("[python/framework between ops]") == "framework"
    assert "aten::cat" not in kinds and "aten::slice" not in kinds
    assert sum(c.time_s for c in other.children) == pytest.approx(other.time_s, rel=1e-9, abs=1e-15)
    assert sum(st.time_s for st in prof.root.children) == pytest.approx(prof.root.time_s, rel=1e-9)


def test_stage_seen_less_by_op_pass_shows_unattributed_not_scaled_ops():
    from recstack.profiling.assemble import stage_node
    from recstack.profiling.oppass import Folder, RawNode

    folder = Folder()
    folder.steps = 1
    raw = RawNode("embedding", "stage", "embedding", us=100.0)  # the op pass saw 100 us of the stage
    raw.child("aten::embedding_bag", "op", "embedding").us = 80.0
    node = stage_node("embedding", [400e-6, 400e-6], [0, 1], raw, folder)  # the timing pass measured 400 us
    bag = node.child("aten::embedding_bag")
    assert bag.time_s == pytest.approx(80e-6)  # not scaled up to 320 us
    un = node.child("[unattributed]")
    assert un.level == "op" and un.extra["kind"] == "unattributed"
    assert un.time_s == pytest.approx(300e-6)
    assert node.self_time_s == pytest.approx(20e-6)  # the stage's own glue seen by the op pass
    unseen = stage_node("embedding", [400e-6, 400e-6], [0, 1], None, folder)  # the op pass saw none of it
    assert [c.name for c in unseen.children] == ["[unattributed]"] and unseen.children[0].time_s == pytest.approx(400e-6)
    node = stage_node("embedding", [50e-6, 50e-6], [0, 1], raw, folder)  # op pass slower: scaled down
    assert node.child("[unattributed]") is None
    assert node.child("aten::embedding_bag").time_s == pytest.approx(40e-6)
    assert node.extra["apportion_factor"] == pytest.approx(0.5)


def test_overhead_and_latency_fields():
    prof = _profile("ncf", batch=128, iters=6)
    ov = prof.overhead
    lo, hi = ov["stage_pass_ratio_ci"]
    assert 0 < lo <= hi
    assert ov["uninstrumented_step_s"] > 0 and ov["op_pass_ratio"] > 0
    lat = prof.root.extra["latency_s"]
    assert lat["p50"] <= lat["p90"] <= lat["p99"]
    assert prof.root.extra["throughput_samples_per_s"] == pytest.approx(128 / lat["p50"])
    for st in prof.root.children:
        assert st.extra["time_s_p10"] <= st.extra["time_s_p90"]
    # stage times (other included) are means over the same central steps: they add up to the run
    assert sum(st.time_s for st in prof.root.children) == pytest.approx(prof.root.time_s, rel=1e-9)
    # the run's central steps lie within p25..p75 of the step times (>= 3 steps), hence within p10..p90
    assert prof.root.extra["time_s_p10"] <= prof.root.time_s <= prof.root.extra["time_s_p90"]


def test_bootstrap_interval_contains_the_median_of_fixed_samples():
    from recstack.noise import bootstrap_ci
    from recstack.profiling.stats import median

    xs = [1.02, 0.99, 1.01, 1.05, 0.98, 1.00, 1.03, 1.01]
    lo, hi = bootstrap_ci(xs)
    assert lo <= median(xs) <= hi and lo < hi
    assert bootstrap_ci(xs) == (lo, hi)  # seeded: the same samples give the same interval


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
    assert prof.run["stage_roots"]["over_arch"] == {"stage": "dense", "rule": "user:over_arch", "evidence": {
        "basis": "user rule", "why": "the user rule 'over_arch' says so"}}
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


class _Lookup(torch.nn.Module):
    """Looks up the tables it is handed (the model's own ModuleDict), so heirs of that dict nest in it."""

    def __init__(self, tables: torch.nn.ModuleDict) -> None:
        super().__init__()
        self.tables = tables

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.tables[f"c{i}"](ids[:, i]) for i in range(ids.shape[1])], 1)


class _UnitAttention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(x), -1) * x


class _Tower(torch.nn.Module):
    """Calls the elements of two Sequentials side by side, never the Sequentials themselves."""

    def __init__(self) -> None:
        super().__init__()
        self.deep = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
        self.wide = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
        self.out = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.deep[1](self.deep[0](x)) + self.wide[1](self.wide[0](x)))


class _ContainerCTR(torch.nn.Module):
    """A common public layout: tables in a ModuleDict and attention units in a ModuleList, both never called."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding_dict = torch.nn.ModuleDict({f"c{i}": torch.nn.Embedding(20, 4) for i in range(3)})
        self.attention_layers = torch.nn.ModuleList([_UnitAttention() for _ in range(2)])
        self.sparse = _Lookup(self.embedding_dict)
        self.tower = _Tower()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pooled = self.sparse(ids[:, :2])  # c0, c1 through another embedding root (same-stage nesting)
        last = self.embedding_dict["c2"](ids[:, 2])  # c2 from the model's own forward
        seq = [att(last) for att in self.attention_layers]
        return self.tower(torch.cat([pooled, seq[0] + seq[1], last], 1))


def _container_profile(mode: str = "inference") -> Profile:
    torch.manual_seed(0)
    model = _ContainerCTR()
    return recstack.profile(model, lambda i: torch.randint(0, 20, (8, 3), generator=torch.Generator().manual_seed(i)),
                            batch_size=8, mode=mode, iters=3, warmup=1, op_iters=1, counters=False, cost_model=False)


def test_container_roots_that_never_run_hand_down_to_what_runs():
    prof = _container_profile()
    assert {"embedding", "sequence", "head"} <= _stages(prof)
    never = prof.run["never_ran_roots"]
    assert never["embedding_dict"]["handed_to"] == ["embedding_dict.c0", "embedding_dict.c1", "embedding_dict.c2"]
    assert never["attention_layers"]["handed_to"] == ["attention_layers.0", "attention_layers.1"]
    roots = prof.run["stage_roots"]
    assert {k: roots["embedding_dict.c2"][k] for k in ("stage", "rule")} == {
        "stage": "embedding", "rule": "inherited-from:embedding_dict (container never ran)"}
    assert roots["embedding_dict.c2"]["evidence"]["op"] == "aten::embedding"  # the container's evidence
    assert roots["attention_layers.1"]["stage"] == "sequence"
    assert "embedding_dict" not in roots and "attention_layers" not in roots
    # every stage root ran: each has a module node the op pass saw called
    called = {n.name for n in prof.nodes() if n.level == "module" and n.calls >= 1}
    assert set(roots) <= called, set(roots) - called
    # a root of the same stage called inside another (c0 inside sparse) nests there, not beside it
    emb = prof.stage("embedding")
    sparse = emb.child("sparse")
    assert sparse is not None
    assert {c.name for c in sparse.children if c.level == "module"} == {"embedding_dict.c0", "embedding_dict.c1"}
    assert emb.child("embedding_dict.c2") is not None and emb.child("embedding_dict.c0") is None
    assert sum(st.time_s for st in prof.root.children) == pytest.approx(prof.root.time_s, rel=1e-9)
    _assert_ops_accounted(prof)


def test_siblings_sharing_a_name_get_labels_from_their_path():
    prof = _container_profile()
    tower = prof.stage("head").child("tower")
    labels = {c.name: c.extra["label"] for c in tower.children if c.level == "module"}
    assert labels == {"tower.deep.0": "deep.0", "tower.wide.0": "wide.0", "tower.deep.1": "deep.1",
                      "tower.wide.1": "wide.1", "tower.out": "out"}
    assert prof.stage("head").extra["label"] == "head"
    assert all("label" in n.extra for n in prof.nodes())


def test_container_model_trains_with_its_stages():
    prof = _container_profile("train")
    assert {"embedding", "sequence", "head", "loss", "backward", "optimizer"} <= _stages(prof)
    _assert_ops_accounted(prof)


def test_stage_timer_same_stage_reentry_counts_once():
    from recstack.profiling.timing import StageTimer

    timer = StageTimer()
    timer.reset()
    first = timer.start()
    timer.enter("embedding")  # the interval before it is caller code of the embedding stage
    timer.enter("embedding")  # a root of the same stage called inside it
    timer.enter("dense")
    timer.exit()
    timer.exit()
    timer.exit()
    last = timer.last
    timer.stop()
    assert sum(timer.acc.values()) == last - first  # every nanosecond counted once
    assert set(timer.acc) == {"embedding/[caller code]", "embedding", "dense"}


def test_call_order_sees_every_depth_and_direct_forward_calls():
    from recstack.profiling.passes import record_call_order

    class Direct(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)])
            self.unused = torch.nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.blocks[1].forward(self.blocks[0](x))  # blocks[1] via .forward(), as some libraries do

    model = Direct()
    order = record_call_order(model, lambda: model(torch.ones(1, 2)))
    assert order == ["", "blocks.0", "blocks.1"]
    assert "forward" not in model.blocks[0].__dict__  # the wrappers are gone


class _Body(torch.nn.Module):
    """A module that calls a heavy helper (`sync`) no module boundary separates from its own work."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.big = torch.randn(384, 384)

    def sync(self, x: torch.Tensor) -> torch.Tensor:
        return x + (self.big @ self.big).sum() * 0  # ~20x the Linear's work: the region dominates the module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sync(self.lin(x))


class _SyncRegions:
    """recstack.profiling.passes.Regions: every `body.sync` call (inside `body`) is the stage `region`."""

    def install(self, model, enter, leave):
        inner = model.body.sync

        def sync(x):
            enter("region")
            try:
                return inner(x)
            finally:
                leave()

        model.body.sync = sync
        return lambda: model.body.__dict__.pop("sync", None)


class _PatchOnce:
    """A Regions that patches a stage root's own forward once and keeps it until close (as TorchRec's
    communication regions do with output-dist modules): what close puts back is what was there before."""

    def __init__(self) -> None:
        self.saved: list = []
        self.marks: list = []

    def install(self, model, enter, leave):
        body = model.body
        if not self.saved:
            self.saved.append(body.__dict__.get("forward"))
            inner = body.forward

            def forward(x):
                e, lv = self.marks[-1]
                e("region")
                try:
                    return inner(x)
                finally:
                    lv()

            body.forward = forward
        self.marks.append((enter, leave))
        return lambda: None

    def close(self, model) -> None:
        previous = self.saved[0]
        if previous is None:
            model.body.__dict__.pop("forward", None)
        else:
            model.body.forward = previous


def test_a_region_patching_a_stage_root_keeps_its_patch_and_puts_back_the_bare_module():
    from recstack.profiling.runner import ProfileOptions, profile_model

    model = torch.nn.Sequential()
    model.add_module("body", _Body())
    model.eval()
    regions = _PatchOnce()
    opts = ProfileOptions(stage_rules=StageRules(rules=[StageRule(stage="dense", match="body")]), counters=False,
                          cost_model=False, regions=regions, iters=4, warmup=1, op_iters=2, mode="inference")
    prof = profile_model(model, [torch.randn(32, 16)], opts, batch_size=32)
    region = prof.stage("region")  # the patch outlived each pass's stage wrapper: every pass saw the region
    assert region is not None and region.time_s > 0 and region.extra["op_pass_time_s"] > 0
    regions.close(model)
    assert "forward" not in model.body.__dict__  # not a stage wrapper left behind


def test_regions_are_stages_measured_in_both_passes_and_leave_the_modules_they_ran_in():
    from recstack.profiling.runner import ProfileOptions, profile_model

    model = torch.nn.Sequential()
    model.add_module("body", _Body())
    model.eval()
    rules = StageRules(rules=[StageRule(stage="dense", match="body")])
    opts = ProfileOptions(stage_rules=rules, counters=False, cost_model=False, regions=_SyncRegions(), iters=6,
                          warmup=1, op_iters=2, mode="inference")
    prof = profile_model(model, [torch.randn(32, 16)], opts, batch_size=32)
    region, dense = prof.stage("region"), prof.stage("dense")
    assert region is not None and region.time_s > 0 and region.extra["op_pass_time_s"] > 0
    assert any(n.name == "aten::mm" for n in region.walk())  # the region's ops are its own
    assert not any(n.name == "aten::mm" for n in dense.walk())
    assert dense.time_s < region.time_s  # timed apart: the Linear is a fraction of the product
    body = dense.child("body")  # its op-pass time without the region's: it fits in its stage
    assert body is not None and body.time_s <= dense.time_s * (1 + 1e-9)
    assert sum(st.time_s for st in prof.root.children) == pytest.approx(prof.root.time_s, rel=1e-9)
    assert "sync" not in model.body.__dict__  # the passes undid the regions


class _Recomputed(_Body):
    """`sync` under activation checkpointing: backward runs it again, so the region opens inside backward."""

    def sync(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) + (self.big @ self.big).sum() * 0  # tanh saves its output: backward recomputes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        return checkpoint(self.sync, self.lin(x), use_reentrant=False)


def test_a_region_opened_inside_backward_leaves_backward_and_its_parts():
    from recstack.profiling.runner import ProfileOptions, profile_model

    model = torch.nn.Sequential()
    model.add_module("body", _Recomputed())
    opts = ProfileOptions(stage_rules=StageRules(rules=[StageRule(stage="dense", match="body")]), counters=False,
                          cost_model=False, regions=_SyncRegions(), iters=4, warmup=1, op_iters=2, mode="train")
    # its output is a [32, 16] hidden state, not a score: the loss is given
    prof = profile_model(model, [torch.randn(32, 16)], opts, batch_size=32, loss_fn=lambda out, _b: out.square().mean())
    backward = prof.stage("backward")
    assert backward is not None and prof.stage("region") is not None
    parts = {c.name: c for c in backward.children if c.level == "stage"}  # one per forward stage
    assert "region" in parts  # the recomputation ran inside backward's part for the region's own ops
    for part in parts.values():  # each part's time is its ops' time: the recomputed region left both
        assert part.time_s == pytest.approx(sum(c.time_s for c in part.children), rel=1e-6), part.name
