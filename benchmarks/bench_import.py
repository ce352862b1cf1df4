"""``recstack import`` against HolisticTraceAnalysis's parse, on a trace this script records.

1. Records a CPU trace: ``--steps`` profiler steps (a torch.profiler schedule,
   so the steps are ProfilerStep ranges), each running an 8-table DLRM's
   (zoo ``rmc1``) forward ``--forwards`` times at batch 32 with
   ``record_shapes``; ``--forwards auto`` aims at ``--events`` events. The same
   events split into ``--many-steps`` ProfilerStep ranges (equal events, more
   steps) are written beside it: the step ranges replaced by evenly spaced ones.
2. Optionally synthesises larger traces (``--scale 3,10``): copies of the
   recorded events shifted in time, steps renumbered, as text (nothing parsed).
3. Times, each in a fresh child process, wall time and peak RSS
   (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` of a wrapper around the child):
   ``recstack import TRACE -o ...`` (the whole CLI, torch import included, and
   the in-process ``import_trace`` time it prints), and HTA's
   ``TraceAnalysis(trace_dir=...)`` parse, from ``--hta-python`` (a separate venv:
   ``python3.11 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install
   HolisticTraceAnalysis==0.5.* pandas==2.3.*``), never a dependency of recstack.

    python benchmarks/bench_import.py --out /tmp/bench-import [--events 1000000] [--scale 3,10]
        [--hta-python /tmp/hta-venv/bin/python] [--skip-record]

Prints one table row per (trace, tool); times are of this host as it was (say how loaded).

    python benchmarks/bench_import.py --phases TRACE

times each phase of one import in one process (decode, collect in one pass and in parts, fold, the whole call).

    python benchmarks/bench_import.py --ab /path/to/old/src [--ab-trace TRACE --repeats 3]

runs the old tree's ``recstack import`` and this one's alternately on one trace (old/new ratio per pair).

    python benchmarks/bench_import.py --real /tmp/corpus2 /tmp/i27big/mtia_rank_0.json.gz \
        --hta-python /tmp/hta-venv/bin/python [--min-events 100000 --real-repeats 3]

the speed table on real traces (issue 27): every trace file (``.json``/``.json.gz``) under the paths given
with at least ``--min-events`` events (``"ph"`` keys in the decompressed text); per trace, ``--real-repeats``
rounds after one unmeasured warm-up, recstack's CLI and HTA's parse alternating, each a fresh process
(bytecode cached, in ``--out``/pycache, as an installed package has it): median wall s (min-max), CPU s of
every process (user+sys, children included), peak RSS of the largest process, and HTA/recstack ratios
(goal: wall >= 10x, >= 25x at 1M events, RSS <= 0.3x). Under 5 minutes for the five HolisticTraceAnalysis
test traces of 100k+ events: ``/tmp/corpus2`` (its tests/data, MIT) and ``mtia_rank_0.json.gz`` from the
same repository (``git --git-dir=/work/.mirror/facebookresearch+HolisticTraceAnalysis/repo show
HEAD:tests/data/mtia_trace_single_rank/mtia_rank_0.json.gz > /tmp/i27big/mtia_rank_0.json.gz``). The
1M-event trace this script records (``--traces few --tools recstack`` records it): ``--real
/tmp/bench-import/few/trace.json --real-repeats 1`` (HTA takes about a minute per run there).

    python benchmarks/bench_import.py --acceptance rmc1 [--acc-scale 0.05 --acc-batch 256]
        [--acc-threads 1 --acc-rounds 3]

in each of ``--acc-rounds`` rounds profiles ``rmc1`` live (``recstack.profile_zoo``), then records it under
``recstack.annotate`` and torch.profiler and imports the trace (raw and with the overhead correction);
prints each stage's median share over the rounds side by side, and the largest difference.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

WRAP = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
try:
    r = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1]))
except subprocess.TimeoutExpired:
    r = subprocess.CompletedProcess(sys.argv[2:], "timeout", "", f"not finished after {sys.argv[1]} s")
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
peak, cpu = ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime
print(json.dumps({"rc": r.returncode, "wall_s": wall, "cpu_s": cpu, "peak_rss_bytes": peak, "stdout": r.stdout[-2000:],
                  "stderr": r.stderr[-2000:]}))
"""

