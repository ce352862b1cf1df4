"""``recstack correlate``: real tiny profiles and a real DuckDB store -> rank correlations resampled over
models, ridge fits, the offline HTML report (in headless Chromium) and PNG/SVG plots; bad inputs."""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from _batches import raw_batch
from _machines import synthetic_machine

import recstack
from recstack.analysis.roofline import classify
from recstack.cli import main
from recstack.correlate.points import Point, architecture_features, interaction_type, load_points
from recstack.correlate.stats import correlate
from recstack.zoo import build_model
from recstack.zoo.build import resolve_config

MODELS = ("rmc1", "ncf", "deepfm", "hstu")
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory) -> Path:
    """Four zoo models, tiny, at two batch sizes, classified against the shared synthetic machine file."""
    machine = synthetic_machine()
    out = tmp_path_factory.mktemp("profiles")
    for name in MODELS:
        model = build_model(name, scale=0.0005)
        for batch in (8, 32):
            p = recstack.profile(
                model, lambda i, m=model, b=batch: raw_batch(m, b, seed=i), batch_size=batch, iters=2, warmup=0,
                op_iters=1, num_batches=1, run_info={"model": name, "backend": "torch", "model_config": model.cfg.model_dump()},
            )
            classify(p, machine)
            p.save(out / f"{name}-{batch}.json")
    (out / "trace.json").write_text('{"traceEvents": []}')  # not a profile: skipped in a folder
    return out


def _points(values: dict[str, float], feature_metric: str, copies: int = 1) -> list[Point]:
    pts = []
    for name, v in values.items():
        cfg = resolve_config(name)
        for c in range(copies):
            pts.append(Point(model=name, batch_size=64, backend=f"b{c}", mode="inference", source=name,
                             features=architecture_features(cfg, 64), metrics={feature_metric: v},
                             interaction=interaction_type(cfg)))
    return pts


def test_a_metric_that_is_a_feature_has_rho_one_and_resampling_is_over_models():
    names = ("rmc1", "rmc2", "rmc3", "ncf", "wnd", "din", "deepfm", "hstu")
    # metric: the log of the MLP FLOPs, exactly (a monotone function of one feature)
    values = {n: math.log(architecture_features(resolve_config(n), 64)["mlp_flops_per_sample"]) for n in names}
    one = correlate(_points(values, "m"), bootstrap=200)
    (res,) = one.metrics
    assert res.rho["mlp_flops_per_sample"] == pytest.approx(1.0)
    assert res.low["mlp_flops_per_sample"] == pytest.approx(1.0) and res.high["mlp_flops_per_sample"] == pytest.approx(1.0)
    assert res.top == "mlp_flops_per_sample" and res.models == len(names)
    # five points per model (say five backends) carry no more information: the intervals must not narrow
    five = correlate(_points(values, "m", copies=5), bootstrap=200)
    (res5,) = five.metrics
    for f in one.features:
        if math.isfinite(res.rho[f]):
            assert res5.rho[f] == pytest.approx(res.rho[f])
            assert res5.low[f] == pytest.approx(res.low[f]) and res5.high[f] == pytest.approx(res.high[f])
    assert res5.points == 5 * res.points


