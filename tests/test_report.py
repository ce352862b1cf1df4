"""Report, diff and export: real profiles in, HTML/tables out; the report page is opened in headless Chromium.

Profiles are real zoo runs with the real cost model; the roofline classes come from
:func:`recstack.analysis.roofline.classify` against this host measured in the ``tiny`` mode
(:func:`recstack.hardware.machine.measure_machine`), and the available-counters section from
recorded ``perf stat`` output (``tests/data/perf``) through the real parser and
:func:`recstack.profiling.counters_replay.attach_counters`.
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
from recstack.analysis.roofline import classify
from recstack.errors import DataError, RecstackError
from recstack.export import BASE_COLUMNS, node_rows, to_dataframe, write_csv, write_parquet
from recstack.hardware import counters as ctr
from recstack.profiling.counters_replay import attach_counters
from recstack.report import diff_profiles, render_diff_html, render_report, write_diff_html, write_report
from recstack.report.commands import register
from recstack.report.diff import NoiseRule, judge
from recstack.report.html import safe_json
from recstack.report.payload import PROVENANCE_KINDS, report_payload
from recstack.tree import Node, Profile

sys.path.insert(0, str(Path(__file__).parent))
from _batches import raw_batch  # noqa: E402

EVIL = "</script><img src=x onerror=alert(1)>"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PERF_DATA = Path(__file__).parent / "data" / "perf"


# -- fixtures: real profiles ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def machine() -> dict:
    """This host, measured in the tiny mode (seconds)."""
    from recstack.hardware.machine import measure_machine

    return measure_machine(tiny=True)


def _zoo_profile(backend: str, model_name: str = "rmc1", **kw) -> Profile:
    """rmc1 at a tiny scale with the cost model (and counters, unavailable on most CI hosts); no machine."""
    from recstack.zoo import build_model

    m = build_model("rmc1", scale=0.001, backend=backend)
    return recstack.profile(
        m, lambda i: raw_batch(m, 64, seed=i), batch_size=64, iters=4, warmup=1, op_iters=1,
        run_info={"model": model_name, "backend": backend}, **kw,
    )


def _classified(p: Profile, machine: dict) -> Profile:
    p = copy.deepcopy(p)
    classify(p, machine)
    return p


@pytest.fixture(scope="module")
def torch_costed() -> Profile:
    """Cost figures, no machine: the roofline section must say what is missing."""
    return _zoo_profile("torch", "rmc1" + EVIL)


@pytest.fixture(scope="module")
def torch_prof(torch_costed: Profile, machine: dict) -> Profile:
    return _classified(torch_costed, machine)


@pytest.fixture(scope="module")
def tbe_prof(machine: dict) -> Profile:
    return _classified(_zoo_profile("tbe", "rmc1" + EVIL), machine)  # the same model as torch_prof: diff compares one model


@pytest.fixture(scope="module")
def train_prof(machine: dict) -> Profile:
    return _classified(_zoo_profile("torch", mode="train", optimizer="adagrad"), machine)


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
    """No cost model, no counters, no machine: every optional section is absent."""
    return recstack.profile(
        Hostile(), lambda i: torch.randn(8, 16), batch_size=8, iters=3, warmup=1, op_iters=1,
        run_info={"model": "evil" + EVIL}, cost_model=False, counters=False,
    )


def _with_counters(p: Profile) -> Profile:
    """A copy carrying per-stage counters as attach_counters stores them, from recorded perf sessions."""
    p = copy.deepcopy(p)

    def stage(sample: str) -> dict:
        parsed = ctr.parse_perf_stat_csv((PERF_DATA / sample).read_text())
        return {"roots": ["x"], "root_calls_per_step": 1, **ctr.derived(parsed, calls=10)}

    attach_counters(p, {
        "available": True, "method": ctr.METHOD, "perf": "perf version 6.1",
        "stages": {
            "embedding": stage("intel_icx_topdown_events.txt"),
            "dense": stage("intel_multiplexed.txt"),
            "head": {"available": False, "reason": "stage root was not called during the step"},
        },
    })
    return p


def _node(p: Profile, path: str):
    return next(n for n in p.nodes() if n.path == path)


# -- a hand-built profile with the newer optional fields ------------------------------------------------------
SUSPECT_REASON = "above the measured roof; the roof is probably under-measured"
MARKUP = "m[/bold][red]x[/]"  # rich markup that would raise or restyle if printed unescaped


def _n(name: str, path: str, level: str, stage: str | None, t: float, **kw) -> Node:
    extra = kw.pop("extra", {})
    children = kw.pop("children", [])
    return Node(name, path, level, stage, t, calls=kw.pop("calls", 1), children=children, extra=extra, **kw)


def _roof(frac: float, dtype: str, suspect: bool) -> dict:
    r = {"roof": "stream", "peak_flops": 1e11, "roof_dtype": dtype, "intensity": 20.0, "achieved_flops": frac * 1e11,
         "achieved_bytes_per_s": frac * 5e9, "roof_bytes_per_s": 2e10, "ceiling_flops": 1e11, "ceiling_fraction": frac,
         "compute_fraction": frac, "memory_fraction_requested": frac / 4, "per_call_s": 1e-3, "roof_suspect": suspect}
    if suspect:
        r["roof_suspect_reason"] = SUSPECT_REASON
    return r


@pytest.fixture(scope="module")
def fields_prof() -> Profile:
    """Labels, synthetic [unattributed]/[python/framework between ops] nodes, a suspect roof fraction, a roof
    dtype, findings, detected contention, stage rusage, run.config and a load note, on a tiny hand-built tree."""
    rusage = {"minor_faults": 1234.5, "major_faults": 0, "voluntary_ctx_switches": 35, "involuntary_ctx_switches": 2}
    dense = _n("dense", "dense", "stage", "dense", 6e-3, flops=6e8, bytes=3e7, intensity=20.0, extra={
        "bound": "compute", "bound_reason": "188% of bf16 GEMM", "roofline": _roof(1.88, "bf16", True), "rusage": rusage,
        "time_s_p10": 5.5e-3, "time_s_p90": 6.5e-3}, children=[
        _n("0", "dense/deep.0", "module", "dense", 3e-3, extra={"label": "deep.0", "module_type": "Linear"}),
        _n("0", "dense/wide.0", "module", "dense", 2e-3, extra={"label": "wide.0", "module_type": "Linear"}),
        _n(MARKUP, "dense/odd", "module", "dense", 5e-4, extra={"label": MARKUP}),
        _n("[unattributed]", "dense/[unattributed]", "op", "dense", 5e-4, extra={"kind": "unattributed"}),
    ])
    head = _n("head", "head", "stage", "head", 3e-3, flops=3e7, bytes=1.5e6, intensity=20.0, extra={
        "bound": "memory", "bound_reason": "40% of the stream bandwidth", "roofline": _roof(0.4, "fp32", False),
        "rusage": rusage})
    other = _n("other", "other", "stage", "other", 1e-3, children=[
        _n("aten::add", "other/aten::add", "op", "other", 4e-4),
        _n("[python/framework between ops]", "other/[python/framework between ops]", "op", "other", 6e-4,
           extra={"kind": "framework"}),
    ])
    root = _n("tiny", "run", "run", None, 1e-2, children=[dense, head, other], extra={"time_s_p10": 9e-3, "time_s_p90": 1.1e-2})
    machine = {"host": "h", "measured_at": "2026-12-01", "mode": "full", "device": "cpu", "threads": 2, "dtype": "fp32",
               "peak_flops": 1e11, "peak_label": "fp32 GEMM", "stream_bandwidth": 2e10, "stream_label": "stream copy",
               "compute_roofs": [{"dtype": "fp32", "flops": 1e11, "main": True, "label": "fp32 GEMM"},
                                 {"dtype": "bf16", "flops": 3e11, "main": False, "label": "bf16 GEMM"}],
               "gather_roofs": [], "ridge_intensity": 5.0, "notes": []}
    contention = {"detected": True, "evidence": ["load average 3.1 on 2 usable cores", "busy " + EVIL],
                  "planned_load": [{"pid": 7, "name": "sweep-worker", "cores": 1.0}], "cpu_time_ratio": 0.61}
    p = Profile(
        run_id="fields", run={"model": "tiny" + MARKUP, "mode": "inference", "batch_size": 8,
                              "config": {"model": "tiny", "batch_size": 8, "threads": 2, "dtype": "bf16", "stage_rules": []}},
        environment={"host": "h", "contention": contention}, overhead={}, root=root,
        extra={"machine": machine, "findings": [
            {"kind": "bf16_speedup", "stage": "dense", "text": "bf16 takes 0.658 of the fp32 time in dense", "value": 0.658},
            {"kind": "note", "stage": None, "text": EVIL, "value": None},
            {"kind": "stage_bound", "stage": "dense", "text": "dense is compute-bound above its ceiling", "value": 1.88,
             "roof_suspect": True, "roof_suspect_reason": SUSPECT_REASON}]},
    )
    p.notes = ["upgraded from schema v1: stage times were medians"]  # what loading an older profile says
    return p


def _terminal(p: Profile) -> str:
    import io

    from recstack.render.terminal import profile_tree

    buf = io.StringIO()
    profile_tree(p, depth=3, top=8, file=buf)
    return buf.getvalue()


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


def test_payload_sections_absent(hostile_prof: Profile, torch_costed: Profile) -> None:
    bare = report_payload(hostile_prof)
    assert bare["has_cost"] is False
    assert bare["machine"] is None and bare["cost_model"] is None and bare["counters"] is None
    assert bare["embedding_tables"] is None  # not a zoo sparse arch
    assert bare["memory"]["peak_step"]["peak_rss_bytes"] > 0  # always recorded
    costed = report_payload(torch_costed)
    assert costed["has_cost"] and costed["machine"] is None
    assert all("roofline" not in n["extra"] for n in costed["root"]["children"])


def test_payload_carries_the_producers_formats(torch_prof: Profile, machine: dict) -> None:
    data = report_payload(torch_prof)
    assert data["profile_extra"] == {}  # every top-level section has a place of its own
    # Roofs: the classifier's compact machine figures at the run's threads and dtype.
    m = data["machine"]
    main = [r for r in m["compute_roofs"] if r["main"]]
    assert len(main) == 1 and main[0]["dtype"] == torch_prof.run["dtype"] == m["dtype"]
    assert main[0]["flops"] == m["peak_flops"] > 0 and m["stream_bandwidth"] > 0
    assert m["threads"] == torch_prof.run["threads"] and m["host"] == machine["host"]
    # Points: each node's extra.roofline; a gather stage has both bases. Whether the embedding stage is gather
    # bound depends on a measured share (its embedding ops' share of its op time, >= GATHER_DOMINANCE): at this
    # tiny scale a busy host can push it under, and then no gather roof is drawn for it (the measured range is).
    emb = next(c for c in data["root"]["children"] if c["name"] == "embedding")
    r = emb["extra"]["roofline"]
    if r["roof"] == "gather":
        assert m["gather_roofs"] and all(g["bytes_per_s"] > 0 for g in m["gather_roofs"])  # the embedding stage
        assert r["gather"]["row_bytes"] == 4 * 32 and r["achieved_unique_bytes_per_s"] > 0
    else:
        assert m["gather_roofs"] == [] and m["gather_bandwidth_range"][0] > 0
    assert r["intensity"] > 0 and r["achieved_flops"] > 0
    frac = r["memory_fraction_unique"] if emb["extra"]["bound_basis"] == "unique bytes" else r["memory_fraction_requested"]
    assert math.isclose(r["ceiling_fraction"], max(r["compute_fraction"], frac))
    assert emb["extra"]["bound"] in ("memory", "compute", "overhead") and emb["extra"]["bound_reason"]
    # Per-table detail, memory, counters and the cost-model summary, as written.
    tables = data["embedding_tables"]
    assert [t["table"] for t in tables] == [f"t_{i}" for i in range(8)]
    assert all(t["bytes_requested"] == t["lookups"] * t["row_bytes"] and "backward_bytes" not in t for t in tables)
    assert sum(t["lookups"] for t in tables) == emb["extra"]["cost_detail"]["lookups"]
    assert data["memory"]["resident_by_stage"]["embedding"]["parameters_bytes"] == sum(t["table_bytes"] for t in tables)
    assert data["memory"]["peak_step"]["basis"]
    c = data["counters"]
    assert c["available"] is True or (c["available"] is False and c["reason"])
    cm = data["cost_model"]
    assert cm["uncovered_ops"] == [] and cm["covered_time_share"] == 1.0 and cm["flops"] == torch_prof.root.flops
    # Every provenance kind the cost model writes has a legend entry.
    kinds = {v for n in torch_prof.nodes() for v in n.extra["provenance"].values() if v}
    assert kinds <= set(PROVENANCE_KINDS)


@pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")  # torch's sparse Adagrad
def test_payload_train_mode_and_available_counters(train_prof: Profile) -> None:
    data = report_payload(_with_counters(train_prof))
    for t in data["embedding_tables"]:  # torch backend, adagrad: sparse update of the touched rows
        assert t["backward_bytes"] == t["bytes_requested"]
        assert t["optimizer_bytes"] == 5 * t["bytes_unique"] and t["optimizer_rows_touched"] == t["unique_rows"]
        assert t["optimizer_state_bytes"] >= t["table_bytes"]  # adagrad: a sum of squares per weight (and a step)
    res = data["memory"]["resident_by_stage"]["embedding"]
    assert res["optimizer_state_bytes"] == sum(t["optimizer_state_bytes"] for t in data["embedding_tables"])
    c = data["counters"]
    assert c["available"] and c["perf"] == "perf version 6.1"
    assert c["stages"]["embedding"]["ipc"] == pytest.approx(1.6) and c["stages"]["embedding"]["topdown"]["retiring"] > 0
    assert c["stages"]["dense"]["multiplexed"] is True and c["stages"]["head"]["available"] is False
    assert {s["name"] for s in data["root"]["children"]} >= {"backward", "optimizer"}


def test_payload_replaces_non_finite_numbers(torch_costed: Profile) -> None:
    p = copy.deepcopy(torch_costed)
    p.root.children[0].extra["weird"] = float("nan")
    p.root.extra["inf"] = float("inf")
    page = render_report(p)  # allow_nan=False inside: would raise on NaN
    data = json.loads(_scripts(page)[0])
    assert data["root"]["extra"]["inf"] is None


# -- newer optional fields: terminal and report ---------------------------------------------------------------
def test_terminal_marks_new_fields(fields_prof: Profile) -> None:
    text = _terminal(fields_prof)
    assert "188%?" in text and not re.search(r"188%(?!\?)", text)  # a suspect fraction is never plain
    assert f"? {SUSPECT_REASON}: dense" in text and "40%" in text and "40%?" not in text
    assert "bf16" in text and "roof" in text  # the roof's dtype beside the fraction
    assert "deep.0" in text and "wide.0" in text  # labels, not the shared name "0"
    assert MARKUP in text and "tiny" + MARKUP in text  # printed as text, not markup
    assert "[unattributed]*" in text and "[python/framework between ops]*" in text and "* not an op:" in text
    head = text.split("tiny" + MARKUP)[0]  # the banner comes first
    assert "WARNING: contention detected" in head and "load average 3.1 on 2 usable cores" in head
    assert "busy " + EVIL in head and "sweep-worker" in head
    assert "note: upgraded from schema v1" in head
    assert "minor faults" in text and "1.23k" in text  # rusage per step
    findings = text.split("Findings")[1]
    assert "bf16_speedup [dense]: bf16 takes 0.658 of the fp32 time in dense (0.658)" in findings and EVIL in findings
    assert f"stage_bound [dense]: dense is compute-bound above its ceiling (1.88?) [? {SUSPECT_REASON}]" in findings


def test_terminal_without_new_fields_has_no_banner_or_marks(torch_prof: Profile) -> None:
    old = copy.deepcopy(torch_prof)  # as a profile written before these fields existed
    for n in old.nodes():
        for key in ("label", "kind", "rusage"):
            n.extra.pop(key, None)
        for key in ("roof_suspect", "roof_suspect_reason", "roof_dtype"):
            (n.extra.get("roofline") or {}).pop(key, None)
    old.extra.pop("findings", None)
    old.environment.pop("contention", None)
    (old.extra.get("machine") or {}).pop("contended", None)  # a tiny measurement on a busy host may be marked
    text = _terminal(old)
    assert "contention" not in text and "Findings" not in text and "?" not in text and "not an op" not in text
    assert re.search(r"\d+%\s+(memory|compute|overhead)", text)  # plain fractions when no roof is suspect


def test_report_payload_new_fields(fields_prof: Profile) -> None:
    data = report_payload(fields_prof)
    assert data["findings"][0]["kind"] == "bf16_speedup" and "findings" not in data["profile_extra"]
    assert data["contention"]["detected"] is True and data["load_notes"] == fields_prof.notes
    assert isinstance(data["schema_version"], int)
    dense = data["root"]["children"][0]
    assert [c["label"] for c in dense["children"][:2]] == ["deep.0", "wide.0"] and data["root"]["label"] is None
    assert dense["extra"]["roofline"]["roof_suspect"] is True and dense["extra"]["rusage"]["minor_faults"] == 1234.5
    page = render_report(fields_prof)
    assert "<img" not in page and page.count("<script") == 2  # hostile labels, evidence and findings stay data
    assert json.loads(_scripts(page)[0])["contention"]["evidence"][1] == "busy " + EVIL


def test_units_formats() -> None:
    from recstack import units

    assert units.si(2.5e9, "FLOP") == "2.50 GFLOP" and units.si(512, "B") == "512 B" and units.si(999_960, "B") == "1.00 MB"
    assert units.si(452.94e9, "FLOP/s", digits=4) == "452.9 GFLOP/s" and units.si(None, "B", missing="n/a") == "n/a"
    assert units.count(1.5e6) == "1.50M" and units.count(26) == "26" and units.count(float("nan")) == "-"
    assert units.binary(32768) == "32 KiB" and units.binary(1.5 * 2**20) == "1.5 MiB" and units.binary(640) == "640 B"
    assert units.seconds(0.01388) == "13.88 ms" and units.seconds(0.99996) == "1.000 s" and units.seconds(0) == "0 s"
    assert units.seconds(461.6e-6) == "461.6 us" and units.percent(1.88) == "188%" and units.sig(9.996) == "10.0"
    assert units.percent(0.1234, decimals=1, signed=True) == "+12.3%" and units.percent(-0.05, signed=True) == "-5%"
    assert units.ratio(1.234) == "1.23x" and units.ratio(None) == "-" and units.milliseconds(0.0123, width=8) == "  12.300"


# -- diff ---------------------------------------------------------------------------------------------------
def _slower(p: Profile, stage: str, factor: float) -> tuple[Profile, Profile]:
    """(baseline, candidate): copies of ``p`` with tight p10-p90 spreads (stages +-3 %, the run +-1 %,
    so that the run's change is real whatever share of it the stage has on a noisy host); in the
    candidate ``stage`` (and so the run) takes ``factor`` times as long."""
    spread = {"run": 0.01}

    def set_spread(n) -> None:
        w = spread.get(n.level, 0.03)
        n.extra["time_s_p10"], n.extra["time_s_p90"] = n.time_s * (1 - w), n.time_s * (1 + w)

    base = copy.deepcopy(p)
    for n in [base.root, *base.root.children]:
        set_spread(n)
    cand = copy.deepcopy(base)
    cand.run_id = "candidate"
    st = cand.stage(stage)
    added = st.time_s * (factor - 1)
    for n in st.walk():
        n.time_s *= factor
        n.self_time_s *= factor
    cand.root.time_s += added
    for n in (st, cand.root):
        set_spread(n)
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
    # The longest stage: its ops clear the rule's absolute floor (0.5 % of the run) whatever shares a busy host gave.
    big = max(torch_prof.root.children, key=lambda n: n.time_s).name
    base, cand = _slower(torch_prof, big, 1.5)
    r = diff_profiles(base, cand)
    assert r.matched_level == "op" and "same module tree" in r.match_note
    assert len(r.nodes) == sum(1 for n in base.nodes() if n.level not in ("run", "stage"))
    slow = next(d for d in r.stages if d.name == big)
    assert slow.verdict == "regression" and slow.basis == "p10-p90" and math.isclose(slow.rel, 0.5)
    assert r.run.verdict == "regression"
    assert all(d.verdict == "noise" for d in r.stages if d.name != big)
    assert any(d.verdict == "regression" and d.level == "op" and d.basis == "stage p10-p90" for d in r.nodes)
    assert all(d.verdict == "noise" for d in r.nodes if d.stage != big)
    assert r.failures(10) and not r.failures(1000)
    back = diff_profiles(cand, base)
    assert next(d for d in back.stages if d.name == big).verdict == "improvement"
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


def test_diff_says_which_side_was_contended(torch_prof: Profile) -> None:
    a, b = copy.deepcopy(torch_prof), copy.deepcopy(torch_prof)
    a.environment["contention"] = {"detected": False, "evidence": []}
    b.environment["contention"] = {"detected": True, "evidence": ["2 busy processes on 2 cores"]}
    notes = diff_profiles(a, b).notes
    assert len(notes) == 1 and notes[0].startswith("B was contended") and "2 busy processes" in notes[0]


# -- export -------------------------------------------------------------------------------------------------
def test_export_rows_csv_parquet_dataframe(torch_prof: Profile, tmp_path: Path) -> None:
    p = torch_prof
    rows = node_rows(p)
    assert len(rows) == sum(1 for _ in p.nodes())
    cols = list(rows[0])
    assert cols[: len(BASE_COLUMNS)] == list(BASE_COLUMNS)
    assert {"time_s_p10", "latency_s.p50", "distinct_shapes", "module_type", "provenance.flops", "bytes_read",
            "cost_detail.lookups", "roofline.ceiling_fraction", "roofline.gather.row_bytes", "bound_basis"} <= set(cols)
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
    assert math.isclose(df.loc[df.level == "stage", "share_of_run"].sum(), 1.0, rel_tol=1e-6)  # stage times add up (interquartile mean)


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


def _pct(v: float) -> str:
    return f"{v * 100:.1f} %"  # the page's F.pct


def test_report_in_browser(browser, torch_prof: Profile, hostile_prof: Profile, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    drv = browser
    _open(drv, write_report(torch_prof, tmp_path / "report.html"))
    assert drv.find_element(By.ID, "report-title").text == "rmc1" + EVIL  # rendered as text, not markup
    meta = drv.find_element(By.ID, "metadata").get_attribute("textContent")  # folded: not visible text
    assert "batch_size" in meta and torch.__version__ in meta and "stage pass ratio" in meta
    assert len(drv.find_elements(By.CSS_SELECTOR, "#icicle rect.cell")) > 5
    legend = drv.find_element(By.ID, "provenance-legend").text
    assert all(k in legend for k in ("measured", "formula", "derived"))

    # Roofline: one line per compute roof, the stream roof and each gather roof of the machine figures.
    m = torch_prof.extra["machine"]
    assert len(drv.find_elements(By.CSS_SELECTOR, "#roofline-chart line.roof.compute")) == len(m["compute_roofs"])
    assert len(drv.find_elements(By.CSS_SELECTOR, "#roofline-chart line.roof.stream")) == 1
    # each gather roof of the stages, or (none: see test_payload_carries_the_producers_formats) the measured range
    assert len(drv.find_elements(By.CSS_SELECTOR, "#roofline-chart line.roof.gather")) == (len(m["gather_roofs"]) or 2)
    assert len(drv.find_elements(By.CSS_SELECTOR, "#roofline-chart circle.pt")) > 3
    emb = torch_prof.stage("embedding")
    pts = drv.find_elements(By.CSS_SELECTOR, '#roofline-chart circle.pt.stage[data-path="embedding"]')
    assert len(pts) == 2 and "unique" in pts[0].get_attribute("class")  # both bases for the gather stage
    ActionChains(drv).move_to_element(pts[1]).perform()
    tip = drv.find_element(By.ID, "tooltip").text
    assert "intensity, unique bytes" in tip and "memory roof" in tip and "gather" in tip and emb.extra["bound"] in tip
    assert "machine figures" in drv.find_element(By.ID, "roofline").text

    # Tree table: bound and % of ceiling from extra.roofline.ceiling_fraction.
    head = [th.text for th in drv.find_elements(By.CSS_SELECTOR, "#tree thead th")]
    assert head[-2:] == ["bound", "% of ceiling"]
    row = drv.find_element(By.CSS_SELECTOR, '#tree tbody tr[data-path="embedding"]')
    cells = row.find_elements(By.TAG_NAME, "td")
    assert cells[-2].text == emb.extra["bound"]
    assert cells[-1].text.startswith(_pct(emb.extra["roofline"]["ceiling_fraction"]))

    # Per-table detail, memory, counters, cost-model coverage.
    rows = drv.find_elements(By.CSS_SELECTOR, "#embedding tbody tr")
    assert len(rows) == len(torch_prof.extra["embedding_tables"])
    mem = drv.find_element(By.ID, "memory").text
    assert "resident by stage" in mem.lower() and torch_prof.extra["memory"]["peak_step"]["basis"] in mem
    counters = torch_prof.extra["counters"]
    if not counters["available"]:
        assert "unavailable: " + counters["reason"] in drv.find_element(By.ID, "counters").text
    assert "Every op in this profile has a cost formula" in drv.find_element(By.ID, "uncovered").text

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

    # A profile without the cost model says so; the hostile module name stays text.
    _open(drv, write_report(hostile_prof, tmp_path / "plain.html"))
    assert "Roofline not available: this profile has no FLOP or byte figures" in drv.find_element(By.ID, "roofline").text
    assert "not recorded" in drv.find_element(By.ID, "counters").text
    assert "without the cost model" in drv.find_element(By.ID, "uncovered").text
    assert EVIL in drv.find_element(By.ID, "tree").text


@pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")  # torch's sparse Adagrad
def test_report_first_screen_says_where_the_time_goes(browser, torch_prof: Profile, tmp_path: Path) -> None:
    """The first screen (1400 x 1000) holds the stages with their shares, bounds and the run's bound read from the
    time shares; the run metadata is folded below it."""
    from selenium.webdriver.common.by import By

    drv = browser
    _open(drv, write_report(torch_prof, tmp_path / "first.html"))
    drv.save_screenshot(str(tmp_path / "first.png"))
    q = drv.execute_script
    height = q("return window.innerHeight")
    box = q("const r = document.getElementById('summary').getBoundingClientRect(); return [r.top, r.bottom]")
    bound = q("return document.getElementById('run-bound').getBoundingClientRect().bottom")
    assert box[0] < height / 2 and bound < height, (box, bound, height)
    rows = drv.find_elements(By.CSS_SELECTOR, "#summary tbody tr")
    stages = sorted(torch_prof.root.children, key=lambda n: -n.time_s)
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == [n.name for n in stages]  # largest first
    run_t = torch_prof.root.time_s
    assert rows[0].find_element(By.CSS_SELECTOR, ".sharebar").text == _pct(stages[0].time_s / run_t)  # a numbered bar
    # the run's bound from the stages' time shares: every class named with its share of the step
    shares: dict[str, float] = {}
    for n in stages:
        shares[n.extra.get("bound") or "unclassified"] = shares.get(n.extra.get("bound") or "unclassified", 0) + n.time_s
    text = drv.find_element(By.ID, "run-bound").text
    total = sum(shares.values())
    assert all(b in text for b, v in shares.items() if b != "unclassified" or v >= 0.001 * total), (text, shares)
    top = max((b for b in shares if b != "unclassified"), key=shares.get)
    classified = sum(v for b, v in shares.items() if b != "unclassified")
    assert text.startswith("Run bound: " + (top if shares[top] >= 2 / 3 * classified else "mixed"))
    assert q("return document.getElementById('metadata-fold').open") is False
    assert q("return document.getElementById('metadata').checkVisibility()") is False  # folded


def test_report_variants_in_browser(browser, torch_costed: Profile, train_prof: Profile, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    drv = browser
    # Cost figures without machine figures: no chart, and the way to get one.
    _open(drv, write_report(torch_costed, tmp_path / "costed.html"))
    assert "no machine figures" in drv.find_element(By.ID, "roofline").text
    assert "% of ceiling" not in drv.find_element(By.CSS_SELECTOR, "#tree thead").text
    # Train mode: backward and optimizer bytes per table; counters from recorded perf sessions.
    _open(drv, write_report(_with_counters(train_prof), tmp_path / "train.html"))
    head = drv.find_element(By.CSS_SELECTOR, "#embedding thead").text
    assert "backward bytes" in head and "optimizer bytes" in head and "optimizer state" in head
    t0 = train_prof.extra["embedding_tables"][0]
    row = drv.find_element(By.CSS_SELECTOR, "#embedding tbody").text
    assert f"{t0['optimizer_rows_touched']:,}" in row
    counters = drv.find_element(By.ID, "counters").text
    assert "IPC" in counters and "1.60" in counters and "backend 56 %" in counters
    assert "multiplexed" in counters and "unavailable: stage root was not called during the step" in counters
    assert drv.find_elements(By.CSS_SELECTOR, '#roofline-chart circle.pt.stage[data-path="backward"]')


def test_report_new_fields_in_browser(browser, fields_prof: Profile, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    drv = browser
    _open(drv, write_report(fields_prof, tmp_path / "fields.html"))
    banner = drv.find_element(By.ID, "contention").text
    assert "Contention detected" in banner and "load average 3.1 on 2 usable cores" in banner and "busy " + EVIL in banner
    assert "sweep-worker (pid 7)" in banner
    assert "upgraded from schema v1" in drv.find_element(By.ID, "load-notes").text
    # A suspect fraction carries "?" and its reason, in the tree, the stage table and the KPI; the roof dtype beside it.
    row = drv.find_element(By.CSS_SELECTOR, '#tree tbody tr[data-path="dense"]')
    cell = row.find_elements(By.TAG_NAME, "td")[-1]
    assert cell.text.startswith("188.0 %?") and "bf16" in cell.text
    assert SUSPECT_REASON in cell.find_element(By.CSS_SELECTOR, ".suspect").get_attribute("title")
    stage_text = drv.find_element(By.ID, "stages").text
    assert "188.0 %?" in stage_text and SUSPECT_REASON in stage_text
    assert "faults / step" in stage_text and "ctx switches / step" in stage_text  # rusage: minor / major, vol. / invol.
    assert "1.23k / 0" in stage_text and "35 / 2" in stage_text
    assert SUSPECT_REASON in drv.find_element(By.ID, "roof-suspect").text
    assert not re.search(r"188\.0 %(?!\?)", drv.find_element(By.TAG_NAME, "main").text)
    # Labels instead of the shared name; synthetic nodes marked; hostile labels as text.
    drv.find_element(By.CSS_SELECTOR, '#icicle rect.cell[data-path="dense"]').click()
    tree = drv.find_element(By.ID, "tree").text
    assert "deep.0" in tree and "wide.0" in tree and MARKUP in tree
    synth = drv.find_element(By.CSS_SELECTOR, '#tree tr.synthetic[data-path="dense/[unattributed]"]')
    assert "not an op" in synth.text
    assert drv.find_elements(By.CSS_SELECTOR, "#icicle rect.cell.synthetic")
    # Findings, run.config, schema version.
    findings = drv.find_element(By.ID, "findings").text
    assert "bf16_speedup" in findings and "0.658" in findings and EVIL in findings and "1.88?" in findings
    config = drv.find_element(By.ID, "run-config").get_attribute("textContent")
    assert "RunConfig: 5 fields" in config and "stage_rules" in config
    assert "profile schema version" in drv.find_element(By.ID, "metadata").get_attribute("textContent")


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
