"""Machine figures, perf counters, roofline classification and the roofline chart.

Measurements run in the ``tiny`` mode (seconds); every other test uses a
hand-written machine dict so that its expectations are exact.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from _machines import synthetic_machine

from recstack.analysis.commands import cmd_machine_compare_profile
from recstack.analysis.commands import register as register_analysis
from recstack.analysis.roofline import (
    OVERHEAD_PER_CALL_S,
    build_roofs,
    classify,
)
from recstack.errors import ConfigError, DataError, RecstackError
from recstack.hardware import counters as ctr
from recstack.hardware import sysinfo
from recstack.hardware.commands import register
from recstack.hardware.machine import (
    REQUIRED_KEYS,
    cache_is_current,
    cache_path,
    cached_or_measured,
    get_machine,
    load_machine,
    measure_machine,
    save_machine,
    validate_machine,
)
from recstack.profiling import counters_replay as replay
from recstack.render.roofline_chart import output_paths, render_roofline
from recstack.tree import Node, Profile

PERF_DATA = Path(__file__).parent / "data" / "perf"
GB = 1e9


# -- measurement ------------------------------------------------------------------
@pytest.fixture(scope="session")
def tiny_machine() -> dict:
    return measure_machine(tiny=True)


def _stats(st: dict) -> None:
    assert st["repeats"] >= 3
    assert 0 < st["min"] <= st["median"] <= st["max"]
    assert st["min"] <= st["p10"] <= st["p90"] <= st["max"]


def test_tiny_measurement_has_sane_figures_with_spreads(tiny_machine):
    m = tiny_machine
    for key in REQUIRED_KEYS:
        assert key in m
    assert m["mode"] == "tiny" and m["quick"] is True
    assert m["cpu_model"] == sysinfo.cpu_model() and m["host"] == sysinfo.host()
    cpus = sysinfo.usable_cpus()
    assert set(m["gemm_flops"]["fp32"]["by_threads"]) == {str(t) for t in sorted({1, cpus})}
    for dtype in ("fp32", "bf16"):
        for st in m["gemm_flops"][dtype]["by_threads"].values():
            _stats(st)
            assert 1e7 < st["median"] < 1e15  # FLOP/s
    bf16 = m["gemm_flops"]["bf16"]
    assert bf16["native"] == sysinfo.native_bf16() and bf16["emulated"] == (not bf16["native"])
    for kinds in m["stream_bandwidth"]["by_threads"].values():
        for k in ("copy", "triad"):
            _stats(kinds[k])
            assert 1e7 < kinds[k]["median"] < 1e13  # bytes/s
    grid = m["gather_bandwidth"]["grid"]
    assert {c["dist"] for c in grid} == {"uniform", "zipf"}
    assert {c["row_bytes"] for c in grid} == {64, 512}
    for c in grid:
        _stats(c["bandwidth"])
        assert 0 < c["unique_fraction"] <= 1
    zipf_unique = [c["unique_fraction"] for c in grid if c["dist"] == "zipf" and c["table_bytes"] == 8 << 20]
    uni_unique = [
        c["unique_fraction"] for c in grid if c["dist"] == "uniform" and c["table_bytes"] == 8 << 20
    ]
    assert max(zipf_unique) < min(uni_unique)  # skewed indices repeat rows
    lat = m["latency_ns"]
    _stats(lat["dram"])
    assert [s["bytes"] for s in lat["by_size"]] == sorted(s["bytes"] for s in lat["by_size"])
    for s in lat["by_size"]:
        assert all(math.isfinite(s["ns"][k]) and s["ns"][k] > 0 for k in ("median", "min", "max", "p10", "p90"))
    assert (
        any(c["level"] == 1 for c in m["caches"]) or not Path("/sys/devices/system/cpu/cpu0/cache").exists()
    )
    assert (m["gpu"] is None) == (not torch.cuda.is_available())
    validate_machine(json.loads(json.dumps(m, allow_nan=False)))


needs_cc = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("cc", "gcc", "clang")), reason="no C compiler on this host"
)


@needs_cc
def test_native_latency_obeys_physics(tiny_machine):
    """What holds on any host: a load from DRAM is slower than one from L1, and slower than 20 ns."""
    lat = tiny_machine["latency_ns"]
    assert lat["method"] == "native" and lat["trusted"] is True
    levels = {s["level"]: s["ns"]["median"] for s in lat["by_size"]}
    assert levels["L1"] < levels["DRAM"] == lat["dram"]["median"]
    assert lat["dram"]["median"] > 20
    assert lat["dram_bytes"] > tiny_machine["llc_bytes"] or lat["dram_bytes"] >= 256 << 20


def test_latency_without_compiler_is_flagged_and_not_used(tmp_path, monkeypatch):
    from recstack.hardware import cpu_bench, gather_kernel
    from recstack.hardware.plan import make_plan

    monkeypatch.setenv(gather_kernel.DISABLE_ENV, "1")  # as if no C compiler existed
    plan = make_plan("tiny", [], 1, None)
    plan.latency_points = [("L1", 16 << 10), ("DRAM", 1 << 20)]
    plan.latency_steps, plan.latency_repeats = 8000, 2
    lat = cpu_bench.memory_latency(plan)
    assert lat["method"] == "python-fallback" and lat["trusted"] is False
    assert "RECSTACK_NO_NATIVE" in lat["fallback_reason"]
    assert all(s["ns"]["min"] > 0 for s in lat["by_size"])
    m = synthetic_machine()
    m["latency_ns"] = lat
    p = _profile()
    classify(p, m)
    assert p.extra["machine"]["dram_latency_s"] is None  # shown by `recstack machine`, never used
    m["latency_ns"] = {**lat, "method": "native", "trusted": True}
    classify(p, m)
    assert p.extra["machine"]["dram_latency_s"] == pytest.approx(lat["dram"]["median"] * 1e-9)


@needs_cc
@pytest.mark.parametrize("dim", [16, 36, 128, 200])
@pytest.mark.parametrize("threads", [1, 3])
def test_native_gather_kernel_matches_embedding_bag(dim, threads):
    from recstack.hardware import gather_kernel

    gen = torch.Generator().manual_seed(dim)
    table = torch.randn(5000, dim, generator=gen)
    lengths = torch.randint(0, 40, (257,), generator=gen)
    lengths[3] = 0  # an empty bag sums to zero
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    idx = torch.randint(0, 5000, (int(offsets[-1]),), generator=gen)
    out = torch.full((257, dim), float("nan"))
    gather_kernel.gather_sum(table, idx, offsets, out, threads=threads)
    ref = torch.nn.functional.embedding_bag(idx, table, offsets[:-1], mode="sum")
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)
    assert out[3].abs().sum() == 0


@needs_cc
def test_native_gather_kernel_rejects_bad_tensors():
    from recstack.hardware import gather_kernel

    table = torch.randn(10, 16)
    offsets = torch.tensor([0, 2], dtype=torch.int64)
    with pytest.raises(ValueError, match="idx must be"):
        gather_kernel.gather_sum(table, torch.tensor([1, 2], dtype=torch.int32), offsets, torch.empty(1, 16))
    with pytest.raises(ValueError, match="out must be"):
        gather_kernel.gather_sum(table, torch.tensor([1, 2]), offsets, torch.empty(2, 16))
    for bad in ([0, 3], [-1, 2], [0, 2, 1]):  # past len(idx), negative, falling
        with pytest.raises(ValueError, match="offsets must rise"):
            off = torch.tensor(bad, dtype=torch.int64)
            gather_kernel.gather_sum(table, torch.tensor([1, 2]), off, torch.empty(len(bad) - 1, 16))
    with pytest.raises(ValueError, match="threads must be"):
        gather_kernel.gather_sum(table, torch.tensor([1, 2]), offsets, torch.empty(1, 16), threads=0)
    out = torch.empty(1, 16)  # a huge read-ahead distance is clamped, not followed
    gather_kernel.gather_sum(table, torch.tensor([1, 2]), offsets, out, distance=1 << 62)
    torch.testing.assert_close(out[0], table[1] + table[2])
    none = torch.empty(0, 16)  # no bags at all
    gather_kernel.gather_sum(table, torch.tensor([], dtype=torch.int64), torch.zeros(1, dtype=torch.int64), none)


@needs_cc
def test_machine_gather_grid_uses_native_kernel(tiny_machine):
    g = tiny_machine["gather_bandwidth"]
    assert g["native"] is True and g["fallback_reason"] is None
    assert "gather.c" in g["kernel"] and g["pooling"] > 1 and g["read_ahead_rows"] > 0
    assert g["build"]["compiler"] and "-O3" in g["build"]["flags"]


def test_gather_falls_back_when_the_compiler_fails(tmp_path, monkeypatch):
    from recstack.hardware import cpu_bench, gather_kernel
    from recstack.hardware.plan import make_plan

    fake_cc = tmp_path / "broken-cc"
    fake_cc.write_text("#!/bin/sh\necho 'broken-cc 1.0'\n[ \"$1\" = --version ] && exit 0\necho 'boom' >&2\nexit 1\n")
    fake_cc.chmod(0o755)
    monkeypatch.setenv("CC", str(fake_cc))
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(gather_kernel, "_LOADED", [])
    with pytest.raises(gather_kernel.KernelUnavailable, match="compiling the gather kernel failed.*boom"):
        gather_kernel.load()
    plan = make_plan("tiny", sysinfo.cache_levels(), 1, None)
    g = cpu_bench.gather_bandwidth(plan)
    assert g["native"] is False and "boom" in g["fallback_reason"]
    assert "index_select" in g["kernel"] and g["pooling"] == 1
    assert all(c["bandwidth"]["max"] > 0 for c in g["grid"])
    assert not list((tmp_path / "cache" / "kernels").glob("*.so"))


def test_benchmarks_restore_torch_threads():
    from recstack.hardware import cpu_bench

    before = torch.get_num_threads()
    from recstack.hardware.plan import TINY_STOP_RULE

    res = cpu_bench.stream_bandwidth(1 << 20, sorted({1, sysinfo.usable_cpus()}), TINY_STOP_RULE)
    assert torch.get_num_threads() == before
    assert res["array_bytes"] == 1 << 20


def test_cache_sizes_from_sysfs(tmp_path):
    for cpu, level, ctype, size, shared in [
        (0, 1, "Data", "48K", "0"),
        (0, 2, "Unified", "2048K", "0"),
        (0, 3, "Unified", "105M", "0-1"),
        (1, 1, "Data", "48K", "1"),
        (1, 3, "Unified", "105M", "0-1"),
    ]:
        d = tmp_path / f"cpu{cpu}" / "cache" / f"index{level}"
        d.mkdir(parents=True)
        for name, val in (("level", level), ("type", ctype), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{val}\n")
    caches = sysinfo.cache_levels(tmp_path)
    l1 = next(c for c in caches if c["level"] == 1)
    l3 = next(c for c in caches if c["level"] == 3)
    assert l1["size_bytes"] == 48 << 10 and l1["instances"] == 2
    assert l3["size_bytes"] == 105 << 20 and l3["instances"] == 1
    assert sysinfo.llc_bytes(caches) == 105 << 20
    assert sysinfo.parse_size("32768K") == 32 << 20 and sysinfo.parse_size("junk") is None


# -- cache --------------------------------------------------------------------------
def test_cache_remeasured_when_cpu_model_changes(tiny_machine, tmp_path, monkeypatch):
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path))
    path = cache_path()
    assert path.parent == tmp_path and path.name.startswith("machine-") and sysinfo.cpu_hash() in path.name
    stale = copy.deepcopy(tiny_machine)
    stale["cpu_model"] = "Imaginary CPU 9000"
    stale["measured_at"] = "2000-01-01T00:00:00+00:00"
    save_machine(stale, path)
    got = get_machine(tiny=True)
    assert got["cpu_model"] == sysinfo.cpu_model()
    assert got["measured_at"] != stale["measured_at"]
    assert load_machine(path)["cpu_model"] == sysinfo.cpu_model()


def test_current_cache_is_reused_and_host_change_detected(tiny_machine, tmp_path, monkeypatch):
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path))
    cached = copy.deepcopy(tiny_machine)
    cached["measured_at"] = "2001-02-03T04:05:06+00:00"
    save_machine(cached, cache_path())
    assert get_machine(tiny=True)["measured_at"] == "2001-02-03T04:05:06+00:00"
    assert "host changed" in cache_is_current({**cached, "host": "elsewhere"}, "tiny")
    assert "CPU model changed" in cache_is_current({**cached, "cpu_model": "x"}, "tiny")
    assert "quick requested" in cache_is_current(cached, "quick")
    assert cache_is_current({**cached, "mode": "full"}, "quick") is None


def test_corrupt_cache_is_remeasured(tmp_path, monkeypatch):
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path))
    cache_path().write_text("{not json")
    assert get_machine(tiny=True)["mode"] == "tiny"


# -- validation ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "named"),
    [
        (("gather_bandwidth",), "'gather_bandwidth'"),
        (("latency_ns",), "'latency_ns'"),
        (("gemm_flops", "fp32", "by_threads"), "'gemm_flops.fp32.by_threads'"),
        (("gemm_flops", "fp32"), "'gemm_flops.fp32'"),
        (("stream_bandwidth", "by_threads", "2", "triad"), "'stream_bandwidth.by_threads.2.triad'"),
        (("latency_ns", "dram", "median"), "'latency_ns.dram.median'"),
        (("measured_at",), "'measured_at'"),
    ],
)
def test_machine_file_validation_names_missing_key(tmp_path, path, named):
    m = synthetic_machine()
    d = m
    for k in path[:-1]:
        d = d[k]
    del d[path[-1]]
    f = tmp_path / "m.json"
    f.write_text(json.dumps(m))
    with pytest.raises(DataError, match=named.replace(".", r"\.")) as exc:
        load_machine(f)
    assert str(f) in str(exc.value)


def test_machine_file_validation_other_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_machine(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    with pytest.raises(DataError, match="cannot read"):
        load_machine(bad)
    m = synthetic_machine()
    m["gather_bandwidth"]["grid"] = []
    with pytest.raises(DataError, match="grid"):
        validate_machine(m)
    m = synthetic_machine()
    m["gemm_flops"]["fp32"]["by_threads"]["one"] = m["gemm_flops"]["fp32"]["by_threads"]["1"]
    with pytest.raises(DataError, match="thread count"):
        validate_machine(m)
    good = tmp_path / "good.json"
    save_machine(synthetic_machine(), good)
    assert load_machine(good)["host"] == "test-host"


# -- perf parser --------------------------------------------------------------------
def _parse(name: str) -> dict:
    return ctr.parse_perf_stat_csv((PERF_DATA / name).read_text())


def test_perf_parser_not_supported_recorded_on_kvm():
    r = _parse("kvm_not_supported.txt")
    ev = r["events"]
    assert ev["task-clock"]["value"] == pytest.approx(1.03) and ev["task-clock"]["unit"] == "msec"
    assert ev["task-clock"]["metric"] == {"value": 0.010, "unit": "CPUs utilized"}
    for e in ("cycles", "instructions", "cache-misses"):
        assert ev[e]["status"] == "not supported" and ev[e]["value"] is None
    assert ev["page-faults"]["value"] == 74
    assert r["topdown"] is None and r["messages"] == []


def test_perf_parser_user_modifier_and_metrics():
    r = _parse("intel_skylake_user.txt")
    ev = r["events"]
    assert set(ev) == {"cycles", "instructions", "cache-references", "cache-misses"}
    assert ev["cycles"]["raw_names"] == ["cycles:u"]
    assert ev["instructions"]["metric"] == {"value": 1.54, "unit": "insn per cycle"}
    d = ctr.derived(r, calls=10)
    assert d["ipc"] == pytest.approx(12098321544 / 7831226754)
    assert d["cache_misses_per_kinstr"] == pytest.approx(1000 * 31250011 / 12098321544)
    assert d["cycles_per_call"] == pytest.approx(783122675.4)
    assert d["multiplexed"] is False


def test_perf_parser_topdown_events_over_slots():
    r = _parse("intel_icx_topdown_events.txt")
    td = r["topdown"]
    assert td["source"].startswith("events")
    assert td["retiring"] == pytest.approx(0.26, abs=1e-6)
    assert td["bad_speculation"] == pytest.approx(0.03, abs=1e-6)
    assert td["frontend_bound"] == pytest.approx(0.15, abs=1e-6)
    assert td["backend_bound"] == pytest.approx(0.56, abs=1e-6)
    assert r["metrics"]["tma_backend_bound"] == 56.0


def test_perf_parser_topdown_metric_lines_and_variance():
    r = _parse("intel_spr_topdownl1_metrics.txt")
    assert r["events"]["TOPDOWN.SLOTS"]["variance_pct"] == pytest.approx(0.41)
    assert r["metrics"] == {
        "tma_retiring": 24.3,
        "tma_bad_speculation": 2.9,
        "tma_frontend_bound": 28.8,
        "tma_backend_bound": 44.0,
    }
    td = r["topdown"]  # events win; they agree with perf's own metrics
    assert td["retiring"] == pytest.approx(0.243, abs=1e-3) and td["backend_bound"] == pytest.approx(
        0.44, abs=1e-3
    )
    amd = _parse("amd_zen4_pipelinel1.txt")["topdown"]
    assert amd == {
        "retiring": 0.273,
        "bad_speculation": 0.062,
        "frontend_bound": 0.264,
        "backend_bound": 0.401,
        "source": "metrics",
    }


def test_perf_parser_multiplexing_not_counted_and_repeats():
    r = _parse("intel_multiplexed.txt")
    assert r["events"]["cycles"]["running_pct"] == pytest.approx(75.04)
    assert r["events"]["LLC-store-misses"]["status"] == "not counted"
    assert ctr.derived(r, 1)["multiplexed"] is True
    rv = _parse("kvm_repeat_variance.txt")
    assert rv["events"]["task-clock"]["variance_pct"] == pytest.approx(2.68)
    assert rv["events"]["cycles"]["status"] == "not supported"
    idle = _parse("kvm_not_counted_idle.txt")
    assert idle["events"]["task-clock"]["status"] == "not counted"


def test_perf_parser_aggregation_prefixes_and_hybrid_pmus():
    per_cpu = _parse("kvm_per_cpu.txt")["events"]
    assert per_cpu["task-clock"]["value"] == pytest.approx(52.34 + 52.35)
    assert per_cpu["cycles"]["status"] == "not supported"
    per_socket = _parse("kvm_per_socket.txt")["events"]
    assert per_socket["task-clock"]["value"] == pytest.approx(112.24)
    hybrid = _parse("intel_hybrid_alderlake.txt")["events"]
    assert hybrid["cycles"]["value"] == 4312344512 and hybrid["cycles"]["status"] == "counted"
    assert hybrid["cycles"]["raw_names"] == ["cpu_core/cycles/", "cpu_atom/cycles/"]


def test_perf_error_texts_are_messages_not_events():
    r = _parse("paranoid_denied.txt")
    assert r["events"] == {} and r["messages"]


# -- counter detection ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("sample", "expect"),
    [
        ("paranoid_denied.txt", "perf_event_paranoid is 4"),
        ("ubuntu_wrapper_no_kernel_tools.txt", "linux-tools"),
        ("kvm_not_supported.txt", "not supported"),
        ("kvm_not_counted_idle.txt", "perf stat failed"),
    ],
)
def test_unavailable_reason_from_recorded_output(sample, expect):
    reason = ctr.unavailable_reason(1, (PERF_DATA / sample).read_text(), 4, hypervisor=True)
    assert reason is not None and expect in reason


def test_usable_counters_give_no_reason():
    for sample in ("intel_skylake_user.txt", "intel_hybrid_alderlake.txt", "intel_icx_topdown_events.txt"):
        assert ctr.unavailable_reason(0, (PERF_DATA / sample).read_text(), 2, hypervisor=False) is None
    text = (PERF_DATA / "kvm_not_supported.txt").read_text()
    assert "virtual machine" in ctr.unavailable_reason(0, text, 2, hypervisor=True)
    assert "virtual machine" not in ctr.unavailable_reason(0, text, 2, hypervisor=False)


def test_detect_without_perf_returns_reason(monkeypatch, tmp_path):
    st = ctr.detect_perf(str(tmp_path / "no-perf-here"))
    assert st.available is False and "not installed" in st.reason
    monkeypatch.setenv("RECSTACK_PERF", "")
    assert ctr.find_perf() is None
    assert ctr.detect_perf().available is False
    res = ctr.measure_counters(lambda: None, 3)
    assert res == {"available": False, "reason": ctr.detect_perf().reason}


def test_measure_counters_reports_unavailable_status():
    st = ctr.PerfStatus(False, "hardware counters are not supported here", perf="/usr/bin/perf", control=True)
    assert ctr.measure_counters(lambda: None, 2, status=st) == {"available": False, "reason": st.reason}
    prof = _profile()
    prof.run["stage_roots"] = {"0": {"stage": "dense", "rule": "test"}}
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    res = replay.counters_for_profile(prof, model, lambda: model(torch.ones(1, 4)), 2, status=st)
    assert res == {"available": False, "reason": st.reason}
    assert prof.extra["counters"] == {"available": False, "reason": st.reason}
    assert "counters" not in prof.stage("dense").extra


REAL_PERF = shutil.which("perf")


@pytest.mark.skipif(REAL_PERF is None, reason="perf is not installed on this host")
def test_detect_real_perf():
    st = ctr.detect_perf()
    assert st.perf is not None and st.reason
    assert st.paranoid == ctr.perf_event_paranoid()
    if st.available:
        assert st.events and st.control
    else:
        assert st.reason != "ok"


@pytest.mark.skipif(REAL_PERF is None, reason="perf is not installed on this host")
def test_real_perf_session_counts_software_events_per_stage():
    st = ctr.detect_perf()
    if not st.control:
        pytest.skip(f"{st.version} has no --control")
    probe = ctr.measure_counters(lambda: None, 1, events=["task-clock"], status=st)
    if not probe["available"]:
        pytest.skip(f"perf cannot attach to this process here: {probe['reason']}")

    def work() -> None:
        sum(range(200_000))

    res = ctr.measure_counters(work, 5, events=["task-clock", "page-faults"], status=st)
    assert res["available"] and res["calls"] == 5
    assert res["events"]["task-clock"]["status"] == "counted" and res["events"]["task-clock"]["value"] > 0
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    x = torch.randn(32, 64)

    def step() -> None:
        with torch.inference_mode():
            model(x)

    stages = replay.measure_stages(
        model, step, {"0": "dense", "2": "head"}, 20, events=["task-clock"], status=st
    )
    assert stages["available"], stages.get("reason")
    assert set(stages["stages"]) == {"dense", "head"}
    for s in stages["stages"].values():
        assert s["calls"] == 20 and s["root_calls_per_step"] == 1
        assert s["events"]["task-clock"]["value"] > 0
    prof = _profile()
    prof.run["stage_roots"] = {
        "0": {"stage": "dense", "rule": "test"},
        "2": {"stage": "head", "rule": "test"},
    }
    res = replay.counters_for_profile(prof, model, step, 5, events=["task-clock"], status=st)
    assert res["available"] and prof.extra["counters"]["available"] is True
    assert set(prof.extra["counters"]["stages"]) == {"dense", "head"}
    assert "counters" in prof.stage("dense").extra  # the stage node of the profile gets its compact figures


# -- roofline classification ------------------------------------------------------------
def _node(name, path, level, stage, t, calls=1, flops=None, nbytes=None, **extra) -> Node:
    n = Node(name=name, path=path, level=level, stage=stage, time_s=t, calls=calls, flops=flops, bytes=nbytes)
    if flops is not None and nbytes:
        n.intensity = flops / nbytes
    n.extra.update(extra)
    return n


def _profile(dtype: str = "fp32", threads: int = 2) -> Profile:
    """Hand-built tree; expected bounds (2 threads, fp32: peak 180 GFLOP/s, stream 20 GB/s):

    * embedding/emb (EmbeddingBag op, 1 GiB table of 128 B rows): 1 ms, 2.8 MB -> 2.8 GB/s = 70% of 4 GB/s: memory
    * dense/addmm: 1 ms, 108 MFLOP (108 GFLOP/s = 60% of peak), 3 MB: compute
    * tiny op: 2 us per call: overhead (per-call floor)
    * idle op: 1 ms, 1 MFLOP, 1 MB: overhead (below 10% of both roofs)
    * skewed op (hot rows): 1 ms, 12 MB requested (3x the roof), 2 MB unique (50%): memory on unique bytes
    * nocost op: flops null: bound None
    """
    rows, dim = 1 << 23, 32  # 8M rows x 128 B = 1 GiB
    emb = _node(
        "aten::embedding_bag",
        "embedding/emb/aten::embedding_bag",
        "op",
        "embedding",
        1e-3,
        1,
        0.7e6,
        2.8e6,
        shapes=[[[rows, dim], [21875], [512]]],
        cost_detail={"lookups": 21875.0, "table_bytes": 21875.0 * 128},
    )
    skew = _node(
        "aten::embedding_bag",
        "embedding/skew/aten::embedding_bag",
        "op",
        "embedding",
        1e-3,
        1,
        3e6,
        12e6,
        cost_detail={"lookups": 93750.0, "table_bytes": 93750.0 * 128, "unique_bytes": 2e6},
        shapes=[[[rows, dim], [93750], [512]]],
    )
    emb_mod = _node("emb", "embedding/emb", "module", "embedding", 1e-3, 1, 0.7e6, 2.8e6, children=None)
    emb_mod.children = [emb]
    skew_mod = _node("skew", "embedding/skew", "module", "embedding", 1e-3, 1, 3e6, 12e6)
    skew_mod.children = [skew]
    emb_stage = _node("embedding", "embedding", "stage", "embedding", 2e-3, 1, 3.7e6, 14.8e6)
    emb_stage.children = [emb_mod, skew_mod]
    addmm = _node("aten::addmm", "dense/mlp/aten::addmm", "op", "dense", 1e-3, 1, 108e6, 3e6)
    tiny = _node("aten::relu", "dense/mlp/aten::relu", "op", "dense", 2e-6, 1, 1e3, 8e3)
    idle = _node("aten::cat", "dense/mlp/aten::cat", "op", "dense", 1e-3, 1, 1e6, 1e6)
    nocost = _node("aten::view", "dense/mlp/aten::view", "op", "dense", 1e-4, 1, None, 8e3)
    mlp = _node("mlp", "dense/mlp", "module", "dense", 2.102e-3, 1, 109.001e6, 4.008e6)
    mlp.children = [addmm, tiny, idle, nocost]
    dense = _node("dense", "dense", "stage", "dense", 2.102e-3, 1, 109.001e6, 4.008e6)
    dense.children = [mlp]
    other = _node("other", "other", "stage", "other", 1e-4)
    root = _node("toy", "run", "run", None, 4.202e-3, 1)
    root.children = [emb_stage, dense, other]
    return Profile(
        run_id="t",
        run={"model": "toy", "threads": threads, "dtype": dtype, "device": "cpu", "table_dtype": "fp32"},
        environment={},
        overhead={},
        root=root,
    )


@pytest.fixture()
def classified() -> Profile:
    p = _profile()
    classify(p, synthetic_machine())
    return p


def test_memory_bound_embedding_uses_gather_roof(classified):
    n = classified.root.find("embedding/emb/aten::embedding_bag")
    r = n.extra["roofline"]
    assert n.extra["bound"] == "memory" and n.extra["bound_basis"] == "requested bytes"
    assert r["roof"] == "gather" and r["gather"]["table_source"] == "op shapes"
    assert r["gather"]["row_source"].startswith("cost model")
    assert r["gather"]["row_bytes"] == 128 and r["gather"]["table_bytes"] == 1 << 30
    assert r["roof_bytes_per_s"] == pytest.approx(4 * GB)
    assert r["achieved_bytes_per_s"] == pytest.approx(2.8 * GB)
    assert r["memory_fraction_requested"] == pytest.approx(0.7)
    assert r["ceiling_fraction"] == pytest.approx(0.7)
    assert r["ceiling_flops"] == pytest.approx(min(180 * GB, 0.25 * 4 * GB))
    module = classified.root.find("embedding/emb")
    assert module.extra["bound"] == "memory" and module.extra["roofline"]["roof"] == "gather"


def test_compute_bound_gemm(classified):
    n = classified.root.find("dense/mlp/aten::addmm")
    r = n.extra["roofline"]
    assert n.extra["bound"] == "compute"
    assert r["roof"] == "stream" and r["roof_bytes_per_s"] == pytest.approx(20 * GB)
    assert r["achieved_flops"] == pytest.approx(108 * GB)
    assert r["compute_fraction"] == pytest.approx(0.6)
    assert r["ceiling_flops"] == pytest.approx(180 * GB)
    assert r["ceiling_fraction"] == pytest.approx(0.6)
    assert r["intensity"] == pytest.approx(36.0) and r["intensity"] > r["ridge_intensity"]


def test_overhead_bound_tiny_and_idle_nodes(classified):
    tiny = classified.root.find("dense/mlp/aten::relu")
    assert tiny.extra["bound"] == "overhead"
    assert tiny.extra["roofline"]["per_call_s"] < OVERHEAD_PER_CALL_S
    assert "floor" in tiny.extra["bound_reason"]
    idle = classified.root.find("dense/mlp/aten::cat")
    assert idle.extra["bound"] == "overhead" and "both roofs" in idle.extra["bound_reason"]


def test_skewed_embedding_uses_unique_bytes(classified):
    n = classified.root.find("embedding/skew/aten::embedding_bag")
    r = n.extra["roofline"]
    assert n.extra["bound_basis"] == "unique bytes" and n.extra["bound"] == "memory"
    assert r["memory_fraction_requested"] == pytest.approx(3.0)
    assert r["memory_fraction_unique"] == pytest.approx(0.5)
    assert r["ceiling_fraction"] == pytest.approx(0.5)
    assert "hot rows" in n.extra["bound_reason"]
    module = classified.root.find("embedding/skew")  # no unique_bytes of its own: summed from its op
    assert module.extra["roofline"]["unique_bytes_source"] == "summed from embedding ops"
    assert module.extra["bound_basis"] == "unique bytes"


def test_null_cost_figures_give_null_bound(classified):
    n = classified.root.find("dense/mlp/aten::view")
    assert n.extra["bound"] is None and "flops" in n.extra["bound_reason"]
    other = classified.stage("other")
    assert other.extra["bound"] is None and "flops and bytes" in other.extra["bound_reason"]


def test_profile_machine_summary_and_roundtrip(classified):
    m = classified.extra["machine"]
    assert m["threads"] == 2 and m["dtype"] == "fp32"
    assert m["peak_flops"] == pytest.approx(180 * GB) and m["stream_bandwidth"] == pytest.approx(20 * GB)
    assert m["ridge_intensity"] == pytest.approx(9.0)
    assert m["gather_bandwidth_range"] == [pytest.approx(4 * GB), pytest.approx(40 * GB)]
    assert m["thresholds"]["overhead_per_call_s"] == OVERHEAD_PER_CALL_S
    assert any(r["main"] and r["dtype"] == "fp32" for r in m["compute_roofs"])
    assert m["gather_roofs"] and "embedding" in m["gather_roofs"][0]["label"]
    again = Profile.from_dict(json.loads(json.dumps(classified.to_dict(), allow_nan=False)))
    assert again.root.find("dense/mlp/aten::addmm").extra["bound"] == "compute"


def test_thread_count_and_dtype_select_the_roofs():
    m = synthetic_machine()
    one = build_roofs(m, {"threads": 1, "dtype": "fp32"})
    assert one.peak_flops == pytest.approx(100 * GB) and one.stream_bw == pytest.approx(10 * GB)
    assert one.gather_bw(128, 1 << 30) == pytest.approx(2 * GB)
    many = build_roofs(m, {"threads": 8, "dtype": "fp32"})
    assert many.peak_flops == pytest.approx(180 * GB) and "clamped" in many.notes[0]
    bf16 = build_roofs(m, {"threads": 2, "dtype": "bf16"})
    assert bf16.peak_flops == pytest.approx(3 * GB)
    assert not any("index_select" in n for n in one.notes)  # a native-kernel grid carries no warning


def test_fallback_gather_roof_is_flagged():
    m = synthetic_machine()
    m["gather_bandwidth"].update(
        {"kernel": "torch.index_select(...) (fallback)", "native": False, "fallback_reason": "no C compiler"}
    )
    notes = build_roofs(m, {"threads": 2, "dtype": "fp32"}).notes
    assert any("index_select" in n and "no C compiler" in n and "exceed 100%" in n for n in notes)
    import io

    from recstack.render.terminal import profile_tree

    p = _profile()
    classify(p, m)
    buf = io.StringIO()
    profile_tree(p, file=buf)
    text = buf.getvalue()
    assert "roofline note: gather roof measured with torch.index_select" in text
    assert "stage pass not measured" in text and "% roof: against test-host" in text
    # log-log interpolation between 1 MiB (40 GB/s) and 1 GiB (4 GB/s): geometric midpoint at 32 MiB
    two = build_roofs(m, {"threads": 2, "dtype": "fp32"})
    assert two.gather_bw(96, 1 << 25) == pytest.approx(math.sqrt(40 * 4) * GB, rel=1e-6)
    assert two.gather_bw(100, 1 << 40) == pytest.approx(4 * GB)  # clamped beyond the grid
    p = _profile(dtype="bf16")
    classify(p, m)
    assert p.root.find("dense/mlp/aten::addmm").extra["roofline"]["peak_flops"] == pytest.approx(3 * GB)


def test_gather_point_sources():
    m = synthetic_machine()
    p = _profile()
    op = p.root.find("embedding/emb/aten::embedding_bag")
    op.extra.pop("shapes")
    # the profile's table statistics (zoo.embedding.table_stats): 8 int8 tables x 4000 rows x 32 dims,
    # 36 B rows (scale and bias), 4 lookups each
    p.extra["embedding_tables"] = [
        {"table": f"t{i}", "rows": 4000, "dim": 32, "dtype": "int8", "row_bytes": 36,
         "table_bytes": 4000 * 36, "lookups": 4}
        for i in range(8)
    ]
    classify(p, m)
    g = op.extra["roofline"]["gather"]
    assert g["row_source"].startswith("cost model") and g["row_bytes"] == 128
    assert g["table_source"] == "embedding tables" and g["table_bytes"] == 4000 * 36  # per table, lookup-weighted
    op.extra.pop("cost_detail")
    classify(p, m)
    g = op.extra["roofline"]["gather"]
    assert g["row_source"] == "embedding tables" and g["row_bytes"] == 36  # int8 rows carry 4 extra bytes
    del p.extra["embedding_tables"]
    classify(p, m)
    g = op.extra["roofline"]["gather"]
    assert (
        g["row_source"] == "default"
        and g["table_source"].startswith("default")
        and g["table_bytes"] == 1 << 30
    )
    op.extra.update(row_bytes=64, table_footprint_bytes=1 << 20)
    classify(p, m)
    g = op.extra["roofline"]["gather"]
    assert g["row_source"] == g["table_source"] == "node"
    assert op.extra["roofline"]["roof_bytes_per_s"] == pytest.approx(40 * GB)


def test_unique_bytes_at_top_level_extra_and_ancestors_not_gather():
    p = _profile()
    skew = p.root.find("embedding/skew/aten::embedding_bag")
    skew.extra["unique_bytes"] = skew.extra["cost_detail"].pop("unique_bytes")
    p.root.extra["cost_detail"] = {"unique_bytes": 2e6}  # the cost model sums unique bytes up to the run
    p.root.flops, p.root.bytes = 112.701e6, 18.808e6
    classify(p, synthetic_machine())
    assert skew.extra["bound_basis"] == "unique bytes"
    assert p.root.extra["roofline"]["roof"] == "stream"  # 2 of 4.2 ms in embedding ops: not dominated


def test_gpu_profile_uses_gpu_figures():
    m = synthetic_machine()
    st = m["stream_bandwidth"]["by_threads"]["1"]["copy"]
    scale = {k: (v * 100 if isinstance(v, float) else v) for k, v in st.items()}
    m["gpu"] = {
        "name": "Test GPU",
        "hbm_bandwidth": {"copy": {**scale, "max": 4000 * GB}},
        "gemm_flops": {"fp32": {**scale, "max": 60e12}, "bf16": {**scale, "max": 900e12}},
        "gather_bandwidth": {
            "grid": [
                {
                    "threads": 1,
                    "dist": "uniform",
                    "row_bytes": r,
                    "table_bytes": t,
                    "bandwidth": {**scale, "max": bw},
                }
                for r in (64, 512)
                for t, bw in ((1 << 24, 3000 * GB), (1 << 32, 1000 * GB))
            ]
        },
    }
    p = _profile(dtype="bf16")
    p.run["device"] = "cuda"
    classify(p, m)
    assert p.extra["machine"]["device"] == "cuda" and p.extra["machine"]["peak_flops"] == pytest.approx(
        900e12
    )
    r = p.root.find("embedding/emb/aten::embedding_bag").extra["roofline"]
    assert r["roof"] == "gather" and 1000 * GB <= r["roof_bytes_per_s"] <= 3000 * GB


def test_gpu_profile_needs_gpu_figures():
    p = _profile()
    p.run["device"] = "cuda"
    with pytest.raises(DataError, match="GPU"):
        classify(p, synthetic_machine())


def test_classify_against_measured_tiny_machine(tiny_machine):
    p = _profile(threads=1)
    classify(p, tiny_machine)
    assert p.extra["machine"]["host"] == sysinfo.host()
    assert p.root.find("dense/mlp/aten::relu").extra["bound"] == "overhead"
    for n in p.nodes():
        assert n.extra["bound"] in (None, "memory", "compute", "overhead")


# -- chart ------------------------------------------------------------------------------
def test_chart_png_and_svg(classified, tmp_path):
    written = render_roofline(classified, tmp_path / "roof.png")
    assert [p.name for p in written] == ["roof.png", "roof.svg"]
    png = (tmp_path / "roof.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    svg = (tmp_path / "roof.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "</svg>" in svg
    only = render_roofline(classified, tmp_path / "sub" / "roof.svg")
    assert only == [tmp_path / "sub" / "roof.svg"] and only[0].stat().st_size > 1000


def test_chart_rejects_bad_extension_and_unclassified(tmp_path):
    with pytest.raises(ConfigError, match=r"\.png"):
        output_paths(tmp_path / "roof.jpg")
    with pytest.raises(DataError, match="classify"):
        render_roofline(_profile(), tmp_path / "r.png")


# -- CLI ---------------------------------------------------------------------------------
def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="recstack")
    sub = parser.add_subparsers(dest="cmd", required=True)
    register(sub, cmd_machine_compare_profile)
    register_analysis(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except RecstackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def test_cli_roofline(tmp_path, capsys):
    prof, mach = tmp_path / "p.json", tmp_path / "m.json"
    _profile().save(prof)
    save_machine(synthetic_machine(), mach)
    out = tmp_path / "chart.png"
    saved = tmp_path / "classified.json"
    assert (
        _cli(["roofline", str(prof), "-o", str(out), "--machine", str(mach), "--save-profile", str(saved)])
        == 0
    )
    text = capsys.readouterr().out
    assert "embedding" in text and "memory" in text and "chart.svg" in text
    assert out.exists() and out.with_suffix(".svg").exists()
    assert Profile.load(saved).stage("dense").extra["bound"] == "compute"
    assert _cli(["roofline", str(tmp_path / "absent.json"), "-o", str(out), "--machine", str(mach)]) == 2
    assert _cli(["roofline", str(prof), "-o", str(tmp_path / "x.gif"), "--machine", str(mach)]) == 2
    assert _cli(["roofline", str(prof), "-o", str(out), "--machine", str(tmp_path / "nope.json")]) == 2


def test_cli_machine_json_from_cache(tiny_machine, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RECSTACK_PERF", "")
    save_machine({**tiny_machine, "mode": "full", "quick": False}, cache_path())
    assert _cli(["machine", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in (*REQUIRED_KEYS, "counters"):
        assert key in data
    assert data["counters"]["available"] is False and "not installed" in data["counters"]["reason"]
    assert _cli(["machine"]) == 0
    text = capsys.readouterr().out
    assert "GEMM FLOP/s" in text and "gather bandwidth" in text and "hardware counters: unavailable" in text
    assert "in turn:" in text  # tables-in-turn cells are labelled


# -- end to end: a real profile with the real cost model ---------------------------------------
def test_classify_real_profile_with_cost_model(tmp_path):
    costmodel = pytest.importorskip("recstack.costmodel")
    from _batches import raw_batch

    import recstack
    from recstack.profiling.runner import call_model
    from recstack.zoo import build_model

    model = build_model("rmc1", scale=0.0005)
    batch = raw_batch(model, 64, seed=0, id_factor=1)
    prof = recstack.profile(
        model, [batch], batch_size=64, iters=3, warmup=1, op_iters=1, run_info={"model": "rmc1"}
    )
    model.eval()
    with torch.inference_mode(), costmodel.CostCounter(model) as counter:
        call_model(model, batch)
    costmodel.attach_costs(prof.root, counter.counts, steps=1)
    classify(prof, synthetic_machine())
    emb = prof.stage("embedding")
    r = emb.extra["roofline"]
    assert r["roof"] == "gather" and r["memory_fraction_unique"] is not None
    assert r["gather"]["row_bytes"] == pytest.approx(128) and r["gather"]["row_source"].startswith(
        "cost model"
    )
    # each call walks one table: the footprint is one table's (lookup-weighted), for the stage and its ops
    assert r["gather"]["table_source"] == "op shapes" and r["gather"]["table_bytes"] == 2000 * 128
    ops = [n for n in emb.walk() if n.level == "op" and n.name == "aten::embedding_bag"]
    assert len(ops) == 8 and all(o.extra["roofline"]["gather"]["table_bytes"] == 2000 * 128 for o in ops)
    assert prof.stage("dense").extra["roofline"]["roof"] == "stream"
    for n in prof.nodes():
        assert n.extra["bound"] in (None, "memory", "compute", "overhead")
        assert n.extra["bound"] is not None or n.extra["bound_reason"]
    assert len(render_roofline(prof, tmp_path / "rmc1.png")) == 2


# -- repeatability ----------------------------------------------------------------------------
def test_compare_machines_counts_figures_beyond_tolerance():
    from recstack.hardware.repeatability import TOLERANCE, compare_machines, roof_figures
    from recstack.render.machine import format_comparison

    before = synthetic_machine()
    now = copy.deepcopy(before)
    now["measured_at"] = "2024-01-02T00:00:00+00:00"
    now["gemm_flops"]["fp32"]["by_threads"]["2"]["max"] *= 1.25  # the roof moved 25%
    now["stream_bandwidth"]["by_threads"]["1"]["triad"]["max"] *= 1.0 + TOLERANCE / 2  # within tolerance
    cmp = compare_machines(now, before)
    best = cmp["summary"]["max"]
    n_figures = sum(1 for g, _n, _s in roof_figures(before) if g != "latency")
    assert best["figures"] == n_figures and best["beyond_tolerance"] == 1
    assert best["worst"] == "fp32 GEMM 2 thread(s)" and best["max_abs_change"] == pytest.approx(0.25)
    assert best["by_group"]["gemm"]["beyond_tolerance"] == 1 and best["by_group"]["stream"]["beyond_tolerance"] == 0
    assert cmp["summary"]["median"]["beyond_tolerance"] == 0
    assert cmp["summary"]["median"]["by_group"]["latency"]["figures"] == 1
    text = format_comparison(cmp)
    assert "1 of" in text and "fp32 GEMM 2 thread(s): +25.0%" in text and "2024-01-01" in text


def test_within_run_spread_and_noisy_host_warning():
    from recstack.hardware.repeatability import within_run_spread
    from recstack.render.machine import format_spread

    m = synthetic_machine()  # every figure has p10 = 0.92 x median, p90 = median: 8% spread
    quiet = within_run_spread(m)
    assert all(v["median_spread"] == pytest.approx(0.08) for v in quiet.values())
    assert "warning" not in format_spread(quiet)
    st = m["gemm_flops"]["fp32"]["by_threads"]["2"]
    st["p10"], st["p90"] = 0.8 * st["median"], 1.2 * st["median"]
    m["gemm_flops"]["bf16"]["by_threads"]["2"].update(p10=0.0, p90=m["gemm_flops"]["bf16"]["by_threads"]["2"]["median"])
    noisy = within_run_spread(m)
    assert noisy["gemm"]["max_spread"] == pytest.approx(1.0) and noisy["gemm"]["noisiest"] == "bf16 GEMM 2 thread(s)"
    assert noisy["gemm"]["median_spread"] == pytest.approx(0.4)  # 4 figures: 0.08, 0.08, 0.4, 1.0 -> upper middle
    assert "warning: noisy host (gemm" in format_spread(noisy)


def test_refresh_records_repeatability_against_the_replaced_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path))
    first = get_machine(refresh=True, tiny=True)
    assert "repeatability" not in first
    assert set(first["spread"]) == {"gemm", "stream", "gather", "latency"}
    assert all(v["median_spread"] >= 0 and v["figures"] > 0 for v in first["spread"].values())
    second, kept, measured = cached_or_measured(refresh=True, tiny=True)
    rep = second["repeatability"]
    assert measured and rep["before_measured_at"] == first["measured_at"] and rep["before_mode"] == "tiny"
    assert rep["summary"]["max"]["figures"] == len([r for r in rep["figures"] if r["stat"] == "max"]) > 10
    # kept in the cache, or beside it when this busy host made it contended and the first was quiet
    assert load_machine(kept)["repeatability"]["summary"] == json.loads(json.dumps(rep["summary"]))


def test_cli_machine_compare(tiny_machine, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RECSTACK_PERF", "")
    save_machine({**tiny_machine, "mode": "full", "quick": False}, cache_path())
    other = copy.deepcopy(tiny_machine)
    for st in other["gemm_flops"]["fp32"]["by_threads"].values():
        st["max"] /= 2.0  # the other file's roof was half: now is +100%
    save_machine(other, tmp_path / "other.json")
    assert _cli(["machine", "--compare", str(tmp_path / "other.json")]) == 0
    text = capsys.readouterr().out
    assert "repeatability vs the measurement of" in text and "fp32 GEMM 1 thread(s): +100.0%" in text
    assert _cli(["machine", "--json", "--compare", str(tmp_path / "other.json")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["comparison"]["summary"]["max"]["by_group"]["gemm"]["max_abs_change"] == pytest.approx(1.0)
    (tmp_path / "bad.json").write_text('{"host": "x"}')
    assert _cli(["machine", "--compare", str(tmp_path / "bad.json")]) == 2
    assert "bad.json" in capsys.readouterr().err


# -- tables read in turn -------------------------------------------------------------------
def test_tiny_measurement_has_tables_in_turn_cells(tiny_machine):
    grid = tiny_machine["gather_bandwidth"]["grid"]
    turn = [c for c in grid if c["tables_in_turn"] > 1]
    assert turn and all(c["dist"] == "uniform" for c in turn)
    biggest = max(c["table_bytes"] for c in grid if c["tables_in_turn"] == 1)
    for c in turn:
        assert c["footprint_bytes"] == c["table_bytes"] * c["tables_in_turn"] == biggest
        assert c["lookups"] == c["lookups_per_call"] * c["tables_in_turn"]
        _stats(c["bandwidth"])
    assert all(c["footprint_bytes"] == c["table_bytes"] for c in grid if c["tables_in_turn"] == 1)
    from recstack.hardware.repeatability import roof_figures

    names = [name for _g, name, _st in roof_figures(tiny_machine)]
    assert len(names) == len(set(names))  # every cell compared with its own counterpart
    assert any("tables in turn" in n for n in names)


def _with_turn_cells(m: dict, bw: float) -> dict:
    """Add tables-in-turn cells: 4 tables of 256 MiB (1 GiB in all) reaching ``bw`` at every row size."""
    for r in (64, 128, 256, 512):
        for t in (1, 2):
            m["gather_bandwidth"]["grid"].append(
                {
                    "threads": t,
                    "dist": "uniform",
                    "row_bytes": r,
                    "table_bytes": 256 << 20,
                    "tables_in_turn": 4,
                    "footprint_bytes": 1 << 30,
                    "bandwidth": {k: bw for k in ("median", "min", "max", "p10", "p90")} | {"repeats": 3},
                }
            )
    return m


def test_tables_in_turn_lower_the_gather_roof_with_the_footprint():
    m = _with_turn_cells(synthetic_machine(), 1 * GB)
    roofs = build_roofs(m, {"threads": 2, "dtype": "fp32"})
    one = roofs.gather_bw(128, 256 << 20)
    assert one > 1 * GB  # one table of 256 MiB: the one-table curve
    assert roofs.gather_bw(128, 256 << 20, 256 << 20) == pytest.approx(one)  # footprint = one table
    assert roofs.gather_bw(128, 256 << 20, 1 << 30) == pytest.approx(1 * GB)  # the measured pattern
    assert roofs.gather_bw(128, 256 << 20, 4 << 30) == pytest.approx(1 * GB)  # clamped beyond it
    assert roofs.gather_bw(128, 256 << 20, 512 << 20) == pytest.approx(math.sqrt(one * 1 * GB))  # log-linear
    # the measured penalty (1 GB/s vs the one-table figure at 256 MiB) carries to bigger tables...
    assert roofs.gather_bw(128, 1 << 30, 4 << 30) == pytest.approx(4 * GB * (1 * GB / one))
    # ...tapers below the smallest in-turn cell's tables (half at half their size)...
    half = roofs.gather_bw(128, 128 << 20, 1 << 30)
    assert half == pytest.approx(roofs.gather_bw(128, 128 << 20) * math.sqrt(1 * GB / one))
    # ...and is gone at a quarter of it and below: nothing was measured there
    assert roofs.gather_bw(128, 64 << 20, 1 << 30) == pytest.approx(roofs.gather_bw(128, 64 << 20))
    assert roofs.gather_bw(128, 1 << 20, 1 << 30) == pytest.approx(roofs.gather_bw(128, 1 << 20)) == 40 * GB
    # a machine file without tables-in-turn cells ignores the footprint
    plain = build_roofs(synthetic_machine(), {"threads": 2, "dtype": "fp32"})
    assert plain.gather_bw(128, 256 << 20, 1 << 30) == pytest.approx(plain.gather_bw(128, 256 << 20))


def test_stage_footprint_reaches_its_ops():
    m = _with_turn_cells(synthetic_machine(), 1 * GB)
    p = _profile()
    classify(p, m)
    stage = p.stage("embedding")
    g = stage.extra["roofline"]["gather"]
    assert g["footprint_bytes"] == 2 << 30 and g["footprint_source"] == "stage embedding: op shapes (sum of tables)"
    op = p.root.find("embedding/emb/aten::embedding_bag").extra["roofline"]["gather"]
    assert op["table_bytes"] == 1 << 30 and op["footprint_bytes"] == 2 << 30  # held to its stage's pattern
    assert op["footprint_source"].startswith("stage embedding")
    assert op["one_table_bytes_per_s"] == pytest.approx(4 * GB)
    assert "2 GiB in turn (embedding)" in p.extra["machine"]["gather_roofs"][0]["label"]


# -- stopping rule (injected clock and benchmark: deterministic, never the host's speed) --------
class _FakeClock:
    """A clock in ns that only moves when a fake benchmark says how long its call took."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def bench(self, durations_ms: list[float]):
        """A case whose n-th call takes durations_ms[n] (the last value repeats)."""
        calls = [0]

        def fn() -> None:
            i = min(calls[0], len(durations_ms) - 1)
            self.now += int(durations_ms[i] * 1e6)
            calls[0] += 1

        fn.calls = calls  # type: ignore[attr-defined]
        return fn


