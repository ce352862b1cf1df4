"""Contention detection, per-stage kernel counters, output hygiene and the GPU check's skip path.

The decision (:func:`recstack.hardware.contention.assess`) is tested on injected
samples; the real-process tests assert only what does not depend on how busy
or fast the host is (a busy child process is *listed*; a page fault happened).
"""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from recstack.hardware.contention import (
    ContentionWatch,
    CpuTicks,
    ProcUsage,
    Sample,
    assess,
    planned_processes,
)
from recstack.hardware.probe import (
    MIN_MARGIN,
    SPREAD_FACTOR,
    compare_probe,
    host_llc_bytes,
    machine_probe,
    probe_capacity,
    probe_margin,
    probe_settings,
    stream_array_bytes,
)
from recstack.profiling.native_stderr import filtered_fd2, is_native_log
from recstack.profiling.timing import RUSAGE_FIELDS, StageTimer, caller_key, stage_rusage
from recstack.render import progress

REPO = Path(__file__).resolve().parents[1]
USDT = "USDT:2026-12-01 06:08:35 9748:9748 SyncActivityProfilerHandler.cpp:52] profiler_start\n"


def _quiet_sample(**kw) -> Sample:
    """Two torch threads on two cores for 2 s, nothing else running (100 ticks/s)."""
    base = dict(
        wall_s=2.0,
        torch_threads=2,
        usable_cores=2,
        clk_tck=100,
        own_cpu_s=3.8,
        own_involuntary_ctx=10,
        cpu_ticks=CpuTicks(busy=381, steal=0, total=400),
        others=[ProcUsage(7, "sshd", 0.01)],
    )
    base.update(kw)
    return Sample(**base)


def _fig(median: float, lo: float, spread: float = 0.05) -> dict:
    return {"median": median, "min": lo, "max": median * 1.02, "p10": lo, "p90": median, "repeats": 7,
            "spread": spread}


def _machine_probe(gemm: float, stream: float, spread: float = 0.05) -> dict:
    return {**probe_settings(), "by_threads": {"2": {"gemm_flops": _fig(gemm, 0.95 * gemm, spread),
                                                     "stream_bytes_per_s": _fig(stream, 0.95 * stream, spread)}}}


def _probe(gemm: float, stream: float) -> dict:
    return {"threads": 2, "gemm_flops": gemm, "stream_bytes_per_s": stream, "settings": probe_settings()}


# -- the decision, on injected numbers ----------------------------------------------
def test_quiet_host_is_not_flagged():
    r = assess(_quiet_sample())
    assert r["detected"] is False and r["evidence"] == []
    assert r["busy_processes"] == [] and r["oversubscribed"] is False
    assert r["cpu_time_ratio"] == pytest.approx(1.9)


def test_two_busy_processes_on_two_cores_are_contention():
    loops = [ProcUsage(101, "python", 1.3, cmd="python -c busy"), ProcUsage(102, "python", 1.2, cmd="python -c busy")]
    r = assess(_quiet_sample(own_cpu_s=1.5, cpu_ticks=CpuTicks(busy=400, steal=0, total=400), others=loops))
    assert r["detected"] is True
    assert r["oversubscribed"] is True
    assert [p["pid"] for p in r["busy_processes"]] == [101, 102]
    assert any("oversubscribed" in e and "pid 101" in e for e in r["evidence"])
    assert r["other_cores"] == pytest.approx(1.25)


def test_planned_processes_are_recorded_not_flagged():
    workers = [ProcUsage(201, "python", 1.3), ProcUsage(202, "python", 1.2)]
    r = assess(_quiet_sample(own_cpu_s=1.5, cpu_ticks=CpuTicks(busy=400, steal=0, total=400), planned=workers))
    assert r["detected"] is False and r["evidence"] == []
    assert [p["pid"] for p in r["planned_load"]] == [201, 202]
    assert r["busy_processes"] == []


def test_busy_process_with_spare_cores_is_no_oversubscription():
    r = assess(
        _quiet_sample(
            torch_threads=1,
            usable_cores=4,
            own_cpu_s=2.0,
            cpu_ticks=CpuTicks(busy=400, steal=0, total=800),
            others=[ProcUsage(301, "make", 2.0)],
        )
    )
    assert r["detected"] is False
    assert [p["pid"] for p in r["busy_processes"]] == [301]
    assert any("no oversubscription" in n for n in r["notes"])


