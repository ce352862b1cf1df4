"""``recstack import`` on GPU traces in the shapes real ones have (built here, written by these tests).

Each trace is written by :class:`KinetoTrace` in the exact shape seen in public traces recorded on other
machines (HolisticTraceAnalysis's test data: A100/V100 CUDA, MI250 ROCm 6.2, NCCL, TorchRec rank folders,
PyTorch 1.9 inference traces): categories, argument keys, flows, threads. The figures the tests hold the
import to are summed straight from the events written, never from the importer's fold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from recstack.schema import ProfileModel, committed_json_schema
from recstack.traceimport import import_trace
from recstack.tree import Profile

HOST_PID, MAIN, AUTOGRAD, GPU_PID, STREAM = 100, 100, 101, 0, 7


class KinetoTrace:
    """Events of a Kineto trace, in the order and spelling the options say."""

    def __init__(self, *, old: bool = False, rocm: bool = False) -> None:
        self.events: list[dict[str, Any]] = []
        self.old, self.rocm = old, rocm  # old: PyTorch <= 1.9 spellings (Operator, Runtime, Kernel, ...)
        self.corr = 1000
        self.ext = 1
        self.device_us: dict[str, float] = {}  # kind -> device time written (the golden sums)

    def cat(self, new: str) -> str:
        old = {"cpu_op": "Operator", "cuda_runtime": "Runtime", "kernel": "Kernel", "gpu_memcpy": "Memcpy",
               "gpu_memset": "Memset"}
        return old.get(new, new) if self.old else new

    def x(self, cat: str, name: str, ts: float, dur: float, tid: int = MAIN, pid: int = HOST_PID,
          **args: Any) -> dict[str, Any]:
        e = {"ph": "X", "cat": self.cat(cat), "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
             "args": args}
        self.events.append(e)
        return e

    def op(self, name: str, ts: float, dur: float, tid: int = MAIN, **args: Any) -> dict[str, Any]:
        self.ext += 1
        key = "external id" if self.old else "External id"
        return self.x("cpu_op", name, ts, dur, tid, **{key: self.ext}, **args)

    def range(self, name: str, ts: float, dur: float, tid: int = MAIN) -> dict[str, Any]:
        return self.x("user_annotation", name, ts, dur, tid)

    def launch(self, ts: float, device: list[tuple[str, str, float, float]], tid: int = MAIN,
               api: str | None = None, flow: bool = True) -> int:
        """A runtime call at ``ts`` (4 us) and its device events: (category, name, start, duration) each."""
        self.corr += 1
        kind = device[0][0] if device else "kernel"
        name = api or {"kernel": "hipLaunchKernel" if self.rocm else "cudaLaunchKernel",
                       "gpu_memcpy": "hipMemcpyAsync" if self.rocm else "cudaMemcpyAsync",
                       "gpu_memset": "hipMemsetAsync" if self.rocm else "cudaMemsetAsync"}[kind]
        ext = "external id" if self.old else "External id"
        self.x("cuda_runtime", name, ts, 4, tid, correlation=self.corr, **{ext: self.ext})
        for cat, kname, start, dur in device:
            self.x(cat, kname, start, dur, tid=STREAM, pid=GPU_PID, correlation=self.corr, device=0, stream=STREAM,
                   **{ext: self.ext})
            k = {"gpu_memcpy": "memcpy", "gpu_memset": "memset"}.get(cat, "collective" if "nccl" in kname else
                                                                       "kernel")
            self.device_us[k] = self.device_us.get(k, 0.0) + dur
            if flow:
                self.events.append({"ph": "s", "id": self.corr, "pid": HOST_PID, "tid": tid, "ts": ts,
                                    "cat": "ac2g", "name": "ac2g"})
                self.events.append({"ph": "f", "id": self.corr, "pid": GPU_PID, "tid": STREAM, "ts": start,
                                    "cat": "ac2g", "name": "ac2g", "bp": "e"})
        return self.corr

    def write(self, path: Path, **top: Any) -> Path:
        meta = [{"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": AUTOGRAD,
                 "args": {"name": "pt_autograd_0"}}]
        doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}], **top,
               "traceEvents": self.events + meta, "traceName": str(path)}
        path.write_text(json.dumps(doc))
        return path


def training_steps(tr: KinetoTrace, steps: int = 12, period: float = 10_000.0) -> None:
    """Training steps of a model without module ranges (a TorchRec job's shape): input copy and an
    all-to-all outside every stage, a backward, an optimizer step, then more ops outside every stage."""
    for s in range(steps):
        t = period * s
        tr.range(f"ProfilerStep#{s}", t, period - 100)
        tr.op("aten::to", t + 10, 40)
        tr.launch(t + 20, [("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t + 30, 25.0)])
        tr.range("## sdd ##", t + 100, 900)
        tr.op("aten::mm", t + 110, 60)
        tr.launch(t + 120, [("kernel", "sm80_xmma_gemm_f32f32", t + 130, 200.0 + s)])
        tr.op("record_param_comms", t + 300, 50)
        tr.launch(t + 310, [("kernel", "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
                             t + 400, 3000.0)])
        tr.op("autograd::engine::evaluate_function: MmBackward0", t + 3500, 300)
        tr.op("aten::mm", t + 3510, 200)
        tr.launch(t + 3520, [("kernel", "sm80_xmma_gemm_f32f32", t + 3600, 400.0)])
        tr.op("Optimizer.step#SGD.step", t + 4000, 500)
        tr.op("aten::_foreach_add_", t + 4010, 100)
        tr.launch(t + 4020, [("kernel", "multi_tensor_apply_kernel", t + 4100, 50.0)])
        tr.op("aten::zero_", t + 5000, 30)  # after the last stage range: ``other``
        tr.launch(t + 5005, [("gpu_memset", "Memset (Device)", t + 5010, 3.0)])


def tree_device_us(p: Profile) -> float:
    """Device time in the tree over every step (the launching ops' device_time_s, per step x steps)."""
    steps = p.to_dict()["import"]["files"][0]["steps"]
    return sum(n.extra.get("device_time_s", 0.0) for n in p.nodes() if n.level == "op") * steps * 1e6


def test_every_launched_device_event_reaches_the_tree_across_steps(tmp_path: Path) -> None:
    """Regression: the fold's op-children cache and its merge forwarding were keyed by ``id()`` of per-step
    nodes that are merged and then freed; a later node reusing the id got the dead node's (merged) children,
    so what was added to them, ops and kernels, never reached the tree (TorchRec rank folders lost 3-6% of
    their device time, a 3 ms all-to-all among it)."""
    tr = KinetoTrace()
    training_steps(tr)
    p = import_trace(tr.write(tmp_path / "rank0.json"))
    assert tree_device_us(p) == pytest.approx(sum(tr.device_us.values()), rel=1e-9)
    calls = {}
    for n in p.nodes():
        if n.level == "op":
            calls[n.name] = calls.get(n.name, 0) + n.calls
    assert calls["aten::to"] == 1 and calls["aten::zero_"] == 1 and calls["record_param_comms"] == 1


def _files(p: Profile) -> list[dict[str, Any]]:
    """``import.files`` of the profile as saved, checked against the committed schema and the typed models."""
    d = json.loads(json.dumps(p.to_dict(), allow_nan=False))
    jsonschema.Draft202012Validator(committed_json_schema()).validate(d)
    ProfileModel.model_validate(d)
    return d["import"]["files"]


def _device_accounted(p: Profile, raw: dict[str, float]) -> dict[str, Any]:
    """The import's device record: its raw sums are the events written, every microsecond of them is in the
    tree, outside every step or without a launching call, and the tree holds exactly its share."""
    dev = _files(p)[0]["device"]
    steps = _files(p)[0]["steps"]
    for k in ("kernel", "memcpy", "memset", "collective"):
        assert dev["raw_s"][k] == pytest.approx(raw.get(k, 0.0) * 1e-6, rel=1e-9, abs=1e-12), k
        parts = dev["in_tree_s"][k] + dev["outside_steps_s"][k] + dev["unlaunched_s"][k]
        assert parts == pytest.approx(dev["raw_s"][k], rel=1e-9, abs=1e-12), k
    kernel_nodes = sum(n.time_s for n in p.nodes() if n.level == "kernel") * steps
    assert kernel_nodes == pytest.approx(sum(dev["in_tree_s"].values()), rel=1e-9)
    assert tree_device_us(p) * 1e-6 == pytest.approx(sum(dev["in_tree_s"].values()), rel=1e-9)
    return dev


@pytest.mark.parametrize("old,rocm", [(True, False), (False, True), (False, False)])
def test_category_spellings_and_rocm_names_attach_every_device_event(tmp_path: Path, old: bool, rocm: bool) -> None:
    """PyTorch <= 1.9 writes ``Operator``/``Runtime``/``Kernel``/``Memcpy``/``Memset`` (0 of 9,096 kernels
    attached before, silently); ROCm writes hipLaunchKernel / hipMemcpyAsync under ``cuda_runtime``."""
    tr = KinetoTrace(old=old, rocm=rocm)
    training_steps(tr, steps=3)
    p = import_trace(tr.write(tmp_path / "t.json"))
    dev = _device_accounted(p, tr.device_us)
    assert sum(dev["in_tree_s"].values()) == pytest.approx(sum(tr.device_us.values()) * 1e-6)
    f = _files(p)[0]
    assert f["notes"] == [] and f["kernels"] == 3 * 6
    assert ("Kernel" in f["categories"]) == old and ("kernel" in f["categories"]) == (not old)
    launches = {n.name for n in p.nodes() if n.level == "op" and n.name.startswith(("cuda", "hip"))}
    assert launches and all(n.startswith("hip" if rocm else "cuda") for n in launches)


def test_flows_external_ids_graphs_and_device_ranges(tmp_path: Path) -> None:
    """A kernel whose args lack the correlation id finds it through its ``ac2g`` flow; one whose runtime call
    was not recorded joins its op by ``External id``; a CUDA graph launch's kernels share its correlation;
    ``gpu_user_annotation`` ranges are device-timeline ranges, not device events without a launching op."""
    tr = KinetoTrace()
    tr.range("ProfilerStep#0", 0, 10_000)
    tr.op("aten::mm", 100, 50)
    corr = tr.launch(110, [("kernel", "gemm_flow", 200, 100.0)])
    del next(e for e in tr.events if e["name"] == "gemm_flow")["args"]["correlation"]
    tr.op("aten::addmm", 1000, 50)
    tr.launch(1010, [("kernel", "gemm_ext", 1100, 40.0)], flow=False)
    tr.events = [e for e in tr.events if e["name"] != "cudaLaunchKernel" or e["ts"] != 1010]  # not recorded
    tr.op("CUDAGraphs::replay", 2000, 100)
    tr.launch(2010, [("kernel", f"graph_k{i}", 2100 + 30 * i, 20.0) for i in range(3)], api="cudaGraphLaunch")
    tr.x("gpu_user_annotation", "## forward ##", 150, 3000, tid=STREAM, pid=GPU_PID, **{"External id": 3})
    p = import_trace(tr.write(tmp_path / "t.json"))
    dev = _device_accounted(p, tr.device_us)
    f = _files(p)[0]
    assert not any("no launching op" in n for n in f["notes"]), f["notes"]
    assert dev["unlaunched_s"]["kernel"] == 0 and dev["correlation_from_flow"] == 1 and dev["linked_by_external_id"] == 1
    assert dev["ranges_s"] == {"gpu_user_annotation": pytest.approx(3000e-6)}
    by_name = {n.name: n for n in p.nodes() if n.level == "op"}
    assert by_name["aten::mm"].extra["device_time_s"] == pytest.approx(100e-6) and corr > 0
    assert by_name["aten::addmm"].child("gemm_ext") is not None
    replay = by_name["CUDAGraphs::replay"]  # the op around the cudaGraphLaunch holds the graph's kernels
    assert {k.name for k in replay.children if k.level == "kernel"} == {"graph_k0", "graph_k1", "graph_k2"}
    assert replay.extra["device_time_s"] == pytest.approx(60e-6) and replay.child("cudaGraphLaunch") is not None


def test_device_time_is_never_scaled_by_the_host_correction(tmp_path: Path) -> None:
    """The overhead correction shrinks host times; kernel nodes keep the device's recorded time (they were
    multiplied by their stage's host factor: 0-88% of the recorded GPU time, 0 on an NCCL trace)."""
    tr = KinetoTrace()
    training_steps(tr, steps=4)
    for s in range(4):  # wrapper ops (40 us exclusive): a large per-event estimate, stage factors well below 1
        tr.op("aten::linear", 10_000.0 * s + 6000, 50)
        tr.op("aten::t", 10_000.0 * s + 6005, 10)
    p = import_trace(tr.write(tmp_path / "t.json"))
    assert p.overhead["per_event_s"] >= 40e-6
    factors = [n.extra["apportion_factor"] for n in p.nodes() if "apportion_factor" in n.extra]
    assert min(factors) < 0.5
    _device_accounted(p, tr.device_us)
    nccl = [n for n in p.nodes() if n.level == "kernel" and n.name.startswith("ncclDevKernel")]
    assert len(nccl) == 1 and nccl[0].time_s == pytest.approx(3000e-6) and nccl[0].extra["device_kind"] == "collective"
    stage_dev = sum(c.extra.get("device_time_s", 0.0) for c in p.root.children)
    assert p.root.extra["device_time_s"] == pytest.approx(stage_dev)
    assert stage_dev * 4 == pytest.approx(sum(tr.device_us.values()) * 1e-6)


def test_gpu_busy_idle_and_overlap_per_step(tmp_path: Path) -> None:
    """Per step: busy is the union of device intervals clipped to the span (two streams not counted twice),
    idle the rest, overlap the time compute and communication kernels ran together."""
    tr = KinetoTrace()
    tr.range("ProfilerStep#0", 0, 1000)
    tr.op("aten::mm", 10, 20)
    tr.launch(12, [("kernel", "gemm", 100, 300.0)])  # 100..400
    tr.op("c10d::allreduce_", 40, 20)
    tr.launch(42, [("kernel", "ncclDevKernel_AllReduce", 300, 200.0)])  # 300..500: 100 us of overlap
    tr.op("aten::copy_", 60, 20)
    tr.launch(62, [("gpu_memcpy", "Memcpy DtoH", 900, 200.0)])  # 900..1100: 100 us inside the step
    tr.range("ProfilerStep#1", 1000, 1000)
    tr.op("aten::mm", 1010, 20)
    tr.launch(1012, [("kernel", "gemm", 1500, 100.0)])
    p = import_trace(tr.write(tmp_path / "t.json"))
    s0, s1 = _files(p)[0]["device"]["steps"]
    assert s0["busy_s"] == pytest.approx(500e-6) and s0["idle_s"] == pytest.approx(500e-6)
    assert s0["compute_s"] == pytest.approx(300e-6) and s0["communication_s"] == pytest.approx(200e-6)
    assert s0["overlap_s"] == pytest.approx(100e-6)
    assert s1["busy_s"] == pytest.approx(200e-6) and s1["overlap_s"] == 0  # the copy's tail, and a gemm


def test_unknown_categories_and_impossible_times_are_named(tmp_path: Path) -> None:
    tr = KinetoTrace()
    training_steps(tr, steps=2)
    tr.x("my_tool", "custom_range", 500, 10)
    tr.op("aten::neg", 600, -5)
    tr.op("aten::huge", 700, 1e300)
    tr.launch(800, [("kernel", "bad_kernel", 900, -1.0)])
    p = import_trace(tr.write(tmp_path / "t.json"))
    f = _files(p)[0]
    notes = " | ".join(f["notes"])
    assert f["left_out"] == {"device event duration: negative": 1, "host event duration: beyond any trace's span": 1,
                             "host event duration: negative": 1}
    assert "'my_tool' (1)" in notes
    assert "host event duration: negative (1)" in notes and "host event duration: beyond any trace's span (1)" in notes
    assert "device event duration: negative (1)" in notes
    assert not any(n.name in ("aten::neg", "aten::huge", "bad_kernel") for n in p.nodes())
    assert all(n.time_s >= 0 for n in p.nodes())


# -- hostile and damaged traces (issue 29's trace items) -----------------------------------------------------
def _cli_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    from recstack.cli import main

    rc = main(["import", *argv])
    return rc, capsys.readouterr().err.strip().splitlines()


def _small_trace(tmp_path: Path) -> bytes:
    tr = KinetoTrace()
    training_steps(tr, steps=6)
    return tr.write(tmp_path / "whole.json").read_bytes()


def test_the_same_truncation_gives_the_same_code_plain_or_gzip(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A cut plain file, a gzip of a cut file and a cut gzip stream are one fault: exit 4 with what was
    complete (a cut gzip stream exited 2: ``GzipFile.read`` raised and lost the block it had decompressed)."""
    import gzip

    data = _small_trace(tmp_path)
    cut = data[: len(data) * 7 // 10]
    gz = gzip.compress(data)
    files = {"plain.json": cut, "gzip-of-cut.json.gz": gzip.compress(cut), "cut-gzip.json.gz": gz[: len(gz) * 7 // 10]}
    events = {}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
        out = tmp_path / f"{name}.profile.json"
        rc, err = _cli_run(capsys, str(tmp_path / name), "-o", str(out))
        assert rc == 4, (name, err)
        d = json.loads(out.read_text())
        assert d["import"]["files"][0]["truncated"] is True
        events[name] = d["import"]["files"][0]["events"]
    assert events["plain.json"] == events["gzip-of-cut.json.gz"] and 0 < events["cut-gzip.json.gz"]


def test_a_partial_import_never_replaces_a_complete_profile_unless_asked(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = _small_trace(tmp_path)
    (tmp_path / "cut.json").write_bytes(data[: len(data) // 2])
    out = tmp_path / "p.json"
    assert _cli_run(capsys, str(tmp_path / "whole.json"), "-o", str(out))[0] == 0
    complete = out.read_bytes()
    rc, err = _cli_run(capsys, str(tmp_path / "cut.json"), "-o", str(out))
    assert rc == 4 and out.read_bytes() == complete and "is kept" in err[-1]
    assert json.loads((tmp_path / "p.partial.json").read_text())["import"]["files"][0]["truncated"] is True
    assert _cli_run(capsys, str(tmp_path / "cut.json"), "-o", str(out), "--overwrite-partial")[0] == 4
    assert json.loads(out.read_text())["import"]["files"][0]["truncated"] is True


def test_nan_tokens_are_non_finite_times_not_a_truncation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Python's json writes ``NaN`` / ``Infinity`` (not JSON): read as non-finite, counted, left out; the
    trace is complete (it was read as truncated, exit 4, and the partial profile replaced the -o file)."""
    text = _small_trace(tmp_path).decode()
    text = text.replace('"dur": 3000.0', '"dur": NaN', 1).replace('"dur": 50', '"dur": -Infinity', 1)
    text = text.replace('"dur": 200.0', '"dur":Infinity', 1)
    path = tmp_path / "nan.json"
    path.write_text(text)
    out = tmp_path / "p.json"
    rc, err = _cli_run(capsys, str(path), "-o", str(out))
    assert rc == 0, err
    f = json.loads(out.read_text())["import"]["files"][0]
    assert f["truncated"] is False
    note = next(n for n in f["notes"] if "not a time" in n)
    assert "device event duration: non-finite (2)" in note and "host event duration: non-finite (1)" in note


@pytest.mark.parametrize("where", ["args", "header"])
def test_a_20000_deep_value_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    """A value nested 20,000 deep raised RecursionError from the decoder: exit 70, 'please report it'."""
    text = _small_trace(tmp_path).decode()
    deep = "[" * 20_000 + "]" * 20_000
    if where == "args":
        text = text.replace('"args": {', '"args": {"deep": ' + deep + ", ", 1)
    else:
        text = text.replace('"schemaVersion": 1', f'"schemaVersion": 1, "deviceProperties": {deep}', 1)
    path = tmp_path / "deep.json"
    path.write_text(text)
    rc, err = _cli_run(capsys, str(path), "-o", str(tmp_path / "p.json"))
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: TRACE:") and "nested deeper" in err[0], err
    assert not (tmp_path / "p.json").exists()


def test_a_gzip_bomb_stops_at_the_event_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzip of whitespace inside one event grew the read window without bound (gigabytes resident);
    the reader now stops at decode.MAX_EVENT bytes with no event boundary (made small here: 1 MiB)."""
    import zlib

    from recstack.traceimport import decode

    monkeypatch.setattr(decode, "MAX_EVENT", 1 << 20)
    monkeypatch.setattr(decode, "BLOCK", 1 << 18)
    monkeypatch.setattr(decode, "CHUNK", 1 << 17)
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [z.compress(b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a"')]
    parts += [z.compress(b" " * (1 << 20)) for _ in range(16)]  # 16 MiB of whitespace, 16x the bound
    parts += [z.compress(b"}]}"), z.flush()]
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(b"".join(parts))
    rc, err = _cli_run(capsys, str(path), "-o", str(tmp_path / "p.json"))
    assert rc == 2 and len(err) == 1 and "without an event boundary" in err[0], err


# -- threads and the overhead correction on GPU traces --------------------------------------------------------
def _forward_backward_step(tr: KinetoTrace, s: int, period: float = 10_000.0) -> None:
    """One training step the CUDA way: forward on the main thread (module ranges), backward on autograd's
    thread (its evaluate_function ranges, linked by sequence number), optimizer back on the main thread."""
    t = period * s
    tr.range(f"ProfilerStep#{s}", t, 9000)
    tr.range("recstack.module::|Net", t + 100, 2000)
    tr.range("recstack.module::mlp|Linear", t + 200, 1800)
    tr.op("aten::linear", t + 300, 1500, **{"Sequence number": 7 + s})
    tr.op("aten::mse_loss", t + 2200, 100)  # the loss, outside every stage: backward's caller code
    for i in range(3):  # 3 x 1500 us of backward, 100 us apart, on autograd's thread
        tr.op("autograd::engine::evaluate_function: AddmmBackward0", t + 2500 + 1600 * i, 1500, tid=AUTOGRAD,
              **{"Sequence number": 7 + s, "Fwd thread id": 1})
    tr.op("Optimizer.step#SGD.step", t + 7400, 1000)


def test_backward_on_autograds_thread_folds_into_its_own_stage(tmp_path: Path) -> None:
    """Swept thread by thread, the main thread's optimizer took the backward's time as its caller code
    (the gap since the forward ended), and the backward on autograd's thread found no gap left."""
    tr = KinetoTrace()
    for s in range(3):
        _forward_backward_step(tr, s)
    p = import_trace(tr.write(tmp_path / "t.json"), correct_overhead=False)
    st = {c.name: c for c in p.root.children}
    assert st["dense"].time_s == pytest.approx(1800e-6 + 200e-6)  # its range + caller code since the step began
    assert st["backward"].time_s == pytest.approx(3 * 1500e-6 + 2 * 100e-6 + 500e-6)  # + the loss after dense
    caller = next(c for c in st["optimizer"].children if c.extra.get("kind") == "caller")
    assert caller.time_s == pytest.approx(7400e-6 - 7200e-6)  # since the last backward range ended
    assert st["optimizer"].time_s == pytest.approx(1000e-6 + 200e-6)
    assert sum(c.time_s for c in p.root.children) == pytest.approx(p.root.time_s) == pytest.approx(9000e-6)
    assert {n.name for n in st["backward"].walk()} >= {"aten::mse_loss",
                                                      "autograd::engine::evaluate_function: AddmmBackward0"}
    # Backward split per forward stage: the sequence numbers link each backward range to dense's linear.
    of_dense = st["backward"].child("[backward of dense]")
    assert of_dense is not None and of_dense.extra["kind"] == "backward_of" and of_dense.calls == 3
    assert of_dense.time_s == pytest.approx(3 * 1500e-6)


def test_the_correction_never_removes_waits_or_a_busy_devices_time(tmp_path: Path) -> None:
    """On a GPU trace the host correction is bounded by what the profiler can have added: a stage keeps its
    synchronising waits, and a step the device kept busy keeps the device's busy time (a real A100 backward
    lost 97% of its own time to 3.1 us x 4,200 events per step)."""
    tr = KinetoTrace()
    for s in range(3):
        t = 20_000.0 * s
        tr.range(f"ProfilerStep#{s}", t, 19_000)
        tr.op("Optimizer.step#SGD.step", t + 100, 18_800)
        for i in range(100):  # wrapper ops: a large per-event estimate (103 us) x 200 events > the stage
            tr.op("aten::t", t + 200 + 110 * i, 105)
            tr.op("aten::transpose", t + 201 + 110 * i, 2)
        tr.op("aten::_foreach_add_", t + 11_300, 200)
        tr.launch(t + 11_310, [("kernel", "multi_tensor_apply_kernel", t + 11_400, 7000.0)])  # the device: 7 ms
        tr.x("cuda_runtime", "cudaStreamSynchronize", t + 11_600, 6900, correlation=99_000 + s)
    raw = import_trace(tr.write(tmp_path / "t.json"), correct_overhead=False)
    p = import_trace(tmp_path / "t.json")
    opt, raw_opt = p.stage("optimizer"), raw.stage("optimizer")
    assert opt.time_s >= 6900e-6  # the wait stays
    assert p.overhead["per_event_s"] * opt.extra["overhead_events_per_step"] > raw_opt.time_s  # unbounded: < 0
    assert opt.time_s == pytest.approx(raw_opt.time_s - opt.extra["overhead_removed_s"])
    assert opt.extra["overhead_bound"] in ("waits", "GPU busy") and opt.extra["overhead_removed_s"] > 0
    busy = _files(p)[0]["device"]["steps"][0]["busy_s"]
    assert p.root.time_s >= busy - 1e-12
    assert "overhead_removed_s" not in raw_opt.extra