def test_stop_rule_stops_when_the_best_settles():
    from recstack.hardware.bench import StopRule, interleaved

    clock = _FakeClock()
    rule = StopRule(block=5, margin=0.01, min_rounds=10, max_rounds=200, budget_s=1e9, warm_s=0.0)
    # improving by 10% a call for 12 calls, then flat: settles in the block after the last gain
    fast = clock.bench([10.0 * 0.9**i for i in range(12)] + [10.0 * 0.9**11])
    flat = clock.bench([5.0])
    info: dict = {}
    out = interleaved({"a": fast, "b": flat}, stop=rule, clock=clock, info=info, warmup=0)
    assert info["stopped_by"] == "stable" and info["rounds"] == 20  # blocks end at 10, 15, 20
    assert len(out["a"]) == len(out["b"]) == 20
    assert min(out["a"]) == pytest.approx(10.0 * 0.9**11 * 1e-3)
    assert info["rule"]["margin"] == 0.01


def test_stop_rule_caps_rounds_and_time():
    from recstack.hardware.bench import MIN_ROUNDS_UNDER_BUDGET, StopRule, interleaved

    clock = _FakeClock()
    always_better = clock.bench([100.0 * 0.95**i for i in range(1000)])  # never settles
    rule = StopRule(block=5, margin=0.01, min_rounds=10, max_rounds=30, budget_s=1e9, warm_s=0.0)
    info: dict = {}
    interleaved({"a": always_better}, stop=rule, clock=clock, info=info, warmup=0)
    assert info["stopped_by"] == "max_rounds" and info["rounds"] == 30
    slow = clock.bench([400.0])  # 0.4 s a call against a 1 s cap
    info = {}
    interleaved({"a": slow}, stop=rule.capped(1.0), clock=clock, info=info, warmup=0)
    assert info["stopped_by"] == "budget" and info["rounds"] == 3 == MIN_ROUNDS_UNDER_BUDGET
    very_slow = clock.bench([5000.0])  # one call beyond the cap still leaves 3 repeats
    info = {}
    interleaved({"a": very_slow}, stop=rule.capped(1.0), clock=clock, info=info, warmup=0)
    assert info["rounds"] == MIN_ROUNDS_UNDER_BUDGET


