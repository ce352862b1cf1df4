"""Roofline fields added for hosts unlike the development one: roof_suspect, roof_key, the roof per
dtype a stage ran in, oneDNN kernel evidence, bf16/fp32 findings and ``machine --compare --profile``.

Per-dtype roofs and kernel parsing run on figures recorded on an Intel Xeon with AMX
(tests/data/machines and tests/data/onednn, see their READMEs): nothing here depends on the host's CPU or speed.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from recstack.analysis.roofline import ROOF_SUSPECT_REASON, classify
from recstack.cli import main
from recstack.errors import ConfigError
from recstack.hardware import onednn
from recstack.hardware.machine import load_machine, save_machine, validate_machine
from recstack.tree import Node, Profile

INTEL = Path(__file__).parent / "data" / "machines"
ONEDNN = Path(__file__).parent / "data" / "onednn"


@pytest.fixture(scope="module")
def intel() -> dict:
    return load_machine(INTEL / "machine-full-fast-period.json")


def _op(name: str, path: str, stage: str, t: float, flops: float, nbytes: float, **extra) -> Node:
    n = Node(name=name, path=path, level="op", stage=stage, time_s=t, calls=1, flops=flops, bytes=nbytes)
    n.intensity = flops / nbytes if nbytes else None
    n.extra.update(extra)
    return n


def _stage(name: str, children: list[Node]) -> Node:
    s = Node(
        name=name,
        path=name,
        level="stage",
        stage=name,
        time_s=sum(c.time_s for c in children),
        calls=1,
        flops=sum(c.flops or 0 for c in children),
        bytes=sum(c.bytes or 0 for c in children),
    )
    s.children = children
    return s


def _mixed_profile(run_dtype: str = "bf16") -> Profile:
    """A mixed-precision run at 1 thread: the dense stage's GEMMs ran in bf16, the head's in fp32,
    the embedding lookups in fp32 (tables stay fp32). Every GEMM: 1 GFLOP, 6 MB, 5 ms (200 GFLOP/s)."""
    dense = _stage("dense", [_op("aten::addmm", "dense/aten::addmm", "dense", 5e-3, 1e9, 6e6, dtypes={"bf16": 3})])
    head = _stage("head", [_op("aten::addmm", "head/aten::addmm", "head", 5e-3, 1e9, 6e6, dtypes={"fp32": 3})])
    emb = _stage(
        "embedding",
        [_op("aten::embedding_bag", "embedding/aten::embedding_bag", "embedding", 1e-3, 1e5, 4e6, dtypes={"fp32": 1})],
    )
    root = Node(name="toy", path="run", level="run", stage=None, time_s=11e-3, calls=1, flops=2.0001e9, bytes=16e6)
    root.children = [emb, dense, head]
    return Profile(
        run_id="t",
        run={"model": "toy", "threads": 1, "dtype": run_dtype, "device": "cpu", "table_dtype": "fp32"},
        environment={},
        overhead={},
        root=root,
    )


# -- roof per dtype, roof key, roof suspect --------------------------------------------------------------
def test_each_stage_is_held_to_the_roof_of_the_dtype_it_ran_in(intel):
    p = _mixed_profile()
    classify(p, intel)
    bf16_peak = intel["gemm_flops"]["bf16"]["by_threads"]["1"]["max"]  # AMX: 1.54 TFLOP/s
    fp32_peak = intel["gemm_flops"]["fp32"]["by_threads"]["1"]["max"]  # 229 GFLOP/s
    dense, head = p.root.find("dense").extra["roofline"], p.root.find("head").extra["roofline"]
    assert dense["roof_dtype"] == "bf16" and dense["peak_flops"] == pytest.approx(bf16_peak)
    assert head["roof_dtype"] == "fp32" and head["peak_flops"] == pytest.approx(fp32_peak)
    assert dense["compute_fraction"] == pytest.approx(200e9 / bf16_peak)
    assert p.root.find("embedding").extra["roofline"]["roof_dtype"] == "fp32"
    assert p.root.extra["roofline"]["roof_dtype"] == "fp32"  # most of the run's FLOPs (head + embedding)
    # the ops decide, not the run's dtype: an fp32 run whose dense ops ran in bf16 is held to bf16
    p = _mixed_profile("fp32")
    classify(p, intel)
    assert p.root.find("dense/aten::addmm").extra["roofline"]["roof_dtype"] == "bf16"
    # no dtypes recorded (an older profile): the run's dtype
    p = _mixed_profile("bf16")
    for n in p.root.walk():
        n.extra.pop("dtypes", None)
    classify(p, intel)
    assert p.root.find("head").extra["roofline"]["roof_dtype"] == "bf16"


def test_roof_key_names_the_roof_of_the_ceiling(intel):
    p = _mixed_profile()
    classify(p, intel)
    # 1 GFLOP over 6 MB is right of both ridges at 1 thread: the ceiling is the GEMM roof of its dtype
    assert p.root.find("dense").extra["roofline"]["roof_key"] == "gemm.bf16"
    assert p.root.find("head").extra["roofline"]["roof_key"] == "gemm.fp32"
    assert p.root.find("embedding").extra["roofline"]["roof_key"] == "gather"


def test_roof_suspect_above_105_percent(intel):
    p = _mixed_profile()
    head_op = p.root.find("head/aten::addmm")
    head_op.time_s = 1e9 / (1.88 * intel["gemm_flops"]["fp32"]["by_threads"]["1"]["max"])  # 188% of the roof
    p.root.find("head").time_s = head_op.time_s
    classify(p, intel)
    r = head_op.extra["roofline"]
    assert r["ceiling_fraction"] == pytest.approx(1.88)
    assert r["roof_suspect"] is True and r["roof_suspect_reason"] == ROOF_SUSPECT_REASON
    assert ROOF_SUSPECT_REASON in head_op.extra["bound_reason"]
    fine = p.root.find("dense").extra["roofline"]
    assert fine["roof_suspect"] is False and "roof_suspect_reason" not in fine
    head_op.time_s *= 1.88 / 1.04  # 104%: within the margin
    classify(p, intel)
    assert head_op.extra["roofline"]["roof_suspect"] is False


def test_recorded_intel_files_load_and_an_impossible_peak_is_refused(intel):
    slow = load_machine(INTEL / "machine-full-slow-period.json")
    assert slow["schema_version"] == 2 and intel["gemm_flops"]["bf16"]["native"] is True
    bad = copy.deepcopy(intel)
    bad["gemm_flops"]["bf16"]["by_threads"]["1"]["max"] = -1.0
    with pytest.raises(ConfigError, match=r"gemm_flops\.bf16\.by_threads\.1\.max"):
        validate_machine(bad, "m.json")
    bad["gemm_flops"]["bf16"]["by_threads"]["1"]["max"] = 0
    with pytest.raises(ConfigError, match="greater than 0"):
        validate_machine(bad, "m.json")


# -- oneDNN kernel evidence ------------------------------------------------------------------------------
def test_onednn_verbose_recorded_on_amx_host():
    text = (ONEDNN / "onednn-verbose-matmul-fp32-bf16.txt").read_text()
    execs = onednn.parse(text)
    assert len(execs) == 4 and {e["primitive"] for e in execs} == {"matmul"}
    assert execs[0]["implementation"] == "brg_matmul:avx10_1_512_amx" and execs[0]["isa"] == "avx10_1_512_amx"
    assert execs[0]["dtypes"] == {"src": "bf16", "wei": "bf16", "dst": "bf16"}
    assert execs[0]["problem"] == "1024x1024:1024x1024" and execs[0]["time_ms"] == pytest.approx(7.92505)
    ev = onednn.evidence(text)
    assert ev["amx"] is True and ev["version"].startswith("oneDNN v3.12.0")
    assert "AMX" in ev["isa"] and ev["kernels"][0]["calls"] == 4 and ev["kernels"][0]["isa_class"] == "amx"
    # older format, and kernels that are not AMX
    old = "dnnl_verbose,exec,cpu,inner_product,brgemm:avx512_core_bf16,forward_inference,src_bf16::blocked:ab:f0 wei_bf16::blocked:AB16b32a2b:f0 dst_bf16::blocked:ab:f0,,,mb64ic512oc256,0.05"
    (e,) = onednn.parse(old)
    assert e["isa_class"] == "avx512_bf16" and e["dtypes"]["src"] == "bf16" and e["primitive"] == "inner_product"
    assert onednn.isa_class("gemm:jit:f32") == "other"
    assert onednn.isa_class("brg_matmul:avx10_2", "f32") == "other" and onednn.isa_class("brg_matmul:avx10_2", "bf16") == "avx512_bf16"
    assert onednn.parse("torch 2.13.0+cpu mkldnn True\nnot a verbose line") == []


def test_onednn_capture_runs_on_this_host():
    a = torch.randn(64, 64).bfloat16()
    text = onednn.capture(lambda: torch.mm(a, a))
    for e in onednn.parse(text):  # whatever this host's oneDNN ran (or nothing), the lines parse
        assert e["primitive"] and e["implementation"]
    print("still writable")  # fd 1 is restored


# -- bf16 vs fp32 findings -------------------------------------------------------------------------------
def test_bf16_findings_per_stage_on_a_zoo_model():
    from recstack.analysis.dtype_compare import FINDING, bf16_findings

    (f,) = bf16_findings({"dense": 1e-3, "only_bf16": 1.0}, {"dense": 4e-3})
    assert f["kind"] == FINDING and f["stage"] == "dense" and f["value"] == pytest.approx(0.25)
    assert "4.00x faster in bf16" in f["text"]

    import recstack

    p = recstack.profile_zoo("rmc1", scale=0.001, batch_size=16, dtype="bf16", iters=2, warmup=1, op_iters=1)
    found = {f["stage"]: f for f in p.extra["findings"] if f["kind"] == FINDING}
    assert {"dense", "head"} <= set(found) and "embedding" not in found  # tables stay fp32
    for stage, f in found.items():
        assert f["value"] > 0 and set(f) == {"kind", "stage", "text", "value", "unit"} and f["unit"] == "ratio"
        b = p.root.find(stage).extra["bf16"]
        assert b["ratio"] == f["value"] and b["bf16_s"] > 0 and b["fp32_s"] > 0
    dense = p.root.find("dense")
    assert dense.extra["roofline"]["roof_dtype"] == "bf16" if "roofline" in dense.extra else True
    assert any(o.extra.get("dtypes", {}).get("bf16") for o in dense.walk() if o.level == "op")


# -- machine --compare FILE --profile PROFILE ------------------------------------------------------------
def test_machine_compare_remeasures_only_the_roofs_a_profile_used(intel, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path / "cache"))
    old = copy.deepcopy(intel)
    old["mode"] = "tiny"  # re-measure in tiny mode (seconds)
    save_machine(old, tmp_path / "old.json")
    p = _mixed_profile()
    stream_op = _op("aten::cat", "head/aten::cat", "head", 1e-3, 1e3, 8e6)  # 8 GB/s at 1e3 FLOPs: stream
    p.root.find("head").children.append(stream_op)
    classify(p, old)
    for n in p.root.walk():  # keep only the stream-bound node's key: only stream is re-measured
        if n is not stream_op:
            n.extra.get("roofline", {}).pop("roof_key", None)
    p.save(tmp_path / "p.json")
    assert main(["machine", "--compare", str(tmp_path / "old.json"), "--profile", str(tmp_path / "p.json"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["roof_keys"] == ["stream"] and data["remeasured"] == ["stream"]
    assert data["comparison"]["figures"] and {r["group"] for r in data["comparison"]["figures"]} == {"stream"}
    assert main(["machine", "--compare", str(tmp_path / "old.json"), "--profile", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "re-measured the roofs the profile used (stream)" in out and "stream copy 1 thread(s)" in out
    assert "GEMM" not in out
    assert main(["machine", "--profile", str(tmp_path / "p.json")]) == 2
    assert "--compare" in capsys.readouterr().err
