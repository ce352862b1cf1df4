"""recstack compile / profile --compile on tiny models (eager and aot_eager backends; one small inductor case)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch

from recstack.cli import main
from recstack.compilation.commands import compile_times, load
from recstack.compilation.config import load_compile_config, plan_regions
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
               "--warmup", "2", "--machine", "none", "--batch-sizes", "2,3,4,5", "--no-compile-time", "--json"])
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
    rc = main(["compile", "compile_models:clean", "--compile", str(cfg), "--no-compile-time", "--machine", "none",
               "--iters", "2", "--warmup", "2"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "rules[1].match" in err and "no_such.*" in err and str(cfg) in err


def test_bad_compile_config_values_exit_2(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("defaults: {backend: no_such_backend}\n")
    rc = main(["compile", "compile_models:clean", "--compile", str(cfg), "--no-compile-time"])
    assert rc == 2 and "backend" in capsys.readouterr().err


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
               "-o", str(best), "--batch-sizes", "1,7", "--iters", "2", "--warmup", "2", "--machine", "none",
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
               "--machine", "none", "--mode", "train", "--json"])
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
               "--machine", "none", "--store", str(store), "--json"])
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
    # a compiled winner was measured again (one "verify" row); eager needs no re-measure
    verified = report["chosen_result"].get("search_speedup") is not None
    assert (df["kind"] == "verify").sum() == (1 if verified else 0)
    assert json.loads(chosen.iloc[0]["compile_config"]) == report["config"]
    # A second search adds its rows beside the first one's (the store is opened, not replaced).
    rc = main(["compile", "compile_models:clean", "--recommend", "--budget", "0.001", "--compile", str(base),
               "-o", str(tmp_path / "best2.yaml"), "--batch-sizes", "1", "--iters", "2", "--warmup", "2",
               "--machine", "none", "--store", str(store)])
    assert rc == 0 and results.load(str(store), table="compile")["search_id"].nunique() == 2
    assert f"results: {store} (table compile" in capsys.readouterr().out


def test_store_without_recommend_exits_2(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("defaults: {backend: eager}\n")
    rc = main(["compile", "compile_models:clean", "--compile", str(cfg), "--store", str(tmp_path / "s.duckdb"),
               "--machine", "none"])
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