def test_stop_rule_warms_each_case_for_warm_s_before_timing():
    from recstack.hardware.bench import StopRule, interleaved

    clock = _FakeClock()
    cold_start = clock.bench([50.0, 40.0, 30.0] + [10.0])  # the first calls are slow (pool asleep)
    rule = StopRule(block=2, margin=0.01, min_rounds=4, max_rounds=10, budget_s=1e9, warm_s=0.1)
    out = interleaved({"a": cold_start}, stop=rule, clock=clock, warmup=1)
    assert cold_start.calls[0] - len(out["a"]) == 3  # warm-up ran until 100 ms had passed
    assert max(out["a"]) == pytest.approx(0.010)  # no cold call was timed


def test_quick_and_full_plans_share_the_statistic():
    """Quick and full estimate the same figures: same GEMM sizes, stream arrays, chains and rule."""
    from recstack.hardware.plan import STOP_RULE, make_plan

    caches = [
        {"level": 1, "type": "Data", "size_bytes": 48 << 10, "instances": 2, "total_bytes": 96 << 10},
        {"level": 2, "type": "Unified", "size_bytes": 2 << 20, "instances": 2, "total_bytes": 4 << 20},
        {"level": 3, "type": "Unified", "size_bytes": 300 << 20, "instances": 1, "total_bytes": 300 << 20},
    ]
    quick, full = (make_plan(mode, caches, 2, 24 << 30) for mode in ("quick", "full"))
    assert quick.gemm_sizes == full.gemm_sizes and quick.stream_bytes == full.stream_bytes >= 4 * (300 << 20)
    assert quick.latency_points == full.latency_points
    assert quick.latency_points[-1] == ("DRAM", 8 * (300 << 20))
    for q, f in ((quick.gemm_stop, full.gemm_stop), (quick.stream_stop, full.stream_stop)):
        assert (q.block, q.margin, q.min_rounds, q.warm_s) == (f.block, f.margin, f.min_rounds, f.warm_s)
        assert (q.block, q.margin) == (STOP_RULE.block, STOP_RULE.margin) and q.budget_s <= f.budget_s
    assert sum(s.budget_s for s in (quick.gemm_stop, quick.gemm_stop, quick.stream_stop, quick.gather_stop)) < 45