def test_invisible_work_on_our_cpus_counts():
    """/proc/stat sees other containers' processes that the process list does not."""
    r = assess(_quiet_sample(own_cpu_s=2.0, cpu_ticks=CpuTicks(busy=400, steal=0, total=400), others=[]))
    assert r["detected"] is True
    assert "none visible here" in r["evidence"][0]


def test_tick_noise_in_a_short_window_is_not_contention():
    r = assess(
        _quiet_sample(wall_s=0.01, own_cpu_s=0.0, cpu_ticks=CpuTicks(busy=2, steal=0, total=2), others=[])
    )
    assert r["detected"] is False
    assert any("short against" in n for n in r["notes"])


def test_steal_time_is_contention():
    r = assess(_quiet_sample(cpu_ticks=CpuTicks(busy=300, steal=60, total=400)))
    assert r["detected"] is True
    assert r["steal_fraction"] == pytest.approx(0.15)
    assert any(e.startswith("CPU steal time 15%") for e in r["evidence"])


def test_cpu_quota_throttling_is_contention():
    r = assess(_quiet_sample(cgroup_quota_cores=1.5, cgroup_throttled_s=0.4))
    assert r["detected"] is True
    assert any("CPU quota (1.5 cores) throttled this process for 20%" in e for e in r["evidence"])
    assert any("exceed the container's CPU quota" in n for n in r["notes"])
    assert assess(_quiet_sample(cgroup_quota_cores=4.0, cgroup_throttled_s=0.0))["detected"] is False


def test_host_slower_than_its_roofs_names_both_figures():
    """The Intel guest's two periods: GEMM 453 -> 170 GFLOP/s, stream copy 27 -> 18 GB/s."""
    slow = _quiet_sample(
        probe_before=_probe(165e9, 17.5e9),
        probe_after=_probe(170e9, 18e9),
        machine_probe=_machine_probe(453e9, 27e9),
        machine_measured_at="2026-11-30T23:06:00+00:00",
    )
    r = assess(slow)
    assert r["detected"] is True
    gemm = next(e for e in r["evidence"] if "GEMM probe" in e)
    assert "host slower than when its roofs were measured" in gemm
    assert "170 GFLOP/s" in gemm and "453 GFLOP/s" in gemm
    assert any("stream copy probe" in e and "27.0 GB/s" in e for e in r["evidence"])
    # a quiet machine probe (5% spread): the margin is its floor, MIN_MARGIN
    assert r["probe"]["floor"]["gemm_flops"] == pytest.approx((1 - MIN_MARGIN) * 453e9)


def test_the_probe_threshold_is_its_own_spread():
    """The same run probe (0.7x the machine's median) is slower than a machine probe whose rounds agreed
    within 5%, and not slower than one whose rounds spread 15% (margin 3 x 15% = 45%)."""
    run = dict(probe_before=_probe(0.7 * 453e9, 0.7 * 27e9), probe_after=_probe(0.7 * 453e9, 0.7 * 27e9))
    tight = assess(_quiet_sample(machine_probe=_machine_probe(453e9, 27e9, spread=0.05), **run))
    assert tight["detected"] is True and tight["probe"]["margin"]["gemm_flops"] == pytest.approx(MIN_MARGIN)
    wide = assess(_quiet_sample(machine_probe=_machine_probe(453e9, 27e9, spread=0.15), **run))
    assert wide["detected"] is False
    assert wide["probe"]["margin"]["gemm_flops"] == pytest.approx(SPREAD_FACTOR * 0.15)
    assert wide["probe"]["floor"]["gemm_flops"] == pytest.approx((1 - SPREAD_FACTOR * 0.15) * 453e9)
    # a file without the spread key takes it from its rounds' min and max
    assert probe_margin({"median": 100.0, "min": 80.0, "max": 110.0}) == pytest.approx(SPREAD_FACTOR * 0.3)
    # rounds that spread by a third or more leave no floor: not compared, and said so
    noisy = assess(_quiet_sample(machine_probe=_machine_probe(453e9, 27e9, spread=0.4), **run))
    assert noisy["detected"] is False and noisy["probe"]["floor"] == {}
    assert any("spread 40% over its rounds" in n for n in noisy["notes"])


