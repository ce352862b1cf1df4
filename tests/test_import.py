"""``recstack import``: torch.profiler traces recorded here (tiny real models) -> profiles every command reads.

Golden traces are made by the tests with torch.profiler: with ``recstack.annotate``, with ``with_stack``
only, without ProfilerStep, gzipped, truncated, a two-rank gloo run, a TorchRec model; plus hand-written
traces (missing fields, huge args, Kineto GPU events with correlation ids, bad input).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from _machines import synthetic_machine
from pydantic import BaseModel
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import recstack
from recstack.cli import main
from recstack.schema import ProfileModel, committed_json_schema
from recstack.traceimport import decode, import_trace
from recstack.tree import Profile
from recstack.workload import bind, load_workload
from recstack.zoo import BuildOptions, build_model

SCALE, BATCH = 0.001, 8


def _zoo(name: str = "rmc1", backend: str = "torch") -> tuple[torch.nn.Module, Any]:
    net = build_model(name, scale=SCALE, options=BuildOptions(mode="inference", batch_size=BATCH, backend=backend))
    bound = bind(load_workload("uniform"), net.features(), net.num_dense, net.num_tasks)
    net.eval()
    return net, bound.batch(BATCH)


def record(path: Path, net: torch.nn.Module, batch: Any, *, annotate: bool = True, with_stack: bool = False,
           steps: int = 3, step_marks: bool = True, step_range: str | None = None) -> Path:
    """A Chrome trace of ``steps`` forwards under torch.profiler (a schedule: ProfilerStep ranges)."""
    ctx = recstack.annotate(net) if annotate else _null()
    kw: dict[str, Any] = dict(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=with_stack)
    if step_marks:
        kw.update(schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                  on_trace_ready=lambda p: p.export_chrome_trace(str(path)))
    with torch.inference_mode(), ctx, profile(**kw) as prof:
        for _ in range(steps + (1 if step_marks else 0)):
            if step_range:
                with record_function(step_range):
                    net(batch)
            else:
                net(batch)
            if step_marks:
                prof.step()
    if not step_marks:
        prof.export_chrome_trace(str(path))
    return path


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> None:
        return None


def _cli(*argv: str) -> int:
    return main(list(argv))


def _undeclared(m: BaseModel, where: str = "") -> list[str]:
    found = [f"{where}.{k}".lstrip(".") for k in (m.__pydantic_extra__ or {})]
    for name in type(m).model_fields:
        v = getattr(m, name)
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else [(None, v)]
        for _k, x in items:
            if isinstance(x, BaseModel):
                found += _undeclared(x, f"{where}.{name}")
    return found


def _valid(p: Profile) -> dict[str, Any]:
    """The profile as saved JSON, checked against the committed schema and the typed models."""
    d = json.loads(json.dumps(p.to_dict(), allow_nan=False))
    jsonschema.Draft202012Validator(committed_json_schema()).validate(d)
    assert _undeclared(ProfileModel.model_validate(d)) == [], "the importer writes keys the contract lacks"
    assert Profile.from_dict(d).to_dict() == d
    return d


def _stages(p: Profile) -> set[str]:
    return {c.name for c in p.root.children}


@pytest.fixture(scope="module")
def zoo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    net, batch = _zoo()
    return record(tmp_path_factory.mktemp("zoo") / "rmc1.json", net, batch)


@pytest.fixture(scope="module")
def live_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("live") / "live.trace.json"


@pytest.fixture(scope="module")
def live_rmc1(live_trace: Path) -> Profile:
    return recstack.profile_zoo("rmc1", scale=SCALE, batch_size=BATCH, iters=2, warmup=1, op_iters=2,
                                num_batches=1, counters=False, trace=live_trace)


def test_a_live_profiles_own_trace_imports_with_its_step_ranges(live_rmc1: Profile, live_trace: Path) -> None:
    p = import_trace(live_trace, step_range="recstack.step::*")
    assert p.run["iters"] == 2 and p.extra["import"]["hierarchy"] == "module ranges"
    assert _stages(p) == _stages(live_rmc1)


# -- the tree ----------------------------------------------------------------------------------------------
def test_annotated_trace_gives_the_live_profiles_stages_and_roots(zoo_trace: Path, live_rmc1: Profile) -> None:
    p = import_trace(zoo_trace)
    d = _valid(p)
    assert d["run"]["source"] == "imported" and d["import"]["hierarchy"] == "recstack.annotate ranges"
    assert d["import"]["steps_from"] == "ProfilerStep ranges" and d["import"]["files"][0]["steps"] == 3
    assert _stages(p) == _stages(live_rmc1)
    assert set(p.run["stage_roots"]) == set(live_rmc1.run["stage_roots"])
    assert p.run["model"] == "DLRM" and p.overhead["method"].startswith("estimated from the trace")
    # Stage times add up to the run (other takes the rest); p10 <= time <= p90 over the 3 steps.
    assert sum(c.time_s for c in p.root.children) == pytest.approx(p.root.time_s, rel=1e-9)
    for st in p.root.children:
        assert st.extra["time_s_p10"] <= st.time_s * (1 + 1e-9) and st.time_s <= st.extra["time_s_p90"] * (1 + 1e-9)
    emb = p.stage("embedding")
    assert emb is not None and emb.child("sparse_arch") is not None
    assert emb.child("sparse_arch").extra["module_type"] == "TorchEmbeddings"
    bags = [n for n in emb.walk() if n.level == "op" and n.name == "aten::embedding_bag"]
    assert len(bags) == 8  # one per table module, once per step, float tables, shapes recorded
    assert all(b.calls == 1 and b.extra["dtypes"] == {"fp32": 3} and b.extra["distinct_shapes"] == 1 for b in bags)


def test_recorded_shapes_price_the_dense_stages_as_the_live_cost_model(zoo_trace: Path, live_rmc1: Profile) -> None:
    p = import_trace(zoo_trace)
    assert p.extra["cost_model"]["covered_time_share"] > 0.9
    for stage in ("dense", "head"):  # GEMMs: shapes say it all (embedding needs index values for unique rows)
        imp, live = p.stage(stage), live_rmc1.stage(stage)
        assert imp.flops == pytest.approx(live.flops, rel=1e-9) and imp.flops > 0
    assert p.stage("embedding").flops > 0 and p.stage("embedding").bytes > 0


def test_with_stack_class_names_give_the_same_stages(tmp_path: Path, live_rmc1: Profile) -> None:
    net, batch = _zoo()
    p = import_trace(record(tmp_path / "stack.json", net, batch, annotate=False, with_stack=True))
    _valid(p)
    assert p.extra["import"]["hierarchy"].startswith("nn.Module events")
    assert _stages(p) == _stages(live_rmc1)
    assert p.root.name == "DLRM" and p.stage("embedding").child("TorchEmbeddings_0") is not None


def test_without_profiler_steps_whole_trace_or_step_range(tmp_path: Path) -> None:
    net, batch = _zoo()
    whole = import_trace(record(tmp_path / "whole.json", net, batch, step_marks=False, steps=2))
    assert whole.run["iters"] == 1 and whole.extra["import"]["steps_from"] == "whole trace"
    assert any("whole trace is one step" in n for n in whole.extra["import"]["notes"])
    path = record(tmp_path / "ranged.json", net, batch, step_marks=False, steps=3, step_range="my_step")
    ranged = import_trace(path, step_range="my_step")
    assert ranged.run["iters"] == 3 and "embedding" in _stages(ranged)
    assert _cli("import", str(path), "-o", str(tmp_path / "x.json"), "--step-range", "nope") == 2


def test_gzipped_trace_imports_as_the_plain_one(zoo_trace: Path, tmp_path: Path) -> None:
    gz = tmp_path / "rmc1.json.gz"
    gz.write_bytes(gzip.compress(zoo_trace.read_bytes()))
    a, b = import_trace(zoo_trace).to_dict(), import_trace(gz).to_dict()
    for d in (a, b):
        d.pop("run_id"), d["run"].pop("trace"), d["import"]["files"][0].pop("file")
    assert a == b


def test_truncated_trace_is_a_partial_import_that_says_how_much(zoo_trace: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    data = zoo_trace.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) * 7 // 10])
    out = tmp_path / "cut.profile.json"
    assert _cli("import", str(cut), "-o", str(out)) == 4
    err = capsys.readouterr().err
    assert "warning:" in err and "truncated trace: read" in err and f"of {len(data) * 7 // 10:,} bytes" in err
    d = json.loads(out.read_text())
    assert d["import"]["files"][0]["truncated"] is True and 0 < d["import"]["files"][0]["events"]
    head = tmp_path / "head.json"
    head.write_bytes(data[:60])
    assert _cli("import", str(head), "-o", str(out)) == 2


def _kineto(events: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, "deviceProperties": [], **top, "traceEvents": events, "traceName": "t"}


def _op(name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _range(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _synthetic_steps(steps: int = 2) -> list[dict[str, Any]]:
    """Steps of a model ``Net`` with ``emb`` (EmbeddingBag) and ``mlp`` (Linear) under annotate ranges."""
    ev: list[dict[str, Any]] = []
    for s in range(steps):
        t = 1000.0 * s
        ev += [_range(f"ProfilerStep#{s}", t, 900), _range("recstack.module::|Net", t + 10, 800),
               _range("recstack.module::emb|EmbeddingBag", t + 20, 300),
               _op("aten::embedding_bag", t + 30, 250, **{"Input Dims": [[100, 8], [40], [9]],
                                                         "Input type": ["float", "long int", "long int"]}),
               _range("recstack.module::mlp|Linear", t + 400, 300),
               _op("aten::linear", t + 410, 280, **{"Input Dims": [[8, 8], [4, 8], [4]]}),
               _op("aten::addmm", t + 420, 260, **{"Input Dims": [[4], [8, 8], [8, 4]]})]
    return ev


def test_missing_fields_and_huge_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = _synthetic_steps()
    ev.append({"ph": "X", "name": "aten::relu", "ts": 600.0})  # no cat, dur, pid, tid, args
    ev.append({"ph": "i", "name": "instant"})
    huge = _op("aten::add", 700, 10, **{"Concrete Inputs": ["x" * (3 << 20), "}, {" * 3],
                                         "Nested": [{"a": "}, {"}, {"b": [{"c": 1}, {"d": 2}]}] * 20})
    ev.append(huge)
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(_kineto(ev), indent=1))
    p = import_trace(path, correct_overhead=False)  # the times as recorded (the correction has its own test)
    ref = p.to_dict()
    # Tiny chunks: every cut is tried, also the ones inside the huge args, and must be refused there.
    monkeypatch.setattr(decode, "CHUNK", 256)
    monkeypatch.setattr(decode, "BLOCK", 1024)
    small = import_trace(path, correct_overhead=False).to_dict()
    for d in (ref, small):
        d.pop("run_id")
    assert small == ref
    assert _stages(p) == {"embedding", "dense", "other"}  # EmbeddingBag by type; mlp (Linear) a linear stack
    assert p.stage("embedding").time_s == pytest.approx(320e-6)  # its root's 300 us + 20 us of caller code before it
    assert p.root.time_s == pytest.approx(900e-6)
    _valid(p)


def test_the_overhead_correction_stays_within_its_bounds_on_a_recorded_trace(zoo_trace: Path) -> None:
    """What the correction guarantees on a real CPU trace (rmc1 recorded here): every part (stage, its caller
    code, ``other``) loses exactly what it reports removing, at most ``per_event_s x`` its events per step and
    never below zero, bound by the per-event estimate alone (no waits, no GPU); the step loses the parts' sum.
    Whether the corrected times are closer to the unprofiled run is a measurement:
    benchmarks/bench_overhead_correction.py (docs/import.md)."""
    raw, cor = import_trace(zoo_trace, correct_overhead=False), import_trace(zoo_trace)
    per = cor.overhead["per_event_s"]
    assert 0 < per < 1e-3, cor.overhead  # a CPU trace of rmc1 has wrapper ops; an event costs microseconds
    raw_nodes = {n.path: n for n in raw.root.walk()}
    removed = 0.0
    for st in cor.root.children:
        caller = [c for c in st.children if c.extra.get("kind") == "caller"]
        cuts = []
        for p in (st, *caller):
            cut, events = p.extra["overhead_removed_s"], p.extra["overhead_events_per_step"]
            assert 0.0 <= cut <= per * events * (1 + 1e-9), (p.path, cut, per, events)
            assert p.extra["overhead_bound"] == "per-event estimate", p.path
            assert 0.0 <= p.time_s <= raw_nodes[p.path].time_s, p.path
            cuts.append(cut)
        if caller:  # its time is its own part's; the stage's holds its caller code's too
            assert caller[0].time_s == pytest.approx(raw_nodes[caller[0].path].time_s - cuts[1], rel=1e-9, abs=1e-12)
        assert st.time_s == pytest.approx(raw_nodes[st.path].time_s - sum(cuts), rel=1e-9, abs=1e-12), st.name
        removed += sum(cuts)
    assert {"embedding", "other"} <= {st.name for st in cor.root.children} and removed > 0
    assert removed == pytest.approx(cor.overhead["removed_step_s"], rel=1e-9)
    assert cor.root.time_s == pytest.approx(raw.root.time_s - removed, rel=1e-9)
    assert sum(st.time_s for st in cor.root.children) == pytest.approx(cor.root.time_s, rel=1e-9)


def test_profiler_overhead_correction_is_the_wrapper_median_times_the_events(tmp_path: Path) -> None:
    # Per step: emb range + embedding_bag (2 events) in embedding, mlp range + linear + addmm (3) in dense.
    # aten::linear's only child is aten::addmm: a wrapper op, exclusive 280 - 260 = 20 us per call; a
    # second wrapper (aten::t -> aten::transpose, 8 - 4 = 4 us, after linear in mlp's range) makes the
    # median (4 + 20) / 2.
    ev = _synthetic_steps()
    for s in range(2):
        ev += [_op("aten::t", 1000.0 * s + 691, 8), _op("aten::transpose", 1000.0 * s + 692, 4)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_kineto(ev)))
    raw, cor = import_trace(path, correct_overhead=False), import_trace(path)
    per = (20 + 4) / 2 * 1e-6
    assert raw.overhead["method"].startswith("unknown") and "per_event_s" not in raw.overhead
    assert cor.overhead["method"].startswith("estimated from the trace: ") and "2 here" in cor.overhead["method"]
    assert cor.overhead["per_event_s"] == pytest.approx(per)
    assert cor.overhead["events_per_step"] == pytest.approx(7)
    assert cor.overhead["removed_step_s"] == pytest.approx(7 * per)
    assert cor.root.time_s == pytest.approx(raw.root.time_s - 7 * per)
    emb_root = 300e-6  # the embedding stage's root range; its 20 us of caller code before it hold no event
    assert cor.stage("embedding").time_s == pytest.approx(emb_root - 2 * per + 20e-6)
    assert cor.stage("dense").time_s == pytest.approx(raw.stage("dense").time_s - 5 * per)
    assert sum(c.time_s for c in cor.root.children) == pytest.approx(cor.root.time_s)
    # Ops are scaled to the corrected stage; shares still add up to 1.
    def linear(p: Profile) -> float:
        return next(n.time_s for n in p.root.walk() if n.name == "aten::linear")

    assert linear(cor) < linear(raw)
    assert sum(cor.stage_shares().values()) == pytest.approx(1.0)
    _valid(cor)
    # No wrapper op: nothing to estimate from, nothing removed, and said so.
    flat = [e for e in _synthetic_steps() if e["name"] != "aten::addmm"]
    path.write_text(json.dumps(_kineto(flat)))
    p = import_trace(path)
    assert p.overhead == {"method": p.overhead["method"]} and "no wrapper op" in p.overhead["method"]
    assert p.root.time_s == pytest.approx(900e-6)


def test_kernels_attach_to_their_launching_op_by_correlation(tmp_path: Path) -> None:
    ev = _synthetic_steps(steps=2)
    corr = 100
    for e in list(ev):
        if e["name"] == "aten::addmm":
            corr += 1
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": e["ts"] + 5, "dur": 4, "args": {"correlation": corr, "External id": 7}})
            ev.append({"ph": "X", "cat": "kernel", "name": "sgemm_128x64", "pid": 0, "tid": 7, "ts": e["ts"] + 50,
                       "dur": 30.0, "args": {"correlation": corr, "device": 0, "stream": 7}})
            ev.append({"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": e["ts"] + 5, "cat": "ac2g", "name": "ac2g"})
            ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": e["ts"] + 50, "cat": "ac2g", "name": "ac2g",
                       "bp": "e"})
    ev.append({"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 5.0, "dur": 1.0,
               "args": {"correlation": 999}})
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(_kineto(ev, deviceProperties=[{"id": 0, "name": "NVIDIA H100"}])))
    # Raw times: kernel nodes scale with their stage like every node below it (as in a live op pass);
    # the op's device_time_s does not.
    p = import_trace(path, correct_overhead=False)
    d = _valid(p)
    addmm = next(n for n in p.nodes() if n.name == "aten::addmm")
    kernel = addmm.child("sgemm_128x64")
    assert kernel is not None and kernel.level == "kernel" and kernel.calls == 1
    assert kernel.time_s == pytest.approx(30e-6) and addmm.extra["device_time_s"] == pytest.approx(30e-6)
    assert kernel.extra["device"] == "cuda" and addmm.child("cudaLaunchKernel") is not None
    assert d["import"]["files"][0]["kernels"] == 2
    assert any("1 device events had no launching op" in n for n in d["import"]["notes"])


# -- ranks and TorchRec -----------------------------------------------------------------------------------
RANK_SCRIPT = """
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule
import recstack