def test_profiles_to_report_plots_and_json(profile_dir, tmp_path):
    out = tmp_path / "report.html"
    r = subprocess.run(
        [sys.executable, "-m", "recstack", "correlate", str(profile_dir), "-o", str(out), "--json-out",
         str(tmp_path / "c.json"), "--bootstrap", "100"],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "c.json").read_text())
    assert res["models"] == sorted(MODELS) and res["points"] == 2 * len(MODELS)
    metrics = {m["metric"]: m for m in res["metrics"]}
    assert "share:embedding" in metrics and "log10_throughput" in metrics
    for m in metrics.values():
        assert m["top"] in res["features"] and m["models"] >= 4
        for f, rho in m["rho"].items():
            if rho is not None:
                assert -1 - 1e-9 <= m["low"][f] <= rho + 1e-9 or m["low"][f] is None
                assert abs(rho) <= 1 + 1e-9
        assert m["cv_r2"] is None or m["cv_r2"] <= 1.0
    # batch size is a feature and, within a model, the same architecture: throughput grows with the batch
    assert "batch_size" in res["features"]
    assert len(res["findings"]) == len(metrics) and all(s.startswith(tuple(metrics)) for s in res["findings"])
    plots = out.with_name("report_plots")
    assert sorted(p.stem for p in plots.glob("*.png")) == sorted(p.stem for p in plots.glob("*.svg"))
    assert len(list(plots.glob("*.png"))) == len(metrics) + 1  # one per metric, and the models' colour key
    assert (plots / "legend.png").read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in (plots / "share_embedding__" f"{metrics['share:embedding']['top']}.svg").read_text()
    assert "single feature dominates" in r.stdout or "dominated by" in r.stdout


def _store_from_profiles(profile_dir: Path, path: Path) -> dict[str, dict[str, float]]:
    """A results store with the column names of recstack.store (and an extra column), filled from real profiles."""
    con = duckdb.connect(str(path))
    con.execute("create table points (point_id varchar, status varchar, model varchar, batch_size integer, "
                "backend varchar, throughput double, step_p50_s double, step_p99_s double, extra_col integer, scale double)")
    con.execute("create table stages (point_id varchar, stage varchar, time_s double, share double, flops double, "
                "bytes double, bound varchar, roof_fraction double)")
    shares = {}
    for f in sorted(profile_dir.glob("*-*.json")):
        d = json.loads(f.read_text())
        key = f.stem
        root = d["root"]
        con.execute("insert into points values (?, 'ok', ?, ?, 'torch', ?, ?, ?, 7, 0.0005)",
                    [key, d["run"]["model"], d["run"]["batch_size"], root["throughput_samples_per_s"],
                     root["latency_s"]["p50"], root["latency_s"]["p99"]])
        for st in root["children"]:
            share = st["time_s"] / root["time_s"]
            shares.setdefault(key, {})[st["name"]] = share
            con.execute("insert into stages values (?, ?, ?, ?, ?, ?, ?, ?)",
                        [key, st["name"], st["time_s"], share, st["flops"], st["bytes"], st.get("bound"),
                         (st.get("roofline") or {}).get("ceiling_fraction")])
    con.execute("insert into points values ('failed', 'error', 'rmc1', 64, 'torch', null, null, null, 0, 0.0005)")
    con.close()
    return shares


def test_store_gives_the_profiles_points(profile_dir, tmp_path):
    store = tmp_path / "results.duckdb"
    shares = _store_from_profiles(profile_dir, store)
    from_store = {p.source.rsplit(":", 1)[1]: p for p in load_points([str(store)])}
    from_profiles = {Path(p.source).stem: p for p in load_points([str(profile_dir)])}
    assert set(from_store) == set(from_profiles) == set(shares)  # the failed point is left out
    for key, p in from_store.items():
        q = from_profiles[key]
        assert p.features == q.features and p.interaction == q.interaction
        for stage, share in shares[key].items():
            assert p.metrics[f"share:{stage}"] == pytest.approx(share)
            assert q.metrics[f"share:{stage}"] == pytest.approx(share)
        assert p.metrics["log10_throughput"] == pytest.approx(q.metrics["log10_throughput"])
    assert main(["correlate", str(store), "-o", str(tmp_path / "s.html"), "--bootstrap", "50"]) == 0
    assert (tmp_path / "s_plots" / "legend.svg").exists()


