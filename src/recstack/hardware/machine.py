"""The machine file: measured roofs of this host, cached per host and CPU model.

``measure_machine(quick)`` runs the micro-benchmarks of
:mod:`recstack.hardware.cpu_bench` (and :mod:`recstack.hardware.gpu_bench`
with CUDA) and returns one JSON-able dict; ``get_machine()`` returns the
cached one for this host and CPU, measuring when there is none, when the
cached host or CPU model differs, when it is from an older schema or a
smaller mode than requested, or when ``refresh`` is set. The cache lives in
``$RECSTACK_CACHE_DIR`` (default ``~/.cache/recstack``) as
``machine-<host>-<cpu hash>.json``. ``load_machine(path)`` validates a file
and raises :class:`~recstack.errors.DataError` naming the first missing key.

Keys (all figures carry median/min/max/p10/p90/repeats):
``gemm_flops.<dtype>.by_threads.<n>`` (FLOP/s), ``stream_bandwidth.by_threads.<n>.{copy,triad}``
(bytes/s), ``gather_bandwidth.grid[]`` (bytes/s per threads/dist/row/table),
``latency_ns.by_size[]`` and ``latency_ns.dram``, ``caches[]``, ``gpu`` (or null),
plus ``host``, ``cpu_model``, ``cpu_hash``, ``measured_at``, ``quick``, ``mode``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from recstack.errors import DataError
from recstack.hardware import cpu_bench, sysinfo
from recstack.hardware.bench import STAT_KEYS
from recstack.hardware.plan import make_plan
from recstack.hardware.sysinfo import cache_dir
from recstack.outputs import atomic_write_text

SCHEMA = "recstack.machine"
SCHEMA_VERSION = 2  # 2: gather grid measured by the native pooled kernel (1: torch.index_select)
REQUIRED_KEYS = (
    "host",
    "cpu_model",
    "measured_at",
    "quick",
    "gemm_flops",
    "stream_bandwidth",
    "gather_bandwidth",
    "latency_ns",
    "caches",
)
MODE_RANK = {"tiny": 0, "quick": 1, "full": 2}
Progress = Callable[[str], None]


def _quiet(_msg: str) -> None:
    return None


def _mode(quick: bool, tiny: bool) -> str:
    return "tiny" if tiny else ("quick" if quick else "full")


def measure_machine(
    quick: bool = False, *, tiny: bool = False, progress: Progress | None = None
) -> dict[str, Any]:
    """Measure this host now (``quick``: under a minute on 2 cores; ``tiny``: seconds, for tests)."""
    say = progress or _quiet
    mode = _mode(quick, tiny)
    t_start = time.perf_counter()
    caches = sysinfo.cache_levels()
    cpus = sysinfo.usable_cpus()
    plan = make_plan(mode, caches, cpus, sysinfo.available_memory_bytes())
    load_before = _loadavg()
    old_threads = torch.get_num_threads()
    native = sysinfo.native_bf16()
    try:
        say(f"fp32 GEMM at {plan.threads} threads")
        fp32 = cpu_bench.gemm_flops(
            torch.float32, plan.gemm_sizes, plan.threads, plan.gemm_repeats, plan.gemm_budget_s
        )
        say("bf16 GEMM" + ("" if native else " (emulated: no native bf16 on this CPU)"))
        bf16 = cpu_bench.gemm_flops(
            torch.bfloat16,
            plan.gemm_sizes if native else plan.gemm_sizes_emulated,
            plan.threads,
            plan.gemm_repeats,
            plan.gemm_budget_s,
        )
        say(f"stream bandwidth ({plan.stream_bytes >> 20} MiB arrays)")
        stream = cpu_bench.stream_bandwidth(plan.stream_bytes, plan.threads, plan.stream_repeats)
        gather = cpu_bench.gather_bandwidth(plan, say)
        latency = cpu_bench.memory_latency(plan, say)
        gpu = None
        if torch.cuda.is_available():
            from recstack.hardware.gpu_bench import measure_gpu

            try:
                gpu = measure_gpu(mode, say)
            except RuntimeError as exc:  # out of memory or a driver error: keep the CPU figures
                gpu = {"name": torch.cuda.get_device_name(0), "error": f"{type(exc).__name__}: {exc}"}
    finally:
        torch.set_num_threads(old_threads)
    flags = sysinfo.bf16_flags()
    model = sysinfo.cpu_model()
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "host": sysinfo.host(),
        "cpu_model": model,
        "cpu_hash": sysinfo.cpu_hash(model, cpus),
        "cpus": cpus,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": mode != "full",
        "mode": mode,
        "duration_s": time.perf_counter() - t_start,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "threads": plan.threads,
        "load_avg": {"before": load_before, "after": _loadavg()},
        "notes": plan.notes,
        "caches": caches,
        "llc_bytes": sysinfo.llc_bytes(caches),
        "gemm_flops": {
            "fp32": {"native": True, "by_threads": fp32},
            "bf16": {
                "native": native,
                "emulated": not native,
                "flags": flags,
                "note": "native bf16 (" + ", ".join(flags) + ")"
                if native
                else "emulated: no avx512_bf16/amx_bf16 in /proc/cpuinfo",
                "by_threads": bf16,
            },
            "method": "torch.mm(a, b, out=c), square n x n, 2 n^3 FLOPs; best size kept (n)",
        },
        "stream_bandwidth": stream,
        "gather_bandwidth": gather,
        "latency_ns": latency,
        "gpu": gpu,
    }


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# -- validation -----------------------------------------------------------------
def _need(d: Any, key: str, where: str, source: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        path = f"{where}.{key}" if where else key
        raise DataError(f"{source}: machine file is missing key {path!r}")
    return d[key]


def _check_stat(st: Any, where: str, source: str) -> None:
    if not isinstance(st, dict):
        raise DataError(f"{source}: {where} must be a figure with {', '.join(STAT_KEYS)}")
    for k in ("median", "max"):
        v = _need(st, k, where, source)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v:
            raise DataError(f"{source}: {where}.{k} must be a number (got {v!r})")


def _check_by_threads(d: Any, where: str, source: str, inner: tuple[str, ...] = ()) -> None:
    if not isinstance(d, dict) or not d:
        raise DataError(f"{source}: {where} must map thread counts to figures (got {d!r})")
    for t, st in d.items():
        if not str(t).isdigit():
            raise DataError(f"{source}: {where} key {t!r} is not a thread count")
        if inner:
            for k in inner:
                _check_stat(_need(st, k, f"{where}.{t}", source), f"{where}.{t}.{k}", source)
        else:
            _check_stat(st, f"{where}.{t}", source)


def validate_machine(d: Any, source: str = "machine") -> dict[str, Any]:
    """Return ``d`` if it is a usable machine dict, else raise DataError naming the missing or bad key."""
    if not isinstance(d, dict):
        raise DataError(f"{source}: a machine file must hold a JSON object")
    for key in REQUIRED_KEYS:
        _need(d, key, "", source)
    ver = d.get("schema_version", SCHEMA_VERSION)
    if not isinstance(ver, int) or ver > SCHEMA_VERSION:
        raise DataError(
            f"{source}: schema_version {ver!r} is newer than this recstack reads ({SCHEMA_VERSION})"
        )
    fp32 = _need(d["gemm_flops"], "fp32", "gemm_flops", source)
    _check_by_threads(
        _need(fp32, "by_threads", "gemm_flops.fp32", source), "gemm_flops.fp32.by_threads", source
    )
    for dtype, entry in d["gemm_flops"].items():
        if isinstance(entry, dict) and dtype != "fp32":
            _check_by_threads(
                _need(entry, "by_threads", f"gemm_flops.{dtype}", source),
                f"gemm_flops.{dtype}.by_threads",
                source,
            )
    _check_by_threads(
        _need(d["stream_bandwidth"], "by_threads", "stream_bandwidth", source),
        "stream_bandwidth.by_threads",
        source,
        ("copy", "triad"),
    )
    grid = _need(d["gather_bandwidth"], "grid", "gather_bandwidth", source)
    if not isinstance(grid, list) or not grid:
        raise DataError(f"{source}: gather_bandwidth.grid must be a non-empty list of measured cells")
    for i, cell in enumerate(grid):
        for k in ("threads", "dist", "row_bytes", "table_bytes"):
            _need(cell, k, f"gather_bandwidth.grid[{i}]", source)
        _check_stat(
            _need(cell, "bandwidth", f"gather_bandwidth.grid[{i}]", source),
            f"gather_bandwidth.grid[{i}]",
            source,
        )
    _check_stat(_need(d["latency_ns"], "dram", "latency_ns", source), "latency_ns.dram", source)
    if not isinstance(d["caches"], list):
        raise DataError(f"{source}: caches must be a list of cache levels")
    return d


def load_machine(path: str | Path) -> dict[str, Any]:
    """Read and validate a machine file (DataError with the file name and the missing key)."""
    from recstack.config.loading import read_json_file

    return validate_machine(read_json_file(path, "machine"), str(path))


def save_machine(machine: dict[str, Any], path: str | Path) -> Path:
    return atomic_write_text(path, json.dumps(machine, indent=1, allow_nan=False) + "\n")


# -- cache ----------------------------------------------------------------------
def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def cache_path() -> Path:
    """``<cache dir>/machine-<host>-<cpu hash>.json`` for this host and CPU."""
    return cache_dir() / f"machine-{_safe(sysinfo.host())}-{sysinfo.cpu_hash()}.json"


def cache_is_current(machine: dict[str, Any], mode: str) -> str | None:
    """None when ``machine`` fits this host and ``mode``; else why it must be re-measured."""
    if machine.get("host") != sysinfo.host():
        return f"host changed ({machine.get('host')!r} -> {sysinfo.host()!r})"
    if machine.get("cpu_model") != sysinfo.cpu_model():
        return f"CPU model changed ({machine.get('cpu_model')!r} -> {sysinfo.cpu_model()!r})"
    if machine.get("cpu_hash") != sysinfo.cpu_hash():
        return "CPU count changed"
    if machine.get("schema_version") != SCHEMA_VERSION:
        return f"schema_version {machine.get('schema_version')!r} is not {SCHEMA_VERSION}"
    cached = machine.get("mode") or ("quick" if machine.get("quick") else "full")
    if MODE_RANK.get(cached, -1) < MODE_RANK[mode]:
        return f"cached figures are {cached}, {mode} requested"
    return None


def get_machine(
    refresh: bool = False,
    quick: bool = False,
    *,
    tiny: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The cached machine for this host and CPU, measured (and cached) when missing or stale.

    A full cache satisfies a quick request; a quick one does not satisfy a
    full request. An unreadable or invalid cache file is re-measured and
    overwritten (it is a cache, not user input). When the replaced cache was
    a measurement of the same host, CPU and mode, the new machine carries
    ``repeatability``: every figure's change since then
    (:mod:`recstack.hardware.repeatability`).
    """
    path = cache_path()
    mode = _mode(quick, tiny)
    say = progress or _quiet
    cached: dict[str, Any] | None = None
    if path.exists():
        try:
            cached = load_machine(path)
        except DataError as exc:
            say(f"re-measuring: {exc}")
        else:
            why = cache_is_current(cached, mode)
            if why is None and not refresh:
                return cached
            if why is not None:
                say(f"re-measuring: {why}")
    machine = measure_machine(quick, tiny=tiny, progress=progress)
    from recstack.hardware.repeatability import within_run_spread

    machine["spread"] = within_run_spread(machine)
    if cached is not None and _same_setup(cached, machine):
        from recstack.hardware.repeatability import compare_machines

        machine["repeatability"] = compare_machines(machine, cached)
    save_machine(machine, path)
    return machine


def _same_setup(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """True when two measurements are comparable figure by figure (same host, CPU, mode and schema)."""
    keys = ("host", "cpu_model", "cpu_hash", "mode", "schema_version")
    return all(before.get(k) == now.get(k) for k in keys)