def run(rank, out, store):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    x = torch.randn(4, 8)
    with recstack.annotate(net), profile(activities=[ProfilerActivity.CPU], schedule=schedule(
            wait=0, warmup=1, active=2, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/rank{rank}.json")) as p:
        for _ in range(3):
            y = net(x)
            dist.all_reduce(y)
            p.step()
    dist.barrier()  # both ranks have written their trace before either tears the group down
    dist.destroy_process_group()
    # leave without interpreter teardown: a gloo thread dropping its last work then can abort a finished rank
    from recstack.hardware.torchrun import exit_rank
    exit_rank(0)

if __name__ == "__main__":
    mp.spawn(run, args=(sys.argv[1], sys.argv[2]), nprocs=2)
"""


def test_two_rank_gloo_directory(tmp_path: Path) -> None:
    # A file rendezvous: a TCP port picked free here can be taken by another process before the ranks bind it.
    store = tmp_path / "rendezvous"
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent(RANK_SCRIPT))
    traces = tmp_path / "traces"
    traces.mkdir()
    r = subprocess.run([sys.executable, str(script), str(traces), str(store)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(p.name for p in traces.iterdir()) == ["rank0.json", "rank1.json"]
    p = import_trace(traces)
    d = _valid(p)
    assert [x["rank"] for x in d["ranks"]] == [0, 1]
    assert d["ranks"][0]["root"] is None and d["ranks"][1]["root"]["level"] == "run"
    assert {f["rank"] for f in d["import"]["files"]} == {0, 1}
    assert all(f["steps"] == 2 for f in d["import"]["files"])
    names = {n.name for n in p.nodes()}
    assert any("allreduce" in n.lower() or "all_reduce" in n.lower() for n in names)


def test_torchrec_model_trace(tmp_path: Path) -> None:
    net, batch = _zoo("rmc1", backend="torchrec")
    p = import_trace(record(tmp_path / "torchrec.json", net, batch, steps=2))
    _valid(p)
    assert "embedding" in _stages(p)
    assert any(n.extra.get("module_type") == "EmbeddingBagCollection" for n in p.nodes() if n.level == "module")


# -- every command on an imported profile ------------------------------------------------------------------
def test_every_analysis_reads_an_imported_profile(zoo_trace: Path, live_rmc1: Profile, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    machine = tmp_path / "machine.json"
    machine.write_text(json.dumps(synthetic_machine()))
    imp = tmp_path / "imported.json"
    assert _cli("import", str(zoo_trace), "-o", str(imp), "--model", "rmc1", "--machine", str(machine)) == 0
    out = capsys.readouterr().out
    assert "3 steps (ProfilerStep ranges)" in out and "embedding" in out
    d = json.loads(imp.read_text())
    assert d["machine"]["file"] == str(machine)
    assert {c["name"]: c.get("bound") for c in d["root"]["children"]}["dense"] in ("memory", "compute", "overhead")
    live = live_rmc1.save(tmp_path / "live.json")
    assert _cli("validate", str(imp)) == 0
    assert _cli("show", str(imp)) == 0 and "profiler overhead estimated from the trace" in capsys.readouterr().out
    assert _cli("report", str(imp), "-o", str(tmp_path / "r.html")) == 0 and (tmp_path / "r.html").stat().st_size
    assert _cli("diff", str(live), str(imp), "-o", str(tmp_path / "d.html")) == 0
    assert _cli("export", str(imp), "-o", str(tmp_path / "n.csv")) == 0
    assert "aten::embedding_bag" in (tmp_path / "n.csv").read_text()
    assert _cli("roofline", str(imp), "-o", str(tmp_path / "roof.png"), "--machine", str(machine)) == 0
    assert _cli("analyse", str(imp), "-o", str(tmp_path / "a.json"), "--machine", str(machine)) == 0
    assert _cli("validate", str(tmp_path / "a.json")) == 0


# -- bad input ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,content,message", [
    ("text.json", b"hello, not json", "not a torch.profiler trace"),
    ("other.json", json.dumps({"traceEvents": [{"ph": "X", "name": "draw", "ts": 1, "dur": 2}]}).encode(),
     "a Chrome trace from another tool?"),
    ("plain.json", b'{"a": [1, 2, 3]}', 'no "traceEvents" array'),
    ("empty.json", b"", "is empty"),
    ("none.json", json.dumps({"traceEvents": []}).encode(), "has no events"),
    ("bad.json.gz", b"\x1f\x8bnot really gzip", "gzip"),
    ("typed.json", json.dumps(_kineto([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "soon"}])).encode(),
     "ts: Expected `float`"),
    ("missing.json", None, "does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                          content: bytes | None, message: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    assert _cli("import", str(path), "-o", str(tmp_path / "out.json")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not (tmp_path / "out.json").exists()


def test_nothing_in_a_trace_is_executed(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    code = f"__import__('os').system('touch {marker}')"
    ev = _synthetic_steps(1) + [_op(code, 500, 1, **{"Input Dims": [code], "Input type": [code]})]
    ev.append(_range(f"recstack.module::{code}|{code}", 600, 5))
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(_kineto(ev)))
    _valid(import_trace(path))
    assert not marker.exists()


def test_annotate_removes_its_hooks() -> None:
    net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with recstack.annotate(net):
        assert net[0]._forward_pre_hooks
        net(torch.zeros(1, 2))
    assert not net[0]._forward_pre_hooks and not net[0]._forward_hooks