def test_bad_inputs_are_one_line_errors(profile_dir, tmp_path, capsys):
    bad = tmp_path / "bad.duckdb"
    duckdb.connect(str(bad)).execute("create table points (model varchar)").close()
    no_cfg = json.loads((profile_dir / "rmc1-8.json").read_text())
    del no_cfg["run"]["model_config"]
    (tmp_path / "nocfg.json").write_text(json.dumps(no_cfg))
    for args, needle in (
        ([str(profile_dir / "trace.json")], "not a recstack profile"),
        ([str(profile_dir / "rmc1-8.json"), str(profile_dir / "ncf-8.json")], "at least 4 models"),
        ([str(tmp_path / "missing.json")], "INPUT"),
        ([str(bad)], "no table 'stages'"),
        ([str(tmp_path / "nocfg.json")], "run.model_config"),
    ):
        assert main(["correlate", *args, "-o", str(tmp_path / "x.html")]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error:") and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.html").exists()
    # the real CLI process: exit status 2 and one line
    r = subprocess.run([sys.executable, "-m", "recstack", "correlate", str(bad), "-o", str(tmp_path / "x.html")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


INIT = """
window.__errors = [];
window.addEventListener('error', (e) => window.__errors.push(String(e.message || e)));
"""


def test_report_in_a_headless_browser(profile_dir, tmp_path):
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.skip(f"headless browser test skipped: {', '.join(missing)} not found")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    from recstack.correlate.render import render_html, write_plots

    points = load_points([str(profile_dir)])
    evil = copy.deepcopy(points[0])
    evil.model = "<img src=x onerror=alert(1)>"
    points.append(evil)
    corr = correlate(points, bootstrap=60)
    page = tmp_path / "r.html"
    page.write_text(render_html(points, corr, write_plots(points, corr, tmp_path / "plots")))
    opts = Options()
    opts.binary_location = str(CHROMIUM)
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    try:
        drv.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": INIT})
        drv.get(page.resolve().as_uri())
        assert drv.execute_script("return window.__errors") == []
        assert [e for e in drv.get_log("browser") if e["level"] == "SEVERE"] == []
        assert drv.find_elements(By.CSS_SELECTOR, "img") == []  # the model name is text, not markup
        assert "<img" in drv.find_element(By.ID, "points").text
        assert len(drv.find_elements(By.CSS_SELECTOR, "#plots .plot svg")) == len(corr.metrics)
        assert len(drv.find_elements(By.CSS_SELECTOR, "#rho tr")) == len(corr.metrics) + 1
        assert len(drv.find_elements(By.CSS_SELECTOR, "#findings li")) == len(corr.metrics)
        assert "resamples" in drv.find_element(By.ID, "method").text
        # styled like the other pages (their header and cards), tables inside the page, significant digits
        assert drv.find_elements(By.CSS_SELECTOR, "header.top h1") and len(drv.find_elements(By.CSS_SELECTOR, "section.card")) >= 5
        width = drv.execute_script("return document.documentElement.clientWidth")
        assert drv.execute_script("return document.documentElement.scrollWidth") <= width  # nothing overflows
        page_text = drv.find_element(By.TAG_NAME, "body").text
        assert not re.search(r"[+-]0\.00(?!\d)", page_text)  # +0.0089, never a bare +0.00
    finally:
        drv.quit()


def test_mixed_modes_are_named_per_mode_and_absent_stages_count_as_zero():
    from recstack.correlate.points import by_mode

    cfg = resolve_config("rmc1")
    pts = [
        Point("a", 64, "torch", "inference", "a", architecture_features(cfg, 64), {"share:embedding": 0.5}),
        Point("b", 64, "torch", "inference", "b", architecture_features(cfg, 64), {"share:sequence": 0.4}),
        Point("a", 64, "torch", "train", "c", architecture_features(cfg, 64), {"share:backward": 0.6}),
    ]
    by_mode(pts)
    assert pts[0].metrics == {"inference:share:embedding": 0.5, "inference:share:sequence": 0.0}
    assert pts[1].metrics == {"inference:share:embedding": 0.0, "inference:share:sequence": 0.4}
    assert pts[2].metrics == {"train:share:backward": 0.6}  # training shares are never mixed with inference


def test_signed_keeps_significant_digits():
    from recstack.correlate.stats import signed

    assert (signed(0.0012), signed(-0.5), signed(0.0), signed(float("nan"))) == ("+0.0012", "-0.50", "0", "")