def test_a_probe_of_other_settings_is_not_compared():
    """A run probe of the old kind (16 MiB arrays, best of k: no settings) never meets a current machine probe."""
    old_run = {"threads": 2, "gemm_flops": 100e9, "stream_bytes_per_s": 5e9}
    r = assess(_quiet_sample(probe_before=old_run, probe_after=old_run, machine_probe=_machine_probe(453e9, 27e9)))
    assert r["detected"] is False and any("differs from this run's" in n for n in r["notes"])


def test_probe_within_spread_or_recovered_is_not_flagged():
    ref = _machine_probe(453e9, 27e9)
    within = assess(_quiet_sample(probe_before=_probe(440e9, 26e9), probe_after=_probe(446e9, 27e9), machine_probe=ref))
    assert within["detected"] is False
    # Low before, back to normal after: recorded as a change during the run, not as a slower host.
    recovered = assess(_quiet_sample(probe_before=_probe(200e9, 26e9), probe_after=_probe(450e9, 27e9), machine_probe=ref))
    assert recovered["detected"] is False
    assert any("changed during the run" in n for n in recovered["notes"])


def test_probe_without_a_comparable_machine_probe_is_only_recorded():
    probes = dict(probe_before=_probe(100e9, 5e9), probe_after=_probe(100e9, 5e9))
    old = assess(_quiet_sample(machine_probe=None, **probes))
    assert old["detected"] is False and any("older recstack" in n for n in old["notes"])
    other_size = {**_machine_probe(453e9, 27e9), "stream_array_bytes": 16 << 20}
    assert assess(_quiet_sample(machine_probe=other_size, **probes))["detected"] is False
    none = assess(_quiet_sample(machine_known=False, machine_probe=None, **probes))
    assert none["probe"]["before"]["gemm_flops"] == 100e9 and any("no machine file" in n for n in none["notes"])