# -- a machine measured under load is not the machine ----------------------------------------------
BUSY_LOOP = "import time\nt = time.monotonic()\nprint('looping', flush=True)\nwhile time.monotonic() - t < 120: pass"


@contextlib.contextmanager
def _pinned_busy_loops(count: int) -> Iterator[list[subprocess.Popen]]:
    """``count`` real busy-looping processes, each pinned to one of the CPUs this process may use (bounded:
    each ends by itself after 120 s; killed on leaving)."""
    cpus = sorted(os.sched_getaffinity(0))
    procs: list[subprocess.Popen] = []
    try:
        for i in range(count):
            p = subprocess.Popen([sys.executable, "-c", BUSY_LOOP], stdout=subprocess.PIPE, text=True)
            procs.append(p)
            os.sched_setaffinity(p.pid, {cpus[i % len(cpus)]})
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "looping"
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()
            if p.stdout is not None:
                p.stdout.close()


def _quiet_copy(machine: dict, measured_at: str) -> dict:
    """A measurement of this host marked quiet (full mode, so profiles' ``auto`` accepts it)."""
    quiet = copy.deepcopy(machine)
    quiet.update(measured_at=measured_at, mode="full", quick=False, contention={"detected": False, "evidence": []})
    return quiet


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pinning needs os.sched_setaffinity (Linux)")
def test_a_machine_measured_beside_two_busy_processes_is_marked_contended_and_not_the_cache(
    tiny_machine, tmp_path, monkeypatch, capsys
):
    from recstack.hardware.machine import _store, machine_with_file
    from recstack.hardware.measure_checks import contended_path

    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path))
    quiet = _quiet_copy(tiny_machine, "2001-02-03T04:05:06+00:00")
    save_machine(quiet, cache_path())
    with _pinned_busy_loops(2) as loops:
        machine, kept, measured = cached_or_measured(refresh=True, tiny=True)
    rec = machine["contention"]
    assert measured and rec["detected"] is True and rec["evidence"]
    assert {p.pid for p in loops} <= {b["pid"] for b in rec["busy_processes"]}
    # kept beside the cache, marked; the quiet measurement stays the cache and is what profiles read
    assert kept == contended_path(cache_path()) and load_machine(kept)["contention"]["detected"] is True
    assert load_machine(cache_path())["measured_at"] == quiet["measured_at"]
    assert machine_with_file("auto")[0]["measured_at"] == quiet["measured_at"]
    assert "measured under contention" in capsys.readouterr().err
    # --strict refuses it and writes nothing
    kept.unlink()
    with pytest.raises(RecstackError, match="--strict: the machine was measured under contention") as exc:
        _store(machine, quiet, cache_path(), strict=True)
    assert exc.value.exit_code == 3 and not kept.exists()
    # with no quiet measurement to keep, it is cached marked; the next quiet measurement replaces it
    cache_path().unlink()
    assert _store(machine, None, cache_path(), strict=False) == cache_path()
    assert load_machine(cache_path())["contention"]["detected"] is True
    later = _quiet_copy(tiny_machine, "2002-01-01T00:00:00+00:00")
    assert _store(later, machine, cache_path(), strict=False) == cache_path()
    assert load_machine(cache_path())["measured_at"] == later["measured_at"]


