"""Report, diff and export: real profiles in, HTML/tables out; the report page is opened in headless Chromium.

The cost model and the roofline classifier are built separately; ``simulate_cost`` stands in for
them here (shape-based FLOP/byte estimates, a fixed machine) so that every report section that
depends on their documented fields is exercised.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import recstack
from recstack.errors import DataError, RecstackError
from recstack.export import BASE_COLUMNS, node_rows, to_dataframe, write_csv, write_parquet
from recstack.report import diff_profiles, render_diff_html, render_report, write_diff_html, write_report
from recstack.report.commands import register
from recstack.report.diff import NoiseRule, judge
from recstack.report.html import safe_json
from recstack.report.payload import machine_roofs, report_payload
from recstack.tree import Node, Profile

sys.path.insert(0, str(Path(__file__).parent))
from _batches import raw_batch  # noqa: E402

EVIL = "</script><img src=x onerror=alert(1)>"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
MACHINE = {"name": "test cpu", "peak_flops_per_s": 2.0e11, "bandwidths": {"DRAM": 2.5e10, "L2": 1.2e11}}


# -- fixtures: real profiles ---------------------------------------------------------------------------------
def _zoo_profile(backend: str, model_name: str = "rmc1") -> Profile:
    from recstack.zoo import build_model

    m = build_model("rmc1", scale=0.001, backend=backend)
    return recstack.profile(
        m, lambda i: raw_batch(m, 64, seed=i), batch_size=64, iters=4, warmup=1, op_iters=1,
        run_info={"model": model_name, "backend": backend},
    )


@pytest.fixture(scope="module")
def torch_prof() -> Profile:
    return _zoo_profile("torch", "rmc1" + EVIL)


@pytest.fixture(scope="module")
def tbe_prof() -> Profile:
    return _zoo_profile("tbe")


class Hostile(nn.Module):
    """A model whose module name is an HTML injection attempt (torch allows any name without a dot)."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module(EVIL, nn.Sequential(nn.Linear(16, 32), nn.ReLU()))
        self.over_arch = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.over_arch(getattr(self, EVIL)(x))


@pytest.fixture(scope="module")
def hostile_prof() -> Profile:
    return recstack.profile(
        Hostile(), lambda i: torch.randn(8, 16), batch_size=8, iters=3, warmup=1, op_iters=1,
        run_info={"model": "evil" + EVIL},
    )


# -- stand-in for the cost model and roofline classifier ------------------------------------------------------
def _prod(xs: list[int]) -> int:
    return math.prod(xs) if xs else 1


def _formula(n: Node) -> tuple[float, float] | None:
    shapes = n.extra.get("shapes") or []
    if not shapes or not isinstance(shapes[0], list):
        return None
    s = shapes[0]
    if n.name == "aten::addmm" and len(s) >= 3 and len(s[1]) == 2 and len(s[2]) == 2:
        (m, k), (_, o) = s[1], s[2]
        return 2.0 * m * k * o * n.calls, 4.0 * (m * k + k * o + m * o) * n.calls
    if n.name == "aten::embedding_bag" and len(s) >= 3 and len(s[0]) == 2:
        dim, ids, bags = s[0][1], _prod(s[1]), _prod(s[2])
        return float(ids * dim * n.calls), float((4 * ids * dim + 8 * ids + 4 * bags * dim) * n.calls)
    if n.name in ("aten::relu", "aten::clamp_min"):
        numel = _prod(s[0])
        return float(numel * n.calls), 8.0 * numel * n.calls
    return None