# -- the probe compares like with like ------------------------------------------------
def _leave_big_buffer(nbytes: int) -> None:
    """What a model's table reads leave behind: caches full of a buffer larger than the LLC."""
    buf = torch.ones(nbytes // 4)
    buf.add_(1.0)


def _leave_hot_loop() -> None:
    """What a model of small dense ops leaves behind: a small working set, hot in the caches."""
    small = torch.ones(4096)
    for _ in range(2000):
        small.add_(1.0)


def _as_reference(probes: list[dict]) -> dict:
    from recstack.hardware.bench import summarize

    out = {}
    for k in ("gemm_flops", "stream_bytes_per_s"):
        fig = summarize([p[k] for p in probes])
        out[k] = {**fig, "spread": (fig["max"] - fig["min"]) / fig["median"]}
    return {**probes[0]["settings"], "by_threads": {"1": out}}


def _best_two(probes: list[dict]) -> tuple[dict, dict]:
    """The run's before and after, taken as the two probes least slowed by anything else on the host."""
    ranked = sorted(probes, key=lambda p: p["gemm_flops"] * p["stream_bytes_per_s"], reverse=True)
    return ranked[0], ranked[1]


def test_probe_working_set_is_beyond_the_llc_and_its_verdict_ignores_the_cache_state_left_behind():
    llc = host_llc_bytes()
    settings = probe_settings()
    assert settings["llc_bytes"] == llc
    # source + destination are 4x the LLC (2x each), unless the host's memory caps them
    assert stream_array_bytes(llc, 1 << 40) >= 2 * llc and settings["stream_array_bytes"] >= 32 << 20
    assert stream_array_bytes(210 << 20, 1 << 40) >= 2 * (210 << 20)  # two sockets' 105 MiB L3s
    assert stream_array_bytes(210 << 20, 1 << 30) == 64 << 20  # a 1 GiB host: 1/16 of its memory
    # The same probe after a model that left a buffer beyond the LLC in the caches, and after one that
    # left a small hot loop: interleaved, so the host's own drift hits both alike. Neither state makes the
    # other look slower (the probe starts from its own copy's state); no speed is asserted.
    after_big, after_hot = [], []
    for _ in range(3):
        _leave_big_buffer(2 * llc)
        after_big.append(probe_capacity(1, settings))
        _leave_hot_loop()
        after_hot.append(probe_capacity(1, settings))
    assert all(p["settings"] == settings and p["threads"] == 1 for p in after_big + after_hot)
    for run, ref in ((after_big, after_hot), (after_hot, after_big)):
        before, after = _best_two(run)
        evidence, notes, record = compare_probe(before, after, _as_reference(ref), True, None)
        assert evidence == [], (evidence, record)
        # each kind was judged against a floor, or (rounds spread a third or more on a busy host) said why not
        judged = len(record["probe"]["floor"]) + sum("spread" in n and "not compared" in n for n in notes)
        assert judged == 2, notes


# -- real processes -----------------------------------------------------------------
def _busy_loop() -> subprocess.Popen:
    """A process spinning in ``while True: pass`` (returned once it is in the loop)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "print('looping', flush=True)\nwhile True: pass"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "looping"
    return proc


def test_watch_lists_busy_processes_and_keeps_planned_ones_apart():
    loops = [_busy_loop() for _ in range(3)]
    try:
        watch = ContentionWatch(planned_pids=[loops[2].pid], probe=False).start()
        time.sleep(1.0)
        r = watch.stop()
    finally:
        for p in loops:
            p.kill()
            p.wait()
            p.stdout.close()
    busy = {p["pid"] for p in r["busy_processes"]}
    assert {loops[0].pid, loops[1].pid} <= busy
    assert loops[2].pid not in busy
    assert loops[2].pid in {p["pid"] for p in r["planned_load"]}
    assert os.getpid() not in busy
    assert isinstance(r["detected"], bool) and isinstance(r["evidence"], list)


def test_registered_planned_processes_and_machine_probe_shape():
    loop = _busy_loop()
    try:
        mp = machine_probe([1], rounds=2)
        machine = {"probe": mp, "measured_at": "now"}
        with planned_processes([loop.pid]):
            watch = ContentionWatch(machine).start()
            time.sleep(0.3)
            r = watch.stop()
    finally:
        loop.kill()
        loop.wait()
        loop.stdout.close()
    fig = mp["by_threads"]["1"]["gemm_flops"]
    assert fig["repeats"] == 2 and fig["min"] > 0
    assert mp["by_threads"]["1"]["stream_bytes_per_s"]["median"] > 0
    assert loop.pid in {p["pid"] for p in r["planned_load"]}
    assert r["probe"]["before"]["gemm_flops"] > 0 and r["probe"]["after"]["stream_bytes_per_s"] > 0


# -- per-stage getrusage --------------------------------------------------------------
def test_stage_timer_charges_page_faults_to_the_stage_that_touched_memory():
    timer = StageTimer()
    timer.reset()
    timer.start()
    timer.enter("touch")
    # A fresh anonymous mapping: its pages are new whatever the allocator did before (a freed
    # torch buffer may be reused from an already-touched heap), so touching them must fault.
    region = mmap.mmap(-1, 32 << 20)
    view = np.frombuffer(region, dtype=np.uint8)
    view[:: mmap.PAGESIZE] = 1
    timer.exit()
    del view
    region.close()
    timer.stop()
    step = timer.rusage_steps[0]
    assert step["touch"][0] > 0  # minor faults: first touch of new pages
    # Before the stage's root is entered, the model's own code prepares it: that is its caller code.
    assert set(step) <= {"touch", caller_key("touch"), "other"}


def test_caller_code_faults_count_in_its_stage_and_timed_steps_take_no_getrusage():
    """The model's own code before a root counts in that root's stage (the stage node's time includes it too);
    the timing pass's timed steps take no getrusage, only its counter steps after them."""
    from recstack.profiling.passes import COUNTER_STEPS, timing_pass
    from recstack.profiling.runner import ProfileOptions, Step

    timer = StageTimer()
    timer.start()
    region = mmap.mmap(-1, 32 << 20)  # touched by the caller code, before the root is entered
    view = np.frombuffer(region, dtype=np.uint8)
    view[:: mmap.PAGESIZE] = 1
    timer.enter("touch")
    timer.exit()
    del view
    region.close()
    timer.stop()
    assert timer.rusage_steps[0]["touch"][0] > 0 and caller_key("touch") not in timer.rusage_steps[0]
    assert caller_key("touch") in timer.acc  # its time is still the stage's caller code

    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    step = Step(model, ProfileOptions(mode="inference"), None)
    res = timing_pass(model, step, [(torch.ones(2, 4),)], {"0": "dense"}, COUNTER_STEPS + 2, None)
    assert len(res.timed) == COUNTER_STEPS + 2 and len(res.counter_steps) == COUNTER_STEPS
    assert res.timer is not None and len(res.timer.rusage_steps) == COUNTER_STEPS
    assert set(res.timer.rusage_steps[0]) <= {"dense", "other"}


def test_stage_rusage_is_the_central_step_mean():
    steps = [{"a": [10, 0, 1, 2]}, {"a": [20, 0, 3, 4], "other": [1, 0, 0, 0]}, {"a": [900, 5, 0, 0]}]
    agg = stage_rusage(steps, central=[0, 1])
    assert agg["a"] == dict(zip(RUSAGE_FIELDS, [15.0, 0.0, 2.0, 3.0], strict=True))
    assert agg["other"]["minor_faults"] == 0.5


# -- output hygiene -----------------------------------------------------------------
def test_fd2_filter_drops_kineto_lines_and_keeps_the_rest(capfd):
    with filtered_fd2():
        os.write(2, USDT.encode())
        os.write(2, b"recstack: a real warning\n")
    err = capfd.readouterr().err
    assert "profiler_start" not in err
    assert "a real warning" in err
    assert is_native_log(USDT) and not is_native_log("USDT is a tracing technology\n")


def test_progress_prints_on_stderr_when_forced_and_not_when_quiet(capfd):
    try:
        progress.configure(quiet=False, force=True)
        with progress.phase("timing pass", estimate_s=1.0):
            pass
        out, err = capfd.readouterr()
        assert "timing pass" in err and "done in" in err and "est. 1.0 s" in err
        assert out == ""
        progress.configure(quiet=True)
        with progress.phase("op pass"):
            pass
        assert "op pass" not in capfd.readouterr().err
    finally:
        progress.configure(quiet=False, force=False)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "recstack.cli", *args], capture_output=True, text=True, env=full, timeout=300
    )