HTA = r"""
import sys, time
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
n = sum(len(df) for df in a.t.traces.values())
print(f"hta parse {time.perf_counter() - t:.3f} s, {n} events in its frames")
"""

INPROC = r"""
import sys, time
t = time.perf_counter()
from recstack.traceimport import import_trace
t1 = time.perf_counter()
p = import_trace(sys.argv[1])
t2 = time.perf_counter()
p.save(sys.argv[2])
print(f"import_trace {t2 - t1:.3f} s (module import {t1 - t:.3f} s, save {time.perf_counter() - t2:.3f} s)")
"""


def record(path: Path, steps: int, forwards: int, batch: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from recstack.workload import bind, load_workload
    from recstack.zoo import BuildOptions, build_model

    net = build_model("rmc1", scale=0.001, options=BuildOptions(mode="inference", batch_size=batch))
    bound = bind(load_workload("uniform"), net.features(), net.num_dense, net.num_tasks)
    b = bound.batch(batch)
    net.eval()
    torch.set_num_threads(1)
    with torch.inference_mode(), profile(
        activities=[ProfilerActivity.CPU], record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(steps + 1):
            for _ in range(forwards):
                net(b)
            prof.step()


def count_events(path: Path) -> int:
    n = 0
    with path.open("rb") as f:
        for line in f:
            n += line.count(b'"ph":')
    return n


_STEP_EVENT = re.compile(rb'\{\s*"ph": "X",\s*"cat": "user_annotation",\s*"name": "ProfilerStep#\d+",\s*'
                         rb'"pid": (\d+),\s*"tid": (\d+),\s*"ts": ([0-9.]+),\s*"dur": ([0-9.]+)\s*,\s*'
                         rb'"args": \{[^{}]*\}\s*\},\s*')


def resplit(src: Path, dst: Path, steps: int) -> None:
    """``src``'s events with its ProfilerStep ranges replaced by ``steps`` evenly spaced ones over the same span."""
    data = src.read_bytes()
    found = [(m.group(1), m.group(2), float(m.group(3)), float(m.group(4))) for m in _STEP_EVENT.finditer(data)]
    body = _STEP_EVENT.sub(b"", data)
    pid, tid = found[0][0], found[0][1]
    t0, t1 = min(f[2] for f in found), max(f[2] + f[3] for f in found)
    width = (t1 - t0) / steps
    new = b"".join(
        b'  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": %s, "tid": %s, '
        b'"ts": %.3f, "dur": %.3f, "args": {}},\n' % (i, pid, tid, t0 + i * width, width * 0.999999)
        for i in range(steps))
    at = body.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    dst.write_bytes(body[:at] + b"\n" + new + body[at:])


_TS = re.compile(rb'("ts": )([0-9.]+)')
_STEP = re.compile(rb"ProfilerStep#(\d+)")


def _pieces(data: bytes, size: int = 16 << 20):
    """``data`` in pieces of about ``size`` bytes, cut after a newline (a ``"ts":`` line is never split)."""
    i = 0
    while i < len(data):
        j = data.find(b"\n", min(i + size, len(data) - 1))
        j = len(data) if j < 0 else j + 1
        yield data[i:j]
        i = j


def synthesise(src: Path, dst: Path, copies: int) -> None:
    """``copies`` copies of ``src``'s events, each shifted by the trace's span, steps renumbered (in pieces:
    memory stays about the source's size)."""
    data = src.read_bytes()
    start = data.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    end = data.rindex(b"]")
    head, tail = data[:start], data[end:]
    body = memoryview(data)[start:end]
    lo = hi = None
    for piece in _pieces(bytes(body)):
        for m in _TS.finditer(piece):
            t = float(m.group(2))
            lo, hi = (t if lo is None else min(lo, t)), (t if hi is None else max(hi, t))
    span = (hi - lo) + 1000.0
    nsteps = max(int(x) for x in _STEP.findall(data)) + 1
    with dst.open("wb") as f:
        f.write(head)
        for k in range(copies):
            shift = k * span

            def ts_sub(m: re.Match, shift: float = shift) -> bytes:
                return m.group(1) + f"{float(m.group(2)) + shift:.3f}".encode()

            def step_sub(m: re.Match, k: int = k) -> bytes:
                return b"ProfilerStep#" + str(int(m.group(1)) + k * nsteps).encode()

            pieces = list(_pieces(bytes(body).rstrip().rstrip(b",")))
            for piece in pieces:
                f.write(_STEP.sub(step_sub, _TS.sub(ts_sub, piece)) if k else piece)
            f.write(b",\n" if k < copies - 1 else b"\n")
        f.write(tail)


def measure(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 3600) -> dict:
    r = subprocess.run([sys.executable, "-c", WRAP, str(timeout), *cmd], capture_output=True, text=True, env=env)
    return json.loads(r.stdout)


def acceptance(model: str, scale: float, batch: int, out: Path, threads: int = 1, rounds: int = 3) -> None:
    """Stage shares of live profiles and of imported annotated traces of the same zoo model: ``rounds`` rounds,
    each a live profile then a recorded trace, alternating; per stage the median share over the rounds (a
    busy host moves single runs by many points). ``threads`` intra-op threads in both (one: parallel ops
    under contention are what moves a single run most)."""
    import statistics

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    import recstack
    from recstack.traceimport import import_trace
    from recstack.workload import bind, load_workload
    from recstack.zoo import BuildOptions, build_model

    torch.set_num_threads(threads)
    net = build_model(model, scale=scale, options=BuildOptions(mode="inference", batch_size=batch))
    bound = bind(load_workload("uniform"), net.features(), net.num_dense, net.num_tasks)
    batches = [bound.batch(batch, i) for i in range(4)]
    net.eval()
    path = out / f"{model}.annotated.json"
    live_s, raw_s, cor_s, per = [], [], [], []
    for _ in range(rounds):
        live = recstack.profile_zoo(model, scale=scale, batch_size=batch, iters=20, warmup=3, op_iters=3,
                                    counters=False, cost_model=False, threads=threads)
        with torch.inference_mode(), recstack.annotate(net), profile(
                activities=[ProfilerActivity.CPU], record_shapes=True,
                schedule=schedule(wait=0, warmup=3, active=20, repeat=1),
                on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
            for i in range(23):
                net(batches[i % 4])
                prof.step()
        cor = import_trace(path)
        live_s.append(live.stage_shares())
        raw_s.append(import_trace(path, correct_overhead=False).stage_shares())
        cor_s.append(cor.stage_shares())
        per.append(cor.overhead.get("per_event_s") or 0.0)

    def med(runs: list[dict[str, float]], st: str) -> float:
        return statistics.median(r.get(st, 0.0) for r in runs)

    stages = sorted(set().union(*live_s, *cor_s), key=lambda s: -med(live_s, s))
    print(f"({model}, scale {scale}, batch {batch}, {threads} thread(s), median of {rounds} alternating rounds; "
          f"profiler cost per event estimated from the traces: {', '.join(f'{p * 1e6:.2f}' for p in per)} us)")
    print("| stage | live share | imported, raw | imported, corrected | corrected - live (points) |")
    print("|---|---:|---:|---:|---:|")
    worst = 0.0
    for st in stages:
        a, r, c = med(live_s, st), med(raw_s, st), med(cor_s, st)
        worst = max(worst, abs(c - a))
        print(f"| {st} | {a:.1%} | {r:.1%} | {c:.1%} | {100 * (c - a):+.1f} |")
    same = all(set(a) == set(c) for a, c in zip(live_s, cor_s, strict=True))
    print(f"same stages in every round: {same}; largest difference {100 * worst:.1f} points (goal <= 5)")


def phases(trace: Path) -> None:
    """Wall time of each phase of one import, in this process: decoding alone, decoding with the collector
    in one pass, the same in parts (one process per core, as the import does), the fold, then the whole
    ``import_trace`` (torch is not imported: the cost model prices the trace's dtype names)."""
    t0 = time.perf_counter()
    from recstack.traceimport import build, collect, decode, fold, parallel
    t1 = time.perf_counter()
    decode.stream_events(trace, lambda _events: None)
    t2 = time.perf_counter()
    c = collect.Collector()
    decode.stream_events(trace, c.add)
    t3 = time.perf_counter()
    parallel.collect_trace(trace, None, None)
    t4 = time.perf_counter()
    fold.fold(c, None)
    t5 = time.perf_counter()
    build.import_trace(trace)
    t6 = time.perf_counter()
    print(f"modules {t1 - t0:.2f} s, decode alone {t2 - t1:.2f} s, decode + collect {t3 - t2:.2f} s, the same in "
          f"{parallel.parts_for(trace)} part(s) {t4 - t3:.2f} s, fold {t5 - t4:.2f} s, import_trace {t6 - t5:.2f} s; "
          f"torch imported: {'torch' in sys.modules}")


def ab(trace: Path, old_src: Path, repeats: int, out: Path) -> None:
    """Old (``old_src``, e.g. a checkout of main) against new (this tree) ``recstack import`` CLI on ``trace``:
    ``repeats`` pairs, alternating old/new (who goes first alternates too), each a fresh child process;
    wall time and peak RSS of each; the old/new ratio per pair, its median and range; whether the two
    profiles hold the same tree (benchmarks/import_same.py)."""
    import statistics

    new_src = Path(__file__).resolve().parents[1] / "src"
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for i in range(repeats):
        for who in (("old", "new") if i % 2 == 0 else ("new", "old")):
            src = old_src if who == "old" else new_src
            dst = out / f"ab.{who}.json"
            env = dict(os.environ, PYTHONPATH=str(src))
            m = measure([sys.executable, "-m", "recstack", "--quiet", "import", str(trace), "-o", str(dst)], env)
            if m["rc"] != 0:
                raise SystemExit(f"{who}: rc {m['rc']}: {m['stderr'][-500:]}")
            runs[who].append(m)
            print(f"pair {i + 1} {who}: {m['wall_s']:.2f} s wall, {m['cpu_s']:.2f} s CPU (every process), "
                  f"{m['peak_rss_bytes'] / 1e6:.0f} MB", flush=True)
    ratios = [o["wall_s"] / n["wall_s"] for o, n in zip(runs["old"], runs["new"], strict=True)]
    same = subprocess.run([sys.executable, str(Path(__file__).with_name("import_same.py")), str(out / "ab.old.json"),
                           str(out / "ab.new.json")], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    print("| | wall s per run | median | CPU s per run (all processes) | peak RSS MB (largest process) |")
    print("|---|---|---:|---|---:|")
    for who in ("old", "new"):
        walls, cpus = [m["wall_s"] for m in runs[who]], [m["cpu_s"] for m in runs[who]]
        print(f"| {who} | {', '.join(f'{w:.2f}' for w in walls)} | {statistics.median(walls):.2f} | "
              f"{', '.join(f'{c:.2f}' for c in cpus)} | "
              f"{max(m['peak_rss_bytes'] for m in runs[who]) / 1e6:,.0f} |")
    print(f"old/new per pair: {', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f}); profiles: {same}")


def trace_events(path: Path) -> tuple[int, int]:
    """(events, decompressed bytes) of a trace file: ``"ph"`` keys counted in its (gunzipped) text."""
    import gzip

    n = size = 0
    tail = b""
    with path.open("rb") as head:
        gz = head.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rb") if gz else path.open("rb")) as f:
        while block := f.read(16 << 20):
            n += (tail + block[:4]).count(b'"ph"') + block.count(b'"ph"') - block[:4].count(b'"ph"')
            size += len(block)
            tail = block[-4:]
    return n, size


def _spread(values: list[float]) -> str:
    import statistics

    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def _cols(ms: list[dict]) -> str:
    """wall s, CPU s (median (min-max)) and the largest peak RSS of one tool's runs."""
    if not ms:
        return "- | - | -"
    return (f"{_spread([m['wall_s'] for m in ms])} | {_spread([m['cpu_s'] for m in ms])} | "
            f"{max(m['peak_rss_bytes'] for m in ms) / 1e6:,.0f}")


def _ratio(hta: list[dict], rec: list[dict], key: str) -> str:
    """HTA's median ``key`` over recstack's."""
    import statistics

    if not hta:
        return "-"
    return f"{statistics.median(m[key] for m in hta) / statistics.median(m[key] for m in rec):.1f}x"


def real(paths: list[Path], hta_python: str | None, min_events: int, repeats: int, out: Path) -> None:
    """recstack import against HTA's parse on real trace files (see the module docstring)."""
    import shutil

    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("*"))
                    if f.is_file() and f.name.endswith((".json", ".json.gz")) and not f.name.endswith(".golden.json")})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"), PYTHONPYCACHEPREFIX=str(out / "pycache"))
    print(f"host: {os.cpu_count()} CPUs, load {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {repeats} rounds per "
          "trace after a warm-up, tools alternating; wall and CPU s: median (min-max); CPU: user+sys of every process;"
          " RSS: the largest process's peak", flush=True)
    print("| trace | events | MB (gz MB) | recstack wall s | recstack CPU s | recstack RSS MB | HTA wall s | HTA CPU s | "
          "HTA RSS MB | HTA/recstack wall | CPU | RSS (recstack/HTA) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f in files:
        events, size = trace_events(f)
        if events < min_events:
            continue
        folder = out / "real" / f.name.split(".")[0]  # HTA parses every trace of a folder: this one alone
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / f.name).symlink_to(f.resolve())
        cmds = {"recstack": [sys.executable, "-m", "recstack", "--quiet", "import", str(f), "-o",
                             str(out / "profiles" / f"{folder.name}.json")]}
        if hta_python:
            cmds["hta"] = [hta_python, "-c", HTA, str(folder)]
        (out / "profiles").mkdir(parents=True, exist_ok=True)
        runs: dict[str, list[dict]] = {k: [] for k in cmds}
        for i in range(repeats + 1):
            for tool in (list(cmds) if i % 2 == 0 else list(cmds)[::-1]):
                m = measure(cmds[tool], env, 900)
                if m["rc"] != 0:
                    raise SystemExit(f"{tool} on {f}: rc {m['rc']}: {m['stderr'][-500:]}")
                if i:  # round 0 warms the page cache and the bytecode cache
                    runs[tool].append(m)
        r, h = runs["recstack"], runs.get("hta", [])
        rss = (f"{max(m['peak_rss_bytes'] for m in r) / max(m['peak_rss_bytes'] for m in h):.2f}x" if h else "-")
        print(f"| {f.name} | {events:,} | {size / 1e6:,.0f} ({f.stat().st_size / 1e6:,.1f}) | {_cols(r)} | {_cols(h)} | "
              f"{_ratio(h, r, 'wall_s')} | {_ratio(h, r, 'cpu_s')} | {rss} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-import"))
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--many-steps", type=int, default=4200)
    ap.add_argument("--forwards", default="auto")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--scale", default="", help="comma-separated copies to synthesise, e.g. 3,10")
    ap.add_argument("--hta-python", default=None, help="python of a venv with HolisticTraceAnalysis 0.5")
    ap.add_argument("--hta-max-events", type=int, default=1_500_000, help="skip HTA on larger traces")
    ap.add_argument("--hta-timeout", type=float, default=600, help="stop an HTA parse after this many seconds")
    ap.add_argument("--skip-record", action="store_true", help="reuse the traces in --out")
    ap.add_argument("--traces", default="", help="only these traces: few,many,x3,x10")
    ap.add_argument("--tools", default="", help="only these tools (prefixes): recstack,hta")
    ap.add_argument("--phases", type=Path, default=None, metavar="TRACE", help="time each phase of one import")
    ap.add_argument("--ab", type=Path, default=None, metavar="OLD_SRC",
                    help="old (OLD_SRC, a src/ folder of another checkout) vs new recstack import, alternating")
    ap.add_argument("--ab-trace", type=Path, default=Path("/tmp/bench-import/few/trace.json"))
    ap.add_argument("--repeats", type=int, default=3, help="--ab pairs")
    ap.add_argument("--real", type=Path, nargs="+", default=None, metavar="PATH",
                    help="real trace files or folders: the recstack/HTA table (see the module docstring)")
    ap.add_argument("--min-events", type=int, default=100_000, help="--real: traces with fewer events are skipped")
    ap.add_argument("--real-repeats", type=int, default=3, help="--real: measured rounds per trace")
    ap.add_argument("--acceptance", default=None, metavar="MODEL", help="compare live and imported stage shares")
    ap.add_argument("--acc-scale", type=float, default=0.05)
    ap.add_argument("--acc-batch", type=int, default=256)
    ap.add_argument("--acc-threads", type=int, default=1, help="intra-op threads of both the live run and the trace")
    ap.add_argument("--acc-rounds", type=int, default=3, help="alternating live/trace rounds (median share)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.phases:
        phases(args.phases)
        return 0
    if args.ab:
        ab(args.ab_trace, args.ab, args.repeats, args.out / "profiles")
        return 0
    if args.real:
        real(args.real, args.hta_python, args.min_events, args.real_repeats, args.out)
        return 0
    if args.acceptance:
        acceptance(args.acceptance, args.acc_scale, args.acc_batch, args.out, args.acc_threads, args.acc_rounds)
        return 0
    base, many = args.out / "few" / "trace.json", args.out / "many" / "trace.json"
    base.parent.mkdir(exist_ok=True)
    many.parent.mkdir(exist_ok=True)
    if not args.skip_record:
        forwards = int(args.forwards) if args.forwards != "auto" else 0
        if not forwards:
            probe = args.out / "probe.json"
            record(probe, 2, 4, args.batch)
            per_forward = count_events(probe) / 8
            forwards = max(1, round(args.events / (args.steps * per_forward)))
            print(f"{per_forward:.0f} events per forward: {forwards} forwards per step", flush=True)
        t = time.perf_counter()
        record(base, args.steps, forwards, args.batch)
        print(f"recorded {base} in {time.perf_counter() - t:.0f} s", flush=True)
    if not many.exists() or not args.skip_record:
        resplit(base, many, args.many_steps)
    traces = [("few steps", base), ("many steps", many)]
    for k in [int(x) for x in args.scale.split(",") if x.strip()]:
        dst = args.out / f"x{k}" / "trace.json"
        dst.parent.mkdir(exist_ok=True)
        if not dst.exists():
            synthesise(base, dst, k)
        traces.append((f"x{k}", dst))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    print("| trace | events | MB | steps | tool | wall s | peak RSS MB | note |")
    print("|---|---:|---:|---:|---|---:|---:|---|")
    for label, path in traces:
        if args.traces and label.split()[0] not in args.traces.split(","):
            continue
        events = count_events(path)
        mb = path.stat().st_size / 1e6
        steps = len(set(_STEP.findall(path.read_bytes()))) if mb < 2000 else "-"
        outs = args.out / "profiles"  # not beside the trace: HTA parses every JSON file of the trace's folder
        outs.mkdir(exist_ok=True)
        rows = [("recstack import (CLI)", [sys.executable, "-m", "recstack", "--quiet", "import", str(path), "-o",
                                           str(outs / f"{path.parent.name}.cli.json")]),
                ("recstack import_trace", [sys.executable, "-c", INPROC, str(path),
                                           str(outs / f"{path.parent.name}.api.json")])]
        if args.hta_python and events <= args.hta_max_events:
            rows.append(("HTA 0.5 TraceAnalysis", [args.hta_python, "-c", HTA, str(path.parent)]))
        for tool, cmd in rows:
            if args.tools and not any(tool.lower().startswith(t) for t in args.tools.split(",")):
                continue
            m = measure(cmd, env, args.hta_timeout if tool.startswith("HTA") else 3600)
            note = (m["stdout"].strip().splitlines() or [""])[-1] if m["rc"] == 0 else f"rc {m['rc']}: " + (
                m["stderr"].strip().splitlines() or [""])[-1]
            print(f"| {label} | {events:,} | {mb:,.0f} | {steps} | {tool} | {m['wall_s']:.1f} | "
                  f"{m['peak_rss_bytes'] / 1e6:,.0f} | {note[:120]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