def simulate_cost(p: Profile) -> Profile:
    """Fill flops/bytes/intensity, provenance, roofline extras and the top-level sections (a copy)."""
    p = copy.deepcopy(p)
    peak, dram = MACHINE["peak_flops_per_s"], MACHINE["bandwidths"]["DRAM"]
    uncovered: dict[str, dict] = {}

    def fill(n: Node) -> None:
        for c in n.children:
            fill(c)
        f = _formula(n) if n.level == "op" else None
        if f:
            n.flops, n.bytes = f
            n.extra["provenance"] = {"flops": "formula", "bytes": "formula", "intensity": "derived"}
        else:
            costed = [c for c in n.children if c.flops is not None]
            if costed:
                n.flops = sum(c.flops for c in costed)
                n.bytes = sum(c.bytes for c in costed)
            elif n.level == "op":
                n.extra["uncovered"] = True
                u = uncovered.setdefault(n.name, {"name": n.name, "time_s": 0.0, "calls": 0})
                u["time_s"] += n.time_s
                u["calls"] += n.calls
        if n.flops and n.bytes:
            n.intensity = n.flops / n.bytes
            if n.time_s > 0:
                ceiling = min(peak, dram * n.intensity)
                achieved = n.flops / n.time_s
                n.extra.update(
                    achieved_flops_per_s=achieved, achieved_bytes_per_s=n.bytes / n.time_s,
                    ceiling_flops_per_s=ceiling, fraction_of_ceiling=achieved / ceiling,
                    bound="overhead" if achieved / ceiling < 0.02 else ("memory" if n.intensity < peak / dram else "compute"),
                    bound_basis="intensity vs ridge point",
                )

    fill(p.root)
    ops = sorted(uncovered.values(), key=lambda u: -u["time_s"])
    p.extra["cost_model"] = {"uncovered_ops": ops, "uncovered_time_share": sum(u["time_s"] for u in ops) / p.root.time_s}
    p.extra["machine"] = MACHINE
    tables = []
    for n in p.nodes():
        if n.name == "aten::embedding_bag" and n.extra.get("shapes"):
            s = n.extra["shapes"][0]
            lookups = _prod(s[1])
            unique = min(s[0][0], int(lookups * 0.6))
            tables.append({
                "table": n.path.split("/")[-2].rsplit(".", 1)[-1], "rows": s[0][0], "dim": s[0][1], "dtype": "fp32",
                "table_bytes": 4 * s[0][0] * s[0][1], "lookups": lookups, "unique_rows": unique,
                "bytes_requested": 4 * lookups * s[0][1], "bytes_unique": 4 * unique * s[0][1],
                "pooling_factor": lookups / s[2][0],
            })
    p.extra["embedding_tables"] = tables
    return p


# -- report: escaping and self-containment ---------------------------------------------------------------------
def test_safe_json_round_trips_and_escapes() -> None:
    obj = {"a": EVIL + " & \u2028\u2029 <!-- -->", "n": [1, 2.5, None, True], EVIL: "k"}
    text = safe_json(obj)
    assert not re.search("[<>&\u2028\u2029]", text)
    assert json.loads(text) == obj


def _scripts(page: str) -> list[str]:
    return re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.S)