def test_profile_shows_phases_on_stderr_and_no_kineto_lines(capfd):
    """In-process, captured at the file-descriptor level, where Kineto writes."""
    from _batches import raw_batch

    import recstack
    from recstack.zoo import build_model

    model = build_model("rmc1", scale=0.0005)
    try:
        progress.configure(force=True)
        prof = recstack.profile(
            model, lambda i: raw_batch(model, 16, seed=i), batch_size=16, iters=3, warmup=1, op_iters=1,
            num_batches=2, cost_model=False, counters=False,
        )
    finally:
        progress.configure(force=False)
    out, err = capfd.readouterr()
    assert "USDT" not in out + err and "profiler_start" not in out + err
    for name in ("warm-up", "timing pass", "op pass"):
        assert f"recstack: {name} done in" in err
    assert "recstack:" not in out
    cont = prof.environment["contention"]
    assert isinstance(cont["detected"], bool) and isinstance(cont["evidence"], list)
    assert cont["probe"]["before"]["gemm_flops"] > 0
    stages = {n.name: n for n in prof.root.children}
    assert set(stages["embedding"].extra["rusage"]) == set(RUSAGE_FIELDS)


def test_profile_cli_quiet_output_is_clean(tmp_path):
    out = tmp_path / "p.json"
    proc = _cli(
        "--quiet", "profile", "rmc1", "--scale", "0.0005", "--batch-size", "16", "--iters", "3", "--warmup", "1",
        "--op-iters", "1", "--machine", "none", "-o", str(out),
        env={"RECSTACK_PROGRESS": "always"},
    )
    assert proc.returncode == 0, proc.stderr
    for stream in (proc.stdout, proc.stderr):
        assert "USDT" not in stream and "profiler_start" not in stream
        assert "recstack: timing pass" not in stream
    assert "contention" in json.loads(out.read_text())["environment"]


def test_quiet_flag_and_json_output_stay_parseable():
    proc = _cli("--quiet", "zoo", "list", "--json", env={"RECSTACK_PROGRESS": "always"})
    assert proc.returncode == 0, proc.stderr
    assert isinstance(json.loads(proc.stdout), list)


# -- the GPU check --------------------------------------------------------------------
def test_gpu_check_skips_without_a_gpu():
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu-check.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "no GPU: skipped"