def test_judge_measurement_flags_load_before_and_repeat_spread():
    from recstack.hardware.measure_checks import judge_measurement
    from recstack.hardware.repeatability import within_run_spread

    m = synthetic_machine()  # every figure: 8% spread
    m["stream_bandwidth"]["stopping"] = {"rounds": 200, "stopped_by": "max_rounds"}
    quiet_watch = {"detected": False, "evidence": [], "notes": [], "usable_cores": 2,
                   "load_avg": {"before": [0.6, 0.5, 0.4], "after": [2.1, 1.0, 0.5]}}
    spread = within_run_spread(m)
    assert judge_measurement(quiet_watch, spread, m)["detected"] is False
    loaded = {**quiet_watch, "load_avg": {"before": [3.5, 3.1, 2.0], "after": [3.5, 3.2, 2.0]}}
    rec = judge_measurement(loaded, spread, m)
    assert rec["detected"] and "load average 3.50 before the measurement on 2 usable core(s)" in rec["evidence"][0]
    st = m["gemm_flops"]["fp32"]["by_threads"]
    for fig in list(st.values()) + list(m["gemm_flops"]["bf16"]["by_threads"].values()):
        fig["p10"], fig["p90"] = 0.7 * fig["median"], 1.04 * fig["median"]  # the 28-40% spread
    rec = judge_measurement(quiet_watch, within_run_spread(m), m)  # alone, a noisy spread is a note, no verdict
    assert not rec["detected"] and any("gemm repeats spread 34%" in n for n in rec["notes"])
    rec = judge_measurement(loaded, within_run_spread(m), m)  # beside the load, it is evidence
    assert rec["detected"] and any(e.startswith("gemm repeats spread 34%") for e in rec["evidence"])
    # 12% spread: only evidence when the stopping rule never saw the best settle
    m2 = synthetic_machine()
    for t in m2["stream_bandwidth"]["by_threads"].values():
        for k in ("copy", "triad"):
            t[k]["p10"] = 0.88 * t[k]["median"]
    m2["stream_bandwidth"]["stopping"] = {"rounds": 12, "stopped_by": "stable"}
    assert judge_measurement(quiet_watch, within_run_spread(m2), m2)["detected"] is False
    m2["stream_bandwidth"]["stopping"]["stopped_by"] = "budget"
    rec = judge_measurement(loaded, within_run_spread(m2), m2)
    assert rec["detected"] and any("never settled (stopped by budget)" in e for e in rec["evidence"])


