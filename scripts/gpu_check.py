"""The CUDA paths of recstack, end to end, one ``PASS|FAIL <path>: <figures>`` line each.

Run by ``scripts/gpu-check.sh`` (which finds or sets up Python and skips without
a GPU). Also importable as a model factory for ``recstack profile
gpu_check:zoo_on_cuda``: a zoo model (``GPU_CHECK_MODEL``, ``GPU_CHECK_SCALE``,
``GPU_CHECK_MODE``; torch backend) moved to the GPU with batches made on the
host and copied once, before profiling (recstack's zoo builds on the CPU; this
factory is the device path until RunConfig gets a device option).

Paths:

* ``profile-cuda``: ``recstack profile`` of a zoo model on cuda, kernels under ops;
* ``profile-cuda-train``: the same in train mode (backward and optimizer kernels);
* ``profile-cuda-bf16``: dense layers in bf16 on the GPU;
* ``gpu-roofs``: the GPU figures of ``recstack machine`` (HBM copy, GEMM per dtype);
* ``gpu-gather``: gather on device (the machine file's GPU gather grid);
* ``roofline-cuda``: ``recstack roofline`` of the cuda profile against those GPU roofs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS: list[bool] = []


# -- the factory ------------------------------------------------------------------
def _to_device(batch: Any, device: str) -> Any:
    from recstack.workload.batch import RawBatch, SparseInput

    return RawBatch(
        dense=None if batch.dense is None else batch.dense.to(device),
        sparse={k: SparseInput(v.values.to(device), v.lengths.to(device)) for k, v in batch.sparse.items()},
        labels=None if batch.labels is None else batch.labels.to(device),
    )


def zoo_on_cuda(batch_size: int, seed: int) -> tuple[Any, Callable[[int], Any]]:
    """``recstack profile`` factory: a zoo model and its batches on ``cuda``."""
    from recstack.workload import load_workload
    from recstack.zoo import BuildOptions, build_model

    mode = os.environ.get("GPU_CHECK_MODE", "inference")
    opts = BuildOptions(backend="torch", mode=mode, seed=seed, batch_size=batch_size)
    model = build_model(
        os.environ.get("GPU_CHECK_MODEL", "rmc1"), scale=float(os.environ.get("GPU_CHECK_SCALE", "0.05")), options=opts
    )
    bound = load_workload(os.environ.get("GPU_CHECK_WORKLOAD", "production")).bind(
        model.features(), model.num_dense, model.num_tasks
    )
    device = os.environ.get("GPU_CHECK_DEVICE", "cuda")  # cpu: to try this factory on a host without a GPU
    batches = [_to_device(bound.batch(batch_size, i), device) for i in range(4)]
    return model.to(device), lambda i: batches[i % len(batches)]


# -- helpers ----------------------------------------------------------------------
def report(path: str, ok: bool, figures: str) -> None:
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {path}: {figures}", flush=True)


def _walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for c in node.get("children", []):
        yield from _walk(c)


def _cli(args: list[str], env: dict[str, str] | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO / "scripts"), full.get("PYTHONPATH", "")])
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "recstack.cli", "--quiet", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
        cwd=REPO,
    )


def _tail(proc: subprocess.CompletedProcess) -> str:
    lines = (proc.stderr or proc.stdout or "").strip().splitlines()
    return f"exit {proc.returncode}: " + (lines[-1] if lines else "no output")


def _ms(s: float | None) -> str:
    return "n/a" if s is None else f"{s * 1e3:.3f} ms"


def _si(v: float, unit: str) -> str:
    for div, p in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(v) >= div:
            return f"{v / div:.1f} {p}{unit}"
    return f"{v:.3g} {unit}"


# -- the paths --------------------------------------------------------------------
def check_profile(name: str, out: Path, extra: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    path = out / f"{name}.json"
    args = ["profile", "gpu_check:zoo_on_cuda", "--batch-size", "4096", "--iters", "10", "--warmup", "3"]
    proc = _cli(args + ["--op-iters", "2", "--machine", "none", "-o", str(path), *extra], env)
    if proc.returncode != 0 or not path.exists():
        report(name, False, _tail(proc))
        return None
    prof = json.loads(path.read_text())
    nodes = list(_walk(prof["root"]))
    kernels = [n for n in nodes if n.get("level") == "kernel"]
    device_s = sum(float(n.get("device_time_s") or 0) for n in nodes if n.get("level") == "op")
    problems = []
    if prof["run"].get("device") != "cuda":
        problems.append(f"run.device is {prof['run'].get('device')!r}")
    if not kernels:
        problems.append("no kernel nodes under ops")
    if device_s <= 0:
        problems.append("no device time on ops")
    top = max(kernels, key=lambda n: n.get("time_s", 0), default={"name": "-"})
    figures = (
        f"step {_ms(prof['root'].get('time_s'))}, {len(kernels)} kernel nodes, device time {_ms(device_s)}/step, "
        f"top kernel {str(top['name'])[:60]}"
    )
    if name.endswith("train"):
        stages = {n["name"] for n in prof["root"]["children"]}
        if "backward" not in stages:
            problems.append("no backward stage")
        bw = [n for n in nodes if n.get("level") == "kernel" and n.get("stage") == "backward"]
        figures += f", {len(bw)} backward kernel nodes"
    if name.endswith("bf16"):
        if prof["run"].get("dtype") != "bf16":
            problems.append(f"run.dtype is {prof['run'].get('dtype')!r}")
        bf = [n for n in kernels if "bf16" in n["name"].lower() or "bfloat16" in n["name"].lower()]
        figures += f", {len(bf)} bf16 kernel nodes"
    report(name, not problems, "; ".join(problems) + (" | " if problems else "") + figures)
    return prof


def check_compile_inductor(out: Path) -> dict[str, Any] | None:
    """``recstack compile`` with inductor on cuda (Triton kernels): regional dense/head, numerics, graphs."""
    cfg = out / "compile.yaml"
    cfg.write_text("defaults: {backend: inductor}\nrules:\n  - {match: dense_arch}\n  - {match: over_arch}\n")
    args = ["compile", "gpu_check:zoo_on_cuda", "--compile", str(cfg), "--batch-size", "4096", "--iters", "6",
            "--warmup", "2", "--machine", "none", "--batch-sizes", "1,512", "--no-compile-time", "--json"]
    proc = _cli(args, timeout=300)
    if proc.returncode != 0:
        report("compile-inductor-cuda", False, _tail(proc))
        return None
    r = json.loads(proc.stdout)
    problems = []
    if not r["graphs"]:
        problems.append("no graphs compiled")
    if not r["numerics"]["ok"]:
        problems.append(f"numerics: max abs err {r['numerics']['max_abs_err']:.3g}")
    if r["fallbacks"]:
        problems.append("silent fallback")
    dense = r["stages"].get("dense") or {}
    figures = (f"{len(r['graphs'])} graphs, {len(r['graph_breaks'])} breaks, {len(r['recompiles'])} recompiles, "
               f"dense {_ms(dense.get('eager_s'))} eager vs {_ms(dense.get('compiled_s'))} compiled, "
               f"run speedup {r['stages']['run'].get('speedup') or 0:.2f}x (measured)")
    report("compile-inductor-cuda", not problems, "; ".join(problems) + (" | " if problems else "") + figures)
    return r


def check_gpu_roofs(out: Path) -> Path | None:
    """The GPU figures of the machine file (quick GPU sizes) beside tiny CPU figures, written for roofline."""
    from recstack.hardware.gpu_bench import measure_gpu
    from recstack.hardware.machine import measure_machine, save_machine

    t0 = time.perf_counter()
    machine = measure_machine(tiny=True)
    gpu = measure_gpu("quick", lambda _m: None)
    machine["gpu"] = gpu
    secs = time.perf_counter() - t0
    hbm = gpu["hbm_bandwidth"]["copy"]["max"]
    gemm = {k: v["max"] for k, v in gpu["gemm_flops"].items()}
    ok = all(math.isfinite(v) and v > 0 for v in [hbm, *gemm.values()]) and gemm["bf16"] > gemm["fp32"]
    report(
        "gpu-roofs",
        ok,
        f"{gpu['name']}: HBM copy {_si(hbm, 'B/s')}, GEMM "
        + ", ".join(f"{k} {_si(v, 'FLOP/s')}" for k, v in gemm.items())
        + f" ({secs:.0f} s)",
    )
    grid = gpu["gather_bandwidth"]["grid"]
    best = {d: max((c["bandwidth"]["max"] for c in grid if c["dist"] == d), default=0.0) for d in ("uniform", "zipf")}
    report(
        "gpu-gather",
        bool(grid) and all(v > 0 for v in best.values()),
        f"{len(grid)} cells, best uniform {_si(best['uniform'], 'B/s')}, zipf {_si(best['zipf'], 'B/s')}",
    )
    path = out / "machine-gpu.json"
    save_machine(machine, path)
    return path


def check_roofline(out: Path, profile: Path, machine: Path) -> None:
    chart = out / "roofline.png"
    classified = out / "classified.json"
    try:
        import matplotlib  # noqa: F401  (the chart needs it; the classification does not)
    except ImportError:
        from recstack.analysis.roofline import classify
        from recstack.hardware.machine import load_machine
        from recstack.tree import Profile

        prof_obj = Profile.load(profile)
        classify(prof_obj, load_machine(machine))
        prof_obj.save(classified)
        print("gpu-check: matplotlib is missing: roofline classified without the chart", flush=True)
    else:
        args = ["roofline", str(profile), "--machine", str(machine), "-o", str(chart), "--save-profile", str(classified)]
        proc = _cli(args)
        if proc.returncode != 0 or not classified.exists():
            report("roofline-cuda", False, _tail(proc))
            return
    prof = json.loads(classified.read_text())
    stages = [n for n in prof["root"]["children"] if n.get("bound")]
    roofs = prof.get("machine") or {}
    fracs = [(n.get("roofline") or {}).get("ceiling_fraction") for n in stages]
    over = [f for f, n in zip(fracs, stages, strict=True) if f and f > 1.05 and not n["roofline"].get("roof_suspect")]
    report(
        "roofline-cuda",
        bool(stages) and not over and roofs.get("device") == "cuda",
        f"{len(stages)} stages classified ("
        + ", ".join(f"{n['name']} {n['bound']}" for n in stages[:5])
        + f") against {roofs.get('peak_label')} on {roofs.get('device')}, {len(over)} fractions above 105% unmarked",
    )


def check_serve_split(out: Path) -> None:
    """``recstack serve`` with a CPU/GPU split: queries above 300 candidates go to a cuda worker."""
    proc = _cli(["serve", "rmc1", "--scale", "0.05", "--qps", "40", "--duration", "8", "--workers", "2",
                 "--threads", "1", "--gpu-threshold", "300", "--json", "-o", str(out / "serve.json")], timeout=300)
    if proc.returncode != 0:
        report("serve-split-cuda", False, _tail(proc))
        return
    r = json.loads(proc.stdout)
    accel = [w for w in r["workers"] if w["class"] == "accel"]
    served = sum(w["served_batches"] for w in accel)
    ok = bool(accel) and served > 0 and r["failed"] == 0 and accel[0].get("info", {}).get("device") == "cuda"
    report("serve-split-cuda", ok, f"{served} batches on the GPU worker, p99 {_ms(r['latency_s']['p99'])}, "
           f"{r['completed']}/{r['requests']} completed")


def check_memory_pass(out: Path) -> None:
    """``recstack memory --measure`` on cuda: the memory pass (``profile --memory``'s) over the CUDA allocator's
    events, each stage's peak beside the prediction, and the step's torch.cuda.memory_stats peaks."""
    proc = _cli(["memory", "rmc1", "--scale", "0.01", "--batch-size", "1024", "--mode", "train", "--device", "cuda",
                 "--limit", "64GiB", "--measure", "--json", "-o", str(out / "memory.json")], timeout=300)
    if proc.returncode != 0:
        report("memory-pass-cuda", False, _tail(proc))
        return
    doc = json.loads(proc.stdout)
    measured = {s["stage"]: s.get("measured_dynamic_bytes") for s in doc["stages"]}
    ok = doc["provenance"] == "predicted and measured" and all((v or 0) > 0 for v in measured.values())
    report("memory-pass-cuda", ok, ", ".join(f"{k} {_si(float(v or 0), 'B')} (predicted "
                                             f"{_si(float(s['dynamic_bytes']), 'B')})"
                                             for s in doc["stages"] for k, v in [(s["stage"], measured[s["stage"]])]))


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("FAIL setup: torch.cuda.is_available() is False (torch " + torch.__version__ + ")")
        return 1
    print(f"gpu-check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    with tempfile.TemporaryDirectory(prefix="recstack-gpu-check-") as tmp:
        out = Path(tmp)
        os.environ["RECSTACK_CACHE_DIR"] = str(out / "cache")
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("profile-cuda", lambda: check_profile("profile-cuda", out, [], {})),
            ("profile-cuda-train", lambda: check_profile("profile-cuda-train", out, ["--mode", "train"],
                                                         {"GPU_CHECK_MODE": "train"})),
            ("profile-cuda-bf16", lambda: check_profile("profile-cuda-bf16", out, ["--dtype", "bf16"], {})),
            ("gpu-roofs", lambda: check_gpu_roofs(out)),
            ("serve-split-cuda", lambda: check_serve_split(out)),
            ("memory-pass-cuda", lambda: check_memory_pass(out)),
            ("compile-inductor-cuda", lambda: check_compile_inductor(out)),
        ]
        done: dict[str, Any] = {}
        for name, fn in steps:
            try:
                done[name] = fn()
            except Exception as exc:  # one failing path must not hide the others
                report(name, False, f"{type(exc).__name__}: {exc}")
                traceback.print_exc(file=sys.stderr)
        if done.get("profile-cuda") is not None and done.get("gpu-roofs") is not None:
            try:
                check_roofline(out, out / "profile-cuda.json", done["gpu-roofs"])
            except Exception as exc:
                report("roofline-cuda", False, f"{type(exc).__name__}: {exc}")
        else:
            report("roofline-cuda", False, "skipped: needs the cuda profile and the GPU roofs")
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