# -- this process's own threads (schedstat) ---------------------------------------------
def test_own_threads_from_files_group_by_name_and_count_threads_born_in_the_window(tmp_path: Path) -> None:
    from recstack.hardware.threads import read_threads, thread_usage

    def task(tid: int, name: str, run: int, wait: int, slices: int) -> None:
        (tmp_path / str(tid)).mkdir(exist_ok=True)
        (tmp_path / str(tid) / "comm").write_text(name + "\n")
        (tmp_path / str(tid) / "schedstat").write_text(f"{run} {wait} {slices}\n")

    task(1, "python", 1_000_000_000, 0, 10)
    task(2, "pt_gloo_runloop", 0, 0, 0)
    before = read_threads(str(tmp_path))
    task(1, "python", 1_600_000_000, 100_000_000, 30)
    task(2, "pt_gloo_runloop", 50_000_000, 200_000_000, 40)
    task(3, "pt_gloo_runloop", 10_000_000, 100_000_000, 5)  # born in the window: counts from zero
    (tmp_path / "4").mkdir()  # a thread that ended between the listing and the read
    rows = {r["name"]: r for r in thread_usage(before, read_threads(str(tmp_path)), wall_s=1.0)}
    assert rows["python"]["cpu_s"] == pytest.approx(0.6) and rows["python"]["runq_wait_s"] == pytest.approx(0.1)
    gloo = rows["pt_gloo_runloop"]
    assert gloo["threads"] == 2 and gloo["cpu_s"] == pytest.approx(0.06) and gloo["waiting_cores"] == pytest.approx(0.3)
    assert gloo["slices"] == 45 and list(rows) == ["python", "pt_gloo_runloop"]  # largest CPU first
    assert read_threads(str(tmp_path / "missing")) is None and thread_usage(None, before, 1.0) is None
    r = assess(_quiet_sample(own_threads=list(rows.values())))
    notes = r["notes"]
    assert r["detected"] is False  # its own threads are recorded, not contention
    # an id reused in the window by a new thread (another name, or counters below the old one's) counts from 0
    task(5, "old_worker", 900_000_000, 0, 90)
    was = read_threads(str(tmp_path))
    task(5, "pt_gloo_runloop", 20_000_000, 0, 2)
    reused = {r["name"]: r for r in thread_usage(was, read_threads(str(tmp_path)), wall_s=1.0)}
    assert reused["pt_gloo_runloop"]["cpu_s"] == pytest.approx(0.02) and "old_worker" not in reused
    for t in (1, 2, 3, 5):  # schedstat kept at zero everywhere (sched_info off): not a measurement
        task(t, "python", 0, 0, 0)
    assert read_threads(str(tmp_path)) is None
    assert any("own threads waited for a core 0.40" in n and "pt_gloo_runloop x2" in n for n in notes), notes


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux /proc only")
def test_a_runnable_thread_is_running_or_waiting_for_a_core() -> None:
    """A spinning thread is runnable throughout: its CPU time plus its run-queue wait covers its spin,
    however busy the host (half of it asserted: a cgroup quota's throttled time is neither)."""
    import threading

    from recstack.hardware.threads import read_threads, thread_usage

    spun: list[float] = []
    tid: list[int] = []
    done, release = threading.Event(), threading.Event()

    def spin() -> None:
        tid.append(threading.get_native_id())
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.3:
            pass
        spun.append(time.perf_counter() - t0)
        done.set()
        release.wait(30)  # asleep (not runnable) while the main thread reads its figures

    before = read_threads()
    if before is None:
        pytest.skip("the kernel keeps no per-thread schedstat")
    th = threading.Thread(target=spin)
    t0 = time.perf_counter()
    th.start()
    assert done.wait(30)
    after = read_threads()
    wall = time.perf_counter() - t0
    release.set()
    th.join(30)
    mine = after[tid[0]]
    assert tid[0] not in before and (mine.run_ns + mine.wait_ns) * 1e-9 >= 0.5 * spun[0]
    rows = thread_usage(before, after, wall)
    assert sum(r["threads"] for r in rows) == len(after)
    assert sum(r["cpu_s"] for r in rows) >= mine.run_ns * 1e-9  # the spinner counted from zero