def test_cli_machine_shows_the_cache_instead_of_measuring(tiny_machine, tmp_path, monkeypatch, capsys):
    """After `machine --quick`, a plain `recstack machine` re-measured in full (127 s, 5.9 GB); it shows the cache."""
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RECSTACK_PERF", "")
    quick = {**_quiet_copy(tiny_machine, "2003-03-03T03:03:03+00:00"), "mode": "quick", "quick": True}
    save_machine(quick, cache_path())
    before = cache_path().read_text()
    assert _cli(["machine"]) == 0
    out = capsys.readouterr().out
    assert "the measurement of 2003-03-03T03:03:03+00:00" in out and "--remeasure" in out
    assert "contention: none found" in out
    assert cache_path().read_text() == before  # nothing measured, nothing written
    # a cache marked contended is shown with a warning, and refused under --strict
    save_machine({**quick, "contention": {"detected": True, "evidence": ["load average 3.50 before ..."]}},
                 cache_path())
    assert _cli(["machine"]) == 0
    assert "WARNING: measured under contention: load average 3.50" in capsys.readouterr().out
    assert _cli(["machine", "--strict"]) == 3
    assert "--strict: the cached machine file" in capsys.readouterr().err


def test_one_machine_vocabulary_in_the_one_resolver(tmp_path, monkeypatch):
    """auto, none (any case) and the old word host (with a warning) mean the same to every command's --machine."""
    from recstack.hardware.machine import machine_with_file

    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path))  # no cached machine: auto finds none
    monkeypatch.chdir(tmp_path)  # no file named "host" here
    assert machine_with_file("auto") == (None, None)
    assert machine_with_file("None") == (None, None) == machine_with_file("none")
    with pytest.warns(FutureWarning, match="--machine host is deprecated: use --machine auto"):
        assert machine_with_file("host") == (None, None)


def test_an_older_machine_file_measured_at_high_load_counts_as_contended() -> None:
    """A file an older recstack wrote (no ``contention`` record) is judged by its own load record: 48 on 2 CPUs
    before the measurement is contended (named in the summary, refused by --strict, marked in profiles); 0.5 is
    not. Before, every such file counted as quiet, and a profile read its roofs as fact."""
    from recstack.hardware.measure_checks import is_contended, summary

    old = synthetic_machine()
    old.pop("contention", None)
    old.update(cpus=2, load_avg={"before": [48.56, 37.71, 21.0], "after": [21.27, 31.61, 20.24]})
    assert is_contended(old)
    assert summary(old).startswith("WARNING: measured under contention") and "48.56" in summary(old)
    quiet = dict(old, load_avg={"before": [0.5, 0.4, 0.3], "after": [0.6, 0.5, 0.4]})
    assert not is_contended(quiet)
    assert summary(quiet) == "contention: not checked (measured by an older recstack)"
    recorded = dict(old, contention={"detected": False, "evidence": []})  # a record, when there is one, decides
    assert not is_contended(recorded)