def test_report_is_self_contained_and_escaped(hostile_prof: Profile) -> None:
    page = render_report(hostile_prof)
    assert page.count("</script>") == 2 and page.count("<script") == 2  # the data block and the code block
    assert "<img" not in page and "onerror=alert" in json.loads(_scripts(page)[0])["title"]
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page must not load anything"
    assert "<link" not in page and "@import" not in page
    data = json.loads(_scripts(page)[0])
    assert data["title"] == "evil" + EVIL
    assert any(EVIL in n["name"] for n in data["root"]["children"][0]["children"])
    # The CSP allows exactly the embedded script, by hash.
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(_scripts(page)[1].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page
    assert "&lt;/script&gt;" in page.split("</title>")[0]  # the title tag is HTML-escaped


def test_payload_sections_present_and_absent(torch_prof: Profile) -> None:
    plain = report_payload(torch_prof)
    assert plain["has_cost"] is False and plain["roofs"] is None
    assert plain["cost_model"] is None
    assert plain["embedding_tables"], "the profiler records per-table detail for zoo models"
    rich = report_payload(simulate_cost(torch_prof))
    assert rich["has_cost"] and rich["has_bound"]
    assert rich["roofs"]["compute"][0]["flops_per_s"] == MACHINE["peak_flops_per_s"]
    assert [m["name"] for m in rich["roofs"]["memory"]] == ["L2", "DRAM"]
    assert rich["embedding_tables"] and rich["cost_model"]["uncovered_ops"]
    assert rich["provenance_defaults"]["time_s"]["stage"] == "measured"
    assert rich["provenance_defaults"]["time_s"]["op"] == "apportioned"


@pytest.mark.parametrize(
    ("machine", "compute", "memory"),
    [
        ({"peak_flops_per_s": 1e12, "dram_bytes_per_s": 1e11}, [1e12], [1e11]),
        ({"peak_flops": {"fp32": 1e12, "bf16": 4e12}, "bandwidths": [{"name": "HBM", "bytes_per_s": 3e12}]}, [4e12, 1e12], [3e12]),
        ({"peak_flops_per_s": 1e12, "memory_bandwidth": 5e10, "l3_bandwidth": 2e11}, [1e12], [2e11, 5e10]),
        ({"peak_flops_per_s": {"median": 1e12}, "dram_bandwidth": {"bytes_per_s": 4e10}}, [1e12], [4e10]),
        ({"peak_flops_per_s": 1e12}, None, None),
        ({"bandwidths": {"DRAM": 1e11}}, None, None),
        (None, None, None),
    ],
)
def test_machine_roofs_forms(machine, compute, memory) -> None:
    roofs = machine_roofs(machine)
    if compute is None:
        assert roofs is None
    else:
        assert [c["flops_per_s"] for c in roofs["compute"]] == compute
        assert [m["bytes_per_s"] for m in roofs["memory"]] == memory


def test_payload_replaces_non_finite_numbers(torch_prof: Profile) -> None:
    p = copy.deepcopy(torch_prof)
    p.root.children[0].extra["weird"] = float("nan")
    p.root.extra["inf"] = float("inf")
    page = render_report(p)  # allow_nan=False inside: would raise on NaN
    data = json.loads(_scripts(page)[0])
    assert data["root"]["extra"]["inf"] is None


# -- diff ---------------------------------------------------------------------------------------------------
def _slower(p: Profile, stage: str, factor: float) -> tuple[Profile, Profile]:
    """(baseline, candidate): copies of ``p`` with tight p10-p90 spreads; in the candidate ``stage``
    (and so the run) takes ``factor`` times as long."""
    base = copy.deepcopy(p)
    for n in [base.root, *base.root.children]:
        n.extra["time_s_p10"], n.extra["time_s_p90"] = n.time_s * 0.97, n.time_s * 1.03
    cand = copy.deepcopy(base)
    cand.run_id = "candidate"
    st = cand.stage(stage)
    added = st.time_s * (factor - 1)
    for n in st.walk():
        n.time_s *= factor
        n.self_time_s *= factor
    cand.root.time_s += added
    for n in (st, cand.root):
        n.extra["time_s_p10"], n.extra["time_s_p90"] = n.time_s * 0.97, n.time_s * 1.03
    return base, cand


def test_judge_rule() -> None:
    rule = NoiseRule()
    assert judge(1.0, 1.5, (0.9, 1.1), (1.4, 1.6), 1.0, rule) == ("regression", "p10-p90")
    assert judge(1.0, 1.5, (0.9, 1.45), (1.4, 1.6), 1.0, rule) == ("noise", "p10-p90")  # intervals overlap
    assert judge(1.0, 1.01, (0.999, 1.001), (1.009, 1.011), 1.0, rule) == ("noise", "p10-p90")  # under the 2% floor
    assert judge(1.0, 0.5, (0.9, 1.1), (0.45, 0.55), 1.0, rule) == ("improvement", "p10-p90")
    assert judge(0.1, 0.15, None, None, 1.0, rule) == ("regression", "noise floor")
    assert judge(0.1, 0.105, None, None, 1.0, rule) == ("noise", "noise floor")  # 5% < 10% floor
    assert judge(0.001, 0.002, None, None, 1.0, rule) == ("noise", "noise floor")  # +100% but 0.1% of the run
    # Apportioned module/op times: the stage's relative spread, plus the fixed and absolute floors.
    assert judge(0.1, 0.15, (0.09, 0.11), (0.14, 0.16), 1.0, rule, apportioned=True) == ("regression", "stage p10-p90")
    assert judge(0.1, 0.15, (0.05, 0.2), (0.1, 0.3), 1.0, rule, apportioned=True) == ("noise", "stage p10-p90")
    assert judge(0.1, 0.105, (0.1, 0.1), (0.105, 0.105), 1.0, rule, apportioned=True) == ("noise", "stage p10-p90")
    with pytest.raises(DataError):
        NoiseRule(fixed_noise_pct=-1)


def test_diff_same_tree_matches_every_node(torch_prof: Profile) -> None:
    base, cand = _slower(torch_prof, "embedding", 1.5)
    r = diff_profiles(base, cand)
    assert r.matched_level == "op" and "same module tree" in r.match_note
    assert len(r.nodes) == sum(1 for n in base.nodes() if n.level not in ("run", "stage"))
    emb = next(d for d in r.stages if d.name == "embedding")
    assert emb.verdict == "regression" and emb.basis == "p10-p90" and math.isclose(emb.rel, 0.5)
    assert r.run.verdict == "regression"
    assert all(d.verdict == "noise" for d in r.stages if d.name != "embedding")
    assert any(d.verdict == "regression" and d.level == "op" and d.basis == "stage p10-p90" for d in r.nodes)
    assert all(d.verdict == "noise" for d in r.nodes if d.stage != "embedding")
    assert r.failures(10) and not r.failures(1000)
    back = diff_profiles(cand, base)
    assert next(d for d in back.stages if d.name == "embedding").verdict == "improvement"
    same = diff_profiles(base, base)
    assert not same.regressions() and not same.improvements() and not same.setting_changes


def test_diff_different_backends_matches_stages(torch_prof: Profile, tbe_prof: Profile) -> None:
    r = diff_profiles(torch_prof, tbe_prof)
    assert r.matched_level == "stage" and "module trees differ" in r.match_note
    assert r.nodes == []
    assert {d.name for d in r.stages} >= {"embedding", "dense", "head"}
    assert ("run.backend", "torch", "tbe") in r.setting_changes
    d = r.to_dict()
    json.dumps(d)
    assert d["matched_level"] == "stage" and "p10-p90" in d["rule"]["text"]


def test_diff_terminal_escapes_markup(torch_prof: Profile) -> None:
    import io

    from recstack.report.diff_render import print_diff

    base, cand = _slower(torch_prof, "embedding", 1.5)
    for p in (base, cand):
        p.run["model"] = "m[/bold][red]x[/]"
        p.stage("embedding").children[0].name = "odd[/]name"
    buf = io.StringIO()
    print_diff(diff_profiles(base, cand), file=buf, fail_pct=5)
    text = buf.getvalue()
    assert "m[/bold][red]x[/]" in text and "FAIL" in text


def test_diff_added_and_removed_stage(torch_prof: Profile) -> None:
    a = copy.deepcopy(torch_prof)
    b = copy.deepcopy(torch_prof)
    b.root.children = [c for c in b.root.children if c.name != "interaction"]
    r = diff_profiles(a, b)
    assert r.matched_level == "stage"  # b lacks the interaction modules
    assert next(d for d in r.stages if d.name == "interaction").verdict == "removed"
    forced = diff_profiles(a, b, level="op")
    assert forced.matched_level == "op" and forced.match_note.startswith("level op requested")
    assert any(d.verdict == "removed" and d.level == "module" for d in forced.nodes)
    r2 = diff_profiles(b, a, level="stage")
    assert r2.matched_level == "stage" and r2.nodes == []
    assert next(d for d in r2.stages if d.name == "interaction").verdict == "added"
    with pytest.raises(DataError, match="diff level"):
        diff_profiles(a, b, level="module")


# -- export -------------------------------------------------------------------------------------------------
def test_export_rows_csv_parquet_dataframe(torch_prof: Profile, tmp_path: Path) -> None:
    p = simulate_cost(torch_prof)
    rows = node_rows(p)
    assert len(rows) == sum(1 for _ in p.nodes())
    cols = list(rows[0])
    assert cols[: len(BASE_COLUMNS)] == list(BASE_COLUMNS)
    assert {"time_s_p10", "latency_s.p50", "distinct_shapes", "module_type", "provenance.flops"} <= set(cols)
    assert "shapes" not in cols  # lists are not scalar
    root, stage = rows[0], rows[1]
    assert root["parent_path"] is None and root["depth"] == 0 and root["share_of_run"] == 1.0
    assert stage["parent_path"] == "run" and stage["depth"] == 1
    assert any(r["bound"] in ("memory", "compute", "overhead") for r in rows)

    with (write_csv(p, tmp_path / "n.csv")).open(encoding="utf-8") as f:
        back = list(csv.DictReader(f))
    assert len(back) == len(rows) and back[0]["path"] == "run"
    assert back[0]["name"] == "rmc1" + EVIL

    pq = pytest.importorskip("pyarrow.parquet")
    t = pq.read_table(write_parquet(p, tmp_path / "n.parquet"))
    assert t.num_rows == len(rows) and t.schema.field("calls").type.id == pytest.importorskip("pyarrow").int64().id
    assert t.schema.metadata[b"recstack.run_id"] == p.run_id.encode()

    pytest.importorskip("pandas")
    df = to_dataframe(p)
    assert list(df.columns) == cols and len(df) == len(rows)
    assert math.isclose(df.loc[df.level == "stage", "share_of_run"].sum(), 1.0, rel_tol=0.05)


def test_export_parquet_without_pyarrow(torch_prof: Profile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(RecstackError, match="'pyarrow'"):
        write_parquet(torch_prof, tmp_path / "x.parquet")


# -- commands -----------------------------------------------------------------------------------------------
def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="recstack")
    register(parser.add_subparsers(dest="cmd", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_commands(torch_prof: Profile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = _slower(torch_prof, "embedding", 1.6)
    a, b = base.save(tmp_path / "a.json"), cand.save(tmp_path / "b.json")
    assert _cli(["report", str(a)]) == 0 and (tmp_path / "a.html").exists()
    assert _cli(["report", str(a), "-o", str(tmp_path / "r" / "x.html")]) == 0
    assert _cli(["diff", str(a), str(b), "-o", str(tmp_path / "d.html")]) == 0
    out = capsys.readouterr().out
    assert "regression" in out and "matched at op level" in out and "noise rule" in out
    assert _cli(["diff", str(a), str(b), "--fail-on-regression", "20"]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert _cli(["diff", str(a), str(b), "--fail-on-regression", "90"]) == 0
    assert _cli(["diff", str(a), str(a), "--fail-on-regression", "0"]) == 0
    assert _cli(["export", str(a), "-o", str(tmp_path / "t.parquet")]) == 0
    assert (tmp_path / "t.parquet").read_bytes()[:4] == b"PAR1"
    assert _cli(["export", str(a), "--format", "csv"]) == 0 and (tmp_path / "a.nodes.csv").exists()
    with pytest.raises(DataError, match="file not found"):
        _cli(["report", str(tmp_path / "missing.json")])
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DataError, match="not a recstack profile"):
        _cli(["diff", str(a), str(tmp_path / "bad.json")])
    with pytest.raises(SystemExit):
        _cli(["diff", str(a), str(b), "--fail-on-regression", "-3"])


# -- the page in a real browser -------------------------------------------------------------------------------
INIT = """
window.__errors = [];
window.__alerts = [];
window.addEventListener('error', (e) => window.__errors.push(String(e.message || e)));
window.addEventListener('unhandledrejection', (e) => window.__errors.push(String(e.reason)));
window.alert = (m) => window.__alerts.push(String(m));
"""


@pytest.fixture(scope="module")
def browser():
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.skip(
            f"headless browser test skipped: {', '.join(missing)} not found "
            "(install Debian's chromium and chromium-driver: apt-get install -y chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = str(CHROMIUM)
    for a in ("--headless=new", "--no-sandbox", "--disable-background-networking", "--disable-gpu",
              "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    drv.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": INIT})
    yield drv
    drv.quit()


def _open(drv, path: Path) -> None:
    drv.get(path.resolve().as_uri())
    errors = drv.execute_script("return window.__errors")
    logs = [e for e in drv.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == [] and logs == [], (errors, logs)
    assert drv.execute_script("return document.getElementById('app').dataset.state") == "ready"
    assert drv.execute_script("return window.__alerts") == []
    assert drv.execute_script("return document.querySelectorAll('img').length") == 0


def test_report_in_browser(browser, torch_prof: Profile, hostile_prof: Profile, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    drv = browser
    page = write_report(simulate_cost(torch_prof), tmp_path / "report.html")
    _open(drv, page)
    assert drv.find_element(By.ID, "report-title").text == "rmc1" + EVIL  # rendered as text, not markup
    meta = drv.find_element(By.ID, "metadata").text
    assert "batch_size" in meta and torch.__version__ in meta and "stage pass ratio" in meta
    assert len(drv.find_elements(By.CSS_SELECTOR, "#icicle rect.cell")) > 5
    assert len(drv.find_elements(By.CSS_SELECTOR, "#roofline-chart circle.pt")) > 3
    assert len(drv.find_elements(By.CSS_SELECTOR, "#roofline-chart line.roof")) == 3  # 2 bandwidths + 1 compute
    assert drv.find_elements(By.CSS_SELECTOR, "#embedding table") and drv.find_elements(By.CSS_SELECTOR, "#uncovered table")
    legend = drv.find_element(By.ID, "provenance-legend").text
    assert all(k in legend for k in ("measured", "apportioned", "formula", "derived"))

    # Drill: click the embedding stage in the icicle, then back up with the breadcrumb.
    app = drv.find_element(By.ID, "app")
    assert app.get_attribute("data-focus") == "run"
    drv.find_element(By.CSS_SELECTOR, '#icicle rect.cell[data-level="stage"][data-path="embedding"]').click()
    assert app.get_attribute("data-focus") == "embedding"
    assert drv.find_element(By.CSS_SELECTOR, "#icicle rect.cell").get_attribute("data-path") == "embedding"
    assert drv.find_element(By.CSS_SELECTOR, "#tree tbody tr").get_attribute("data-path") == "embedding"
    assert all(r.get_attribute("data-level") != "stage" for r in drv.find_elements(By.CSS_SELECTOR, "#tree tbody tr")[1:])
    crumbs = drv.find_element(By.ID, "breadcrumbs")
    assert "embedding" in crumbs.text and "rmc1" in crumbs.text
    crumbs.find_element(By.TAG_NAME, "button").click()
    assert app.get_attribute("data-focus") == "run"
    assert drv.execute_script("return window.__errors") == []

    # A profile without cost data says so; the hostile module name stays text.
    plain = write_report(hostile_prof, tmp_path / "plain.html")
    _open(drv, plain)
    assert "not available: run with the cost model / machine" in drv.find_element(By.ID, "roofline").text
    assert EVIL in drv.find_element(By.ID, "tree").text


def test_diff_in_browser(browser, torch_prof: Profile, tbe_prof: Profile, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    base, cand = _slower(torch_prof, "embedding", 1.5)
    page = write_diff_html(diff_profiles(base, cand), tmp_path / "diff.html", fail_pct=10)
    _open(browser, page)
    assert browser.find_element(By.ID, "app").get_attribute("data-matched-level") == "op"
    assert browser.find_elements(By.CSS_SELECTOR, '#stages tr[data-verdict="regression"]')
    assert "FAIL" in browser.find_element(By.ID, "kpis").text
    assert browser.find_elements(By.CSS_SELECTOR, '#nodes tr[data-verdict="regression"]')
    assert len(browser.find_elements(By.CSS_SELECTOR, "#stage-chart rect")) >= 2 * len(base.root.children)
    other = tmp_path / "backends.html"
    other.write_text(render_diff_html(diff_profiles(torch_prof, tbe_prof)), encoding="utf-8")
    _open(browser, other)
    assert "Not compared below stage level" in browser.find_element(By.ID, "nodes").text
