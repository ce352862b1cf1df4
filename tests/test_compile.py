"""recstack compile / profile --compile on tiny models (eager and aot_eager backends; one small inductor case)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch

from recstack.cli import main
from recstack.compilation.coldwarm import compile_times
from recstack.compilation.config import load_compile_config, plan_regions
from recstack.compilation.model import load
from recstack.compilation.observe import phases
from recstack.compilation.regional import Compiled
from recstack.compilation.session import run_session
from recstack.config.run import RunConfig

HERE = Path(__file__).parent
SRC = HERE.parent / "src"
FAST = {"iters": 2, "warmup": 2, "machine": None, "seed": 0}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    sys.path.insert(0, str(HERE))
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _marked_lines() -> dict[str, int]:
    lines = (HERE / "compile_models.py").read_text().splitlines()
    marks = [(re.search(r"# BREAK:(\w+)$", ln), i + 1) for i, ln in enumerate(lines)]
    return {m.group(1): n for m, n in marks if m}


def _cfg(model: str, **kw) -> RunConfig:
    return RunConfig(model=model, **{**FAST, "batch_size": 4, **kw})


def test_graph_breaks_report_exact_file_line_module_and_stage():
    cc = load_compile_config({"defaults": {"backend": "eager"}, "rules": [{"match": "over_arch"}]})
    r = run_session(_cfg("compile_models:breaky"), cc, batch_sizes=[], loader=load)
    marked = _marked_lines()
    got = {(Path(b["file"]).name, b["line"]) for b in r["graph_breaks"]}
    for kind, line in marked.items():
        assert ("compile_models.py", line) in got, f"{kind} break at line {line} not reported: {r['graph_breaks']}"
    for b in r["graph_breaks"]:
        assert b["module_path"] == "over_arch" and b["stage"] == "head" and b["reason"]
    assert r["numerics"]["ok"] and r["fallbacks"] == []
    assert set(r["stages"]) >= {"dense", "head", "run"}
    # Whole-model mode: the same breaks, still placed in the module and stage that hold them.
    torch._dynamo.reset()
    whole = run_session(_cfg("compile_models:breaky"), load_compile_config({"defaults": {"backend": "eager"}}),
                        batch_sizes=[], loader=load)
    assert {(b["line"], b["module_path"], b["stage"]) for b in whole["graph_breaks"]} == {
        (line, "over_arch", "head") for line in marked.values()}
    assert "whole-model" in whole["stages"]["head"]["unavailable"]


def _recompiles(policy: dict) -> list[dict]:
    cc = load_compile_config({"defaults": {"backend": "eager", **policy}, "rules": [{"match": "dense_arch"}]})
    r = run_session(_cfg("compile_models:clean", batch_size=1), cc, batch_sizes=[7, 64, 100], loader=load)
    assert r["numerics"]["ok"] and r["fallbacks"] == []
    return [x for x in r["recompiles"] if x["region"] == "dense_arch"]


def test_recompiles_and_guards_per_dynamic_policy():
    static = _recompiles({"dynamic": False})
    auto = _recompiles({"dynamic": "auto"})
    unbacked = _recompiles({"dims": [{"arg": "x", "dim": 0, "how": "unbacked"}]})
    # Static shapes: every new batch size (1 then 7, 64, 100) fails a size guard on the input.
    assert len(static) >= 3
    assert all("size mismatch at index 0" in x["guard"] and Path(x["file"]).name == "compile_models.py"
               for x in static)
    assert len(unbacked) <= len(auto) <= len(static)
    assert len(auto) < len(static)  # automatic dynamic stops recompiling once the dim is seen to vary


def test_recompile_limit_hit_is_reported_as_a_fallback_error(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("defaults: {backend: eager, dynamic: false, recompile_limit: 2}\nrules:\n  - {match: dense_arch}\n")
    before = torch._dynamo.config.recompile_limit
    rc = main(["compile", "compile_models:clean", "--compile", str(cfg), "--batch-size", "1", "--iters", "2",
               "--warmup", "2", "--batch-sizes", "2,3,4,5", "--no-compile-time", "--json"])
    out, err = capsys.readouterr()
    assert rc == 2, err[-2000:]
    report = json.loads(out)
    assert report["fallbacks"], report
    f = report["fallbacks"][0]
    assert f["limit"] == 2 and f["region"] == "dense_arch" and "size mismatch" in (f["last_reason"] or "")
    assert err.strip().splitlines()[-1].startswith("error: recompile_limit: silent fallback to eager")
    assert {"graphs", "graph_breaks", "recompiles", "fallbacks", "compile_time_s", "stages", "numerics"} <= set(report)
    assert torch._dynamo.config.recompile_limit == before  # restored after the run


def test_rule_matching_no_module_exits_2_naming_it(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("rules:\n  - {match: dense_arch}\n  - {match: 'no_such.*'}\n")
    rc = main(["compile", "compile_models:clean", "--compile", str(cfg), "--no-compile-time",
               "--iters", "2", "--warmup", "2"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "rules[1].match" in err and "no_such.*" in err and str(cfg) in err


def test_bad_compile_config_values_exit_2(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("defaults: {backend: no_such_backend}\n")
    rc = main(["compile", "compile_models:clean", "--compile", str(cfg), "--no-compile-time"])
    assert rc == 2 and "backend" in capsys.readouterr().err


def test_a_bad_compile_config_fails_before_the_model_is_built(tmp_path, capsys, monkeypatch):
    """profile --compile: the compile YAML is parsed with the other files, before the factory runs (exit 2)."""
    built = tmp_path / "factory_ran"
    (tmp_path / "side_model.py").write_text(
        "import pathlib, torch\n"
        f"def make(batch_size, seed):\n    pathlib.Path({str(built)!r}).touch()\n"
        "    return torch.nn.Linear(8, 1), lambda i: torch.randn(batch_size, 8)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    bad = tmp_path / "c.yaml"
    bad.write_text("defaults: {backend: no_such_backend}\n")
    rc = main(["profile", "side_model:make", "--compile", str(bad), "--machine", "none", "--iters", "2"])
    err = capsys.readouterr().err
    assert rc == 2 and str(bad) in err and "backend" in err
    assert not built.exists()  # the factory never ran: nothing was built or warmed up


def test_regional_compile_keeps_state_dict_keys_and_profile_shows_stages(tmp_path):
    import compile_models

    model, _ = compile_models.clean(4, 0)
    keys = list(model.state_dict())
    cc = load_compile_config({"defaults": {"backend": "eager"}, "rules": [{"match": "dense_arch"}]})
    Compiled(model, plan_regions(model, cc))
    assert list(model.state_dict()) == keys

    from recstack import api

    prof = api.profile_config(_cfg("compile_models:clean", compile={"defaults": {"backend": "aot_eager"},
                                                                     "rules": [{"match": "dense_arch"}]},
                                   op_iters=1))
    stages = {c.name for c in prof.root.children}
    assert {"dense", "head"} <= stages
    comp = prof.run["compile"]
    assert comp["compile"]["regions"][0]["path"] == "dense_arch" and comp["graphs"] and comp["hidden_stages"] == {}
    whole = api.profile_config(_cfg("compile_models:clean", compile={"defaults": {"backend": "eager"}},
                                    op_iters=1))
    assert set(whole.run["compile"]["hidden_stages"]) == {"dense", "head"}
    assert "whole-model" in whole.run["compile"]["hidden_stages"]["dense"]


def test_train_mode_compares_gradients():
    cc = load_compile_config({"defaults": {"backend": "aot_eager"}, "rules": [{"match": "dense_arch"}]})
    r = run_session(_cfg("compile_models:clean", mode="train"), cc, batch_sizes=[], loader=load)
    assert r["numerics"]["ok"] and r["numerics"]["compared"] > 4  # outputs, losses and parameter gradients
    assert {"backward", "optimizer", "dense"} <= set(r["stages"])


def test_phases_missing_metrics_fields_is_unavailable_not_a_crash():
    class Old:  # a compilation-metrics record of a torch without the nested cumulative times
        compile_id = "0/0"

    assert phases([Old()])["unavailable"].startswith("unavailable:")
    assert phases([])["total_s"] == 0.0


def test_inductor_cold_then_warm_compile_hits_the_cache():
    cfg = _cfg("compile_models:clean")
    cc = load_compile_config({"defaults": {"backend": "inductor"}, "rules": [{"match": "dense_arch"}]})
    t = compile_times(cfg, cc)
    cold, warm = t["phases"]["cold"], t["phases"]["warm"]
    assert isinstance(cold, dict) and isinstance(warm, dict), t
    assert cold["cache"].get("inductor_fx_local_cache_miss_count", 0) >= 1
    assert warm["cache"].get("inductor_fx_local_cache_hit_count", 0) >= 1
    assert cold["code_gen_s"] > 0 and t["cold"] > 0 and t["warm"] > 0


def test_recommend_writes_a_config_that_profile_compile_uses(tmp_path, capsys):
    base = tmp_path / "base.yaml"
    base.write_text("defaults: {backend: aot_eager}\n")
    best = tmp_path / "best.yaml"
    rc = main(["compile", "compile_models:clean", "--recommend", "--budget", "0.01", "--compile", str(base),
               "-o", str(best), "--batch-sizes", "1,7", "--iters", "2", "--warmup", "2",
               "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["candidates"] and report["written"] == str(best)
    for c in report["candidates"]:  # every candidate says whether it qualified, and why not
        assert c["eligible"] == (c["why"] is None)
    cc = load_compile_config(best)  # valid, and built on the base settings given
    assert cc.defaults.backend == "aot_eager"
    from recstack import api

    prof = api.profile_config(_cfg("compile_models:clean", compile=str(best), op_iters=1))
    assert "compile" in prof.run


@pytest.mark.parametrize("backend", ["tbe", "torchrec"])
def test_embedding_backend_hazards_are_detected_and_compiled_around(backend):
    cc = load_compile_config({"defaults": {"backend": "eager"},
                              "rules": [{"match": "sparse_arch"}, {"match": "dense_arch"}]})
    cfg = RunConfig(model="rmc3", scale=0.0005, batch_size=16, backend=backend, **FAST)
    r = run_session(cfg, cc, batch_sizes=[1])
    assert r["numerics"]["ok"] and r["fallbacks"] == []
    sparse = [g for g in r["graphs"] if g["region"] == "sparse_arch"]
    breaks = [b for b in r["graph_breaks"] if b["region"] == "sparse_arch"]
    hazards = [h for h in r["hazards"] if h["region"] == "sparse_arch"]
    assert sparse or breaks or hazards  # the region compiled, broke, or failed and said why
    for b in breaks:
        assert b["reason"] and b["stage"] == "embedding" and b["module_path"].startswith("sparse_arch")
    regions = {x["path"] for x in r["compile"]["regions"]}
    for h in hazards:  # what failed is now eager: compiled around inside the region, or the region dropped
        assert h["reason"] and h["action"]
        if h["what"] == "compile raised":
            assert h["module_path"] in r["compile"]["eager_inside"] or "sparse_arch" not in regions


def test_recommend_in_train_mode_compares_each_candidate_on_current_weights(tmp_path, capsys):
    base = tmp_path / "base.yaml"
    base.write_text("defaults: {backend: aot_eager}\n")
    rc = main(["compile", "compile_models:clean", "--recommend", "--budget", "0.05", "--compile", str(base),
               "-o", str(tmp_path / "best.yaml"), "--batch-sizes", "4", "--iters", "2", "--warmup", "2",
               "--mode", "train", "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["candidates"]  # the first one already follows eager train steps that moved the weights
    # aot_eager runs the same aten ops as eager: on the same weights the gradients agree exactly enough.
    assert all(c["numerics_ok"] for c in report["candidates"]), report["candidates"]


def test_train_compile_time_counts_the_lazily_compiled_backward_graph():
    # AOTAutograd compiles the backward graph at the first backward, in a metrics record of its own:
    # the fresh-process measurement runs a whole train step, and the phases add that record's times.
    cc = load_compile_config({"defaults": {"backend": "aot_eager"}, "rules": [{"match": "dense_arch"}]})
    t = compile_times(_cfg("compile_models:clean", mode="train"), cc)
    cold = t["phases"]["cold"]
    assert isinstance(cold, dict), t
    assert cold["backward_graphs"] >= 1 and cold["backward_s"] > 0
    assert cold["aot_autograd_s"] > 0 and cold["tracing_s"] > 0
    parts = cold["tracing_s"] + cold["aot_autograd_s"] + cold["inductor_s"] + cold["code_gen_s"]
    assert parts == pytest.approx(cold["total_s"], rel=1e-6)
    assert cold["total_s"] == pytest.approx(cold["forward_s"] + cold["backward_s"], rel=1e-6)


def test_recommend_writes_one_store_row_per_candidate(tmp_path, capsys):
    from recstack import results

    base = tmp_path / "base.yaml"
    base.write_text("defaults: {backend: eager}\n")
    store = tmp_path / "res.duckdb"
    rc = main(["compile", "compile_models:clean", "--recommend", "--budget", "0.02", "--compile", str(base),
               "-o", str(tmp_path / "best.yaml"), "--batch-sizes", "1,5", "--iters", "2", "--warmup", "2",
               "--store", str(store), "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["store"]["path"] == str(store)
    df = results.load(str(store), table="compile")
    cands = df[df["kind"] == "candidate"].sort_values("candidate")
    assert list(cands["name"]) == [c["name"] for c in report["candidates"]]
    assert set(df["search_id"]) == {report["store"]["search_id"]}
    for (_, row), c in zip(cands.iterrows(), report["candidates"], strict=True):
        assert row["run_speedup"] == pytest.approx(c["speedup"]) and row["recompiles"] == c["recompiles"]
        assert bool(row["eligible"]) == c["eligible"] and row["model"] == "compile_models:clean"
        assert json.loads(row["compile_config"])["defaults"]["backend"] == "eager"
        assert row["run_speedup"] == pytest.approx(row["eager_run_s"] / row["compiled_run_s"])
        assert json.loads(row["batch_sizes"]) == [1, 5] and "run" in json.loads(row["stages"])
    chosen = df[df["kind"] == "chosen"]
    assert len(chosen) == 1 and chosen.iloc[0]["name"] == report["chosen"]
    # a compiled winner was measured again ("verify" rows: one, or one per pruning round of a composite);
    # eager needs no re-measure
    verified = report["chosen_result"].get("search_speedup") is not None
    n_verify = (df["kind"] == "verify").sum()
    assert (1 <= n_verify <= 3) if verified else n_verify == 0
    assert json.loads(chosen.iloc[0]["compile_config"]) == report["config"]
    # A second search adds its rows beside the first one's (the store is opened, not replaced).
    rc = main(["compile", "compile_models:clean", "--recommend", "--budget", "0.001", "--compile", str(base),
               "-o", str(tmp_path / "best2.yaml"), "--batch-sizes", "1", "--iters", "2", "--warmup", "2",
               "--store", str(store)])
    assert rc == 0 and results.load(str(store), table="compile")["search_id"].nunique() == 2
    assert f"results: {store} (table compile" in capsys.readouterr().out


def test_store_without_recommend_exits_2(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("defaults: {backend: eager}\n")
    rc = main(["compile", "compile_models:clean", "--compile", str(cfg), "--store", str(tmp_path / "s.duckdb")])
    assert rc == 2 and "--store" in capsys.readouterr().err


def test_noise_floor_is_two_eager_arms_in_the_same_rounds():
    cc = load_compile_config({"defaults": {"backend": "eager"}, "rules": [{"match": "dense_arch"}]})
    r = run_session(_cfg("compile_models:clean", iters=4), cc, batch_sizes=[], loader=load, noise_floor=True)
    nf = r["noise_floor"]
    assert {"dense", "run"} <= set(nf["stages"])
    for v in nf["stages"].values():
        assert v["eager_s"] > 0 and v["eager2_s"] > 0
        assert v["ratio"] == pytest.approx(v["eager_s"] / v["eager2_s"])
    main = [abs(v["ratio"] - 1) for k, v in nf["stages"].items() if k not in ("other", "[caller code]")]
    assert nf["max_dev"] == pytest.approx(max(main)) and nf["run_dev"] == pytest.approx(abs(nf["stages"]["run"]["ratio"] - 1))
    assert "noise_floor" not in run_session(_cfg("compile_models:clean"), cc, batch_sizes=[], loader=load)


def test_a_winner_that_does_not_hold_up_when_measured_again_gives_way_to_eager():
    from recstack.compilation.recommend import MIN_GAIN, holds_up

    assert holds_up({"eligible": True, "speedup": MIN_GAIN})
    assert not holds_up({"eligible": True, "speedup": MIN_GAIN - 0.01})  # the search's gain was noise
    assert not holds_up({"eligible": False, "speedup": 2.0})  # e.g. a fallback seen only the second time
    assert not holds_up({"eligible": True, "speedup": None})


def test_recommend_compiles_only_the_regions_that_win(tmp_path, capsys):
    # dense_arch is made to win compiled (aot_eager drops a product eager computes and never uses), and
    # over_arch to lose (its traced graph computes a product eager skips): by a large factor each way.
    base = tmp_path / "base.yaml"
    base.write_text("defaults: {backend: aot_eager}\n")
    best = tmp_path / "best.yaml"
    rc = main(["compile", "compile_models:mixed", "--recommend", "--budget", "0.01", "--compile", str(base),
               "-o", str(best), "--batch-sizes", "4", "--iters", "6", "--warmup", "2", "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    searched = report["candidates"][0]
    assert searched["name"] == "per-stage/dynamic-auto"  # both regions compiled: the searched candidate
    assert searched["stages"]["head"]["speedup"] < 1 < searched["stages"]["dense"]["speedup"]
    rules = [r.match for r in load_compile_config(best).rules]
    assert rules == ["dense_arch"], report["chosen_result"]  # only the winner, re-measured
    assert report["chosen_result"]["regions"] == {"dense_arch": "dynamic-auto"}
    assert set(report["gain_thresholds"]) >= {"dense", "head"}
    assert all(t >= 1.02 for t in report["gain_thresholds"].values())


def test_winning_regions_keep_a_region_only_where_its_stage_gains_past_its_threshold():
    from recstack.compilation.recommend import MIN_GAIN, gain_thresholds, winning_regions

    th = gain_thresholds({"stages": {"dense": {"ratio": 0.9}, "head": {"ratio": 1.01}, "sequence": {"ratio": None}}})
    assert th == {"dense": pytest.approx(1.1), "head": MIN_GAIN, "sequence": MIN_GAIN}  # noise raises the bar
    roots = {"a": "dense", "b": "head", "c": "sequence", "d": "sequence"}
    stages = {"dense": {"speedup": 1.05}, "head": {"speedup": 1.5}, "sequence": {"speedup": None}}
    keep, lost = winning_regions(stages, {p: "static" for p in roots}, roots, th)
    assert keep == {"b": "static"}  # dense gained less than its noise; sequence had no visible time
    assert lost == {"a": 1.05, "c": None, "d": None}


def test_freezing_is_an_inference_candidate_and_options_are_validated(tmp_path, capsys):
    from recstack.compilation.config import Settings
    from recstack.compilation.recommend import policies_for

    inf, train = policies_for("inference", Settings()), policies_for("train", Settings())
    assert [n for n in inf if n.endswith("+freezing")] and not [n for n in train if "freezing" in n]
    assert all(p["options"] == {"freezing": True} for n, p in inf.items() if n.endswith("+freezing"))
    assert not [n for n in policies_for("inference", Settings(backend="aot_eager")) if "freezing" in n]
    cfg = tmp_path / "c.yaml"
    for text, needle in (("defaults: {options: {freezng: true}}\n", "'freezng'"),
                         ("defaults: {options: {freezing: 3}}\n", "takes a bool"),
                         ("defaults: {backend: eager, options: {freezing: true}}\n", "need backend inductor")):
        cfg.write_text(text + "rules:\n  - {match: dense_arch}\n")
        rc = main(["compile", "compile_models:clean", "--compile", str(cfg), "--no-compile-time",
                   "--iters", "2", "--warmup", "2", "--batch-sizes", "4"])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert rc == 2 and "options" in err and needle in err, err


def test_stage_ceiling_is_the_inverse_of_its_library_share():
    from recstack.compilation.ceiling import library_us
    from recstack.profiling.oppass import RawNode

    stage = RawNode("dense", "stage", "dense", us=100.0)
    mm = stage.child("aten::addmm", "op", "dense")
    mm.us = 40.0
    mm.child("aten::mm", "op", "dense").us = 30.0  # nested in a library op: counted once, with it
    stage.child("aten::relu", "op", "dense").us = 20.0
    assert library_us(stage) == 40.0
    cc = load_compile_config({"defaults": {"backend": "eager"}, "rules": [{"match": "dense_arch"}]})
    r = run_session(_cfg("compile_models:clean"), cc, batch_sizes=[], loader=load)
    for name in ("dense", "head"):  # both are Linear layers: addmm under aten::linear
        st = r["stages"][name]
        assert 0 < st["library_share"] <= 1 and st["ceiling_speedup"] == pytest.approx(1 / st["library_share"])
    assert "ceiling_speedup" not in r["stages"]["run"] and "stage_s / library_s" in r["ceiling"]["formula"]


def test_profile_compile_places_counted_flops_on_the_compiled_region_and_does_not_recompile():
    from recstack import api

    both = {"defaults": {"backend": "aot_eager"}, "rules": [{"match": "dense_arch"}, {"match": "over_arch"}]}
    eager = api.profile_config(_cfg("compile_models:clean", op_iters=1))
    comp = api.profile_config(_cfg("compile_models:clean", compile=both, op_iters=1))
    flops = [{c.name: c.flops for c in p.root.children} for p in (eager, comp)]
    for stage in ("dense", "head"):  # the same computation: the same analytic FLOPs, stage by stage
        assert flops[1][stage] == pytest.approx(flops[0][stage]) and flops[0][stage] > 0
    names = {n.name for n in comp.root.walk()}
    assert not names & {"entire_frame_compile", "dynamo"}, names  # nothing compiled during the op pass
    assert comp.run["compile"]["recompiles"] == []  # the passes' range hooks changed no guard
    assert not [n for n in names if n.startswith("dense_arch.")]  # modules inside a region get no range


def test_a_whole_model_compile_puts_the_counted_forward_work_on_the_run_not_on_the_visible_ops():
    """Whole-model mode: the run node is the one cost site, holding eager's forward FLOPs; the few extern ops
    the compiled code shows carry none of them (placed by name they read above any roof)."""
    from recstack import api

    eager = api.profile_config(_cfg("compile_models:clean", op_iters=1))
    whole = api.profile_config(_cfg("compile_models:clean", compile={"defaults": {"backend": "aot_eager"}},
                                    op_iters=1))
    assert [r["module_path"] for r in whole.run["compile"]["compile"]["regions"]] == [""]
    forward = sum(c.flops or 0.0 for c in eager.root.children if c.name in ("dense", "head"))
    assert forward > 0 and whole.root.flops == pytest.approx(forward, rel=1e-6)
    assert not [n.name for n in whole.root.walk() if n.level == "op" and n.flops]


def test_a_whole_model_compile_places_the_root_modules_own_ops_on_the_run_too():
    """Work in the root module's own forward (``wins`` multiplies a buffer there) is part of the whole-model
    region: on the run node, nothing unplaced."""
    from recstack import api

    whole = api.profile_config(_cfg("compile_models:wins", compile={"defaults": {"backend": "aot_eager"}},
                                    op_iters=1))
    assert whole.extra["cost_model"]["unplaced"] == []
    assert whole.root.flops >= 2 * 2 * 512**3  # the two 512 x 512 x 512 products, at least
