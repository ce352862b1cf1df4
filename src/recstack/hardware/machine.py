"""The machine file: measured roofs of this host, cached per host and CPU model.

``measure_machine(quick)`` runs the micro-benchmarks of
:mod:`recstack.hardware.cpu_bench` (and :mod:`recstack.hardware.gpu_bench`
with CUDA) and returns one JSON-able dict; ``get_machine()`` returns the
cached one for this host and CPU, measuring when there is none, when the
cached host or CPU model differs, when it is from an older schema or a
smaller mode than requested, or when ``refresh`` is set. The cache lives in
``$RECSTACK_CACHE_DIR`` (default ``~/.cache/recstack``) as
``machine-<host>-<cpu hash>.json``. ``load_machine(path)`` validates a file
(:mod:`recstack.schema.machine_model`) and raises :class:`~recstack.errors.DataError`
naming the first missing key, or :class:`~recstack.errors.ConfigError` naming an
impossible value. ``remeasure(old, keys)`` measures only some roofs again.

Every measurement runs the checks a profile runs (:mod:`recstack.hardware.measure_checks`)
and carries their verdict as ``contention``; one made under contention is
never cached silently (:func:`cached_or_measured`).

Keys (all figures carry median/min/max/p10/p90/repeats):
``gemm_flops.<dtype>.by_threads.<n>`` (FLOP/s), ``stream_bandwidth.by_threads.<n>.{copy,triad}``
(bytes/s), ``gather_bandwidth.grid[]`` (bytes/s per threads/dist/row/table),
``latency_ns.by_size[]`` (per ``level``) and ``latency_ns.dram`` (ns; ``method``, ``trusted``),
``caches[]``, ``gpu`` (or null), ``*.stopping`` (rounds and why they stopped),
plus ``host``, ``cpu_model``, ``cpu_hash``, ``measured_at``, ``quick``, ``mode``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from recstack.errors import ContendedRunError, DataError
from recstack.hardware import cpu_bench, sysinfo
from recstack.hardware.plan import make_plan
from recstack.hardware.sysinfo import cache_dir
from recstack.outputs import atomic_write_text

SCHEMA = "recstack.machine"
# 3: latency by native dependent loads (``latency_ns.method``/``trusted``), stopping rule per group;
# 2: gather grid measured by the native pooled kernel (1: torch.index_select). All three load.
SCHEMA_VERSION = 3
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
    from recstack.hardware.probe import machine_probe

    say = progress or _quiet
    mode = _mode(quick, tiny)
    t_start = time.perf_counter()
    caches = sysinfo.cache_levels()
    cpus = sysinfo.usable_cpus()
    plan = make_plan(mode, caches, cpus, sysinfo.available_memory_bytes())
    load_before = _loadavg()
    old_threads = torch.get_num_threads()
    native = sysinfo.native_bf16()
    from recstack.hardware.contention import ContentionWatch

    # The checks a profile runs. This process's children are not exempted: a user's other work (or a
    # benchmark's busy loops) may be one; the gather kernel's one-off compile is short against the window.
    watch = ContentionWatch(None, probe=False, threads=max(plan.threads)).start()
    try:
        say(f"fp32 GEMM at {plan.threads} threads")
        fp32_stop: dict[str, Any] = {}
        fp32 = cpu_bench.gemm_flops(torch.float32, plan.gemm_sizes, plan.threads, plan.gemm_stop, fp32_stop)
        say("bf16 GEMM" + ("" if native else " (emulated: no native bf16 on this CPU)"))
        bf16_stop: dict[str, Any] = {}
        bf16 = cpu_bench.gemm_flops(
            torch.bfloat16,
            plan.gemm_sizes if native else plan.gemm_sizes_emulated,
            plan.threads,
            plan.gemm_stop,
            bf16_stop,
        )
        say(f"stream bandwidth ({plan.stream_bytes >> 20} MiB arrays)")
        stream = cpu_bench.stream_bandwidth(plan.stream_bytes, plan.threads, plan.stream_stop)
        gather = cpu_bench.gather_bandwidth(plan, say)
        latency = cpu_bench.memory_latency(plan, say)
        say("capacity probe (compared with every profile's probe)")
        probe = machine_probe(plan.threads, rounds=2 if tiny else 5)
        gpu = None
        if torch.cuda.is_available():
            from recstack.hardware.gpu_bench import measure_gpu

            try:
                gpu = measure_gpu(mode, say)
            except RuntimeError as exc:  # out of memory or a driver error: keep the CPU figures
                gpu = {"name": torch.cuda.get_device_name(0), "error": f"{type(exc).__name__}: {exc}"}
    finally:
        torch.set_num_threads(old_threads)
    watched = watch.stop()
    flags = sysinfo.bf16_flags()
    model = sysinfo.cpu_model()
    machine = {
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
            "fp32": {"native": True, "by_threads": fp32, "stopping": fp32_stop},
            "bf16": {
                "native": native,
                "emulated": not native,
                "flags": flags,
                "note": "native bf16 (" + ", ".join(flags) + ")"
                if native
                else "emulated: no avx512_bf16/amx_bf16 in /proc/cpuinfo",
                "by_threads": bf16,
                "stopping": bf16_stop,
            },
            "method": "torch.mm(a, b, out=c), square n x n, 2 n^3 FLOPs; best size kept (n)",
        },
        "stream_bandwidth": stream,
        "gather_bandwidth": gather,
        "latency_ns": latency,
        "probe": probe,
        "gpu": gpu,
    }
    from recstack.hardware.measure_checks import judge_measurement
    from recstack.hardware.repeatability import within_run_spread

    machine["spread"] = within_run_spread(machine)
    machine["contention"] = judge_measurement(watched, machine["spread"], machine)
    return machine


ROOF_GROUPS = ("gemm.fp32", "gemm.bf16", "stream", "gather")  # the roofline's ``roof_key`` values


def remeasure(
    old: dict[str, Any], keys: set[str], mode: str | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    """A copy of ``old`` with only the roofs named by ``keys`` (``roof_key`` values of a classified
    profile: ``gemm.<dtype>``, ``stream``, ``gather``) measured again on this host, in ``old``'s mode
    (or ``mode``); every other figure is ``old``'s. ``remeasured`` lists what was measured."""
    import copy

    say = progress or _quiet
    mode = mode or old.get("mode") or ("quick" if old.get("quick") else "full")
    plan = make_plan(mode, sysinfo.cache_levels(), sysinfo.usable_cpus(), sysinfo.available_memory_bytes())
    new = copy.deepcopy(old)
    done = []
    old_threads = torch.get_num_threads()
    try:
        for key in sorted(keys):
            if key.startswith("gemm."):
                dt = key.split(".", 1)[1]
                if dt not in ("fp32", "bf16") or dt not in old["gemm_flops"]:
                    continue
                say(f"{dt} GEMM at {plan.threads} threads")
                sizes = plan.gemm_sizes if dt == "fp32" or sysinfo.native_bf16() else plan.gemm_sizes_emulated
                info: dict[str, Any] = {}
                dtype = torch.float32 if dt == "fp32" else torch.bfloat16
                by_threads = cpu_bench.gemm_flops(dtype, sizes, plan.threads, plan.gemm_stop, info)
                new["gemm_flops"][dt].update(by_threads=by_threads, stopping=info)
            elif key == "stream":
                say(f"stream bandwidth ({plan.stream_bytes >> 20} MiB arrays)")
                new["stream_bandwidth"] = cpu_bench.stream_bandwidth(plan.stream_bytes, plan.threads, plan.stream_stop)
            elif key == "gather":
                new["gather_bandwidth"] = cpu_bench.gather_bandwidth(plan, say)
            else:
                continue
            done.append(key)
    finally:
        torch.set_num_threads(old_threads)
    new.update(measured_at=datetime.now(UTC).isoformat(timespec="seconds"), remeasured=done, mode=mode)
    return new


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# -- validation -----------------------------------------------------------------
def validate_machine(d: Any, source: str = "machine") -> dict[str, Any]:
    """Return ``d`` if it is a usable machine dict (:mod:`recstack.schema.machine_model`), else raise
    DataError naming the missing or malformed key, or ConfigError naming an impossible value."""
    from recstack.schema.machine_model import check_machine

    check_machine(d, source, SCHEMA_VERSION)
    return d


def latency_trusted(machine: dict[str, Any]) -> bool:
    """True when the machine's latency came from native dependent loads (v1/v2 files: a Python loop)."""
    lat = machine.get("latency_ns")
    return isinstance(lat, dict) and lat.get("trusted") is True


def load_machine(path: str | Path) -> dict[str, Any]:
    """Read and validate a machine file (DataError with the file name and the missing key)."""
    from recstack.config.loading import read_json_file

    return validate_machine(read_json_file(path, "machine"), str(path))


def save_machine(machine: dict[str, Any], path: str | Path) -> Path:
    """Write ``machine`` once it validates as a machine file (what every reader of the file checks)."""
    validate_machine(machine, str(path))
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
    strict: bool = False,
) -> dict[str, Any]:
    """The cached machine for this host and CPU, measured (and cached) when missing or stale.

    A full cache satisfies a quick request; a quick one does not satisfy a
    full request. An unreadable or invalid cache file is re-measured and
    overwritten (it is a cache, not user input). When the replaced cache was
    a measurement of the same host, CPU and mode, the new machine carries
    ``repeatability``: every figure's change since then
    (:mod:`recstack.hardware.repeatability`). A measurement under contention
    is cached as :func:`cached_or_measured` says.
    """
    return cached_or_measured(refresh, quick, tiny=tiny, progress=progress, strict=strict)[0]


def cached_or_measured(
    refresh: bool = False,
    quick: bool = False,
    *,
    tiny: bool = False,
    progress: Progress | None = None,
    strict: bool = False,
    any_mode: bool = False,
) -> tuple[dict[str, Any], Path, bool]:
    """:func:`get_machine`, and where the machine is kept and whether it was measured now.

    ``any_mode``: a current cache of any mode is shown (``recstack machine``
    without ``--remeasure``). A cache whose capacity probe is from an older
    recstack gets a current probe (seconds). A measurement under contention
    (``contention.detected``, :mod:`recstack.hardware.measure_checks`) is never
    cached silently: a warning on stderr; with ``strict``, ContendedRunError
    (exit 3) and nothing written; else, when the cache holds a quiet
    measurement of this host it stays and the new one is kept beside it
    (:func:`~recstack.hardware.measure_checks.contended_path`), otherwise the
    new one is cached, marked. A quiet measurement always replaces the cache.
    """
    from recstack.hardware.measure_checks import is_contended

    path = cache_path()
    mode = _mode(quick, tiny)
    say = progress or _quiet
    cached = _read_cache(path, say)
    if cached is not None and not refresh:
        why = cache_is_current(cached, "tiny" if any_mode else mode)
        if why is None:
            if strict and is_contended(cached):
                raise ContendedRunError(f"--strict: the cached machine file {path} was measured under contention "
                                        f"({_evidence(cached)}); `recstack machine --remeasure` on a quiet host")
            return _with_current_probe(cached, path, say), path, False
        say(f"re-measuring: {why}")
    machine = measure_machine(quick, tiny=tiny, progress=progress)
    if cached is not None and _same_setup(cached, machine):
        from recstack.hardware.repeatability import compare_machines

        machine["repeatability"] = compare_machines(machine, cached)
    return machine, _store(machine, cached, path, strict), True


def _read_cache(path: Path, say: Progress) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        return load_machine(path)
    except DataError as exc:
        say(f"re-measuring: {exc}")
        return None


def _evidence(machine: dict[str, Any]) -> str:
    return "; ".join(str(e) for e in (machine.get("contention") or {}).get("evidence", [])[:2])


def _store(machine: dict[str, Any], cached: dict[str, Any] | None, path: Path, strict: bool) -> Path:
    """Save a fresh measurement where :func:`cached_or_measured` says; return where it went."""
    from recstack.hardware.measure_checks import contended_path, is_contended

    side = contended_path(path)
    if not is_contended(machine):
        save_machine(machine, path)
        side.unlink(missing_ok=True)  # superseded by a quiet measurement
        return path
    if strict:
        raise ContendedRunError(f"--strict: the machine was measured under contention ({_evidence(machine)}); "
                                "nothing was cached: measure again on a quiet host")
    keep_quiet = cached is not None and not is_contended(cached) and cache_is_current(cached, "tiny") is None
    where = side if keep_quiet else path
    save_machine(machine, where)
    what = (f"kept beside the cache as {side}; the cache keeps the quiet measurement of {cached['measured_at']}"
            if keep_quiet and cached is not None else
            f"cached as {path}, marked contended: every profile classified against it names it, and the next "
            "quiet measurement (`recstack machine --remeasure`) replaces it")
    sys.stderr.write(f"warning: the machine was measured under contention ({_evidence(machine)}): {what}\n")
    return where


def _with_current_probe(cached: dict[str, Any], path: Path, say: Progress) -> dict[str, Any]:
    """The cached machine with a capacity probe of the current kind (measured and saved when it had none)."""
    from recstack.hardware.probe import machine_probe, probe_settings

    probe, now = cached.get("probe") or {}, probe_settings()
    if all(probe.get(k) == now[k] for k in ("version", "stream_array_bytes", "gemm_n")):
        return cached
    say("capacity probe (the cached one is from an older recstack; compared with every profile's probe)")
    threads = cached.get("threads") if isinstance(cached.get("threads"), list) else sorted({1, sysinfo.usable_cpus()})
    cached = {**cached, "probe": machine_probe([int(t) for t in threads])}
    save_machine(cached, path)
    return cached


def _same_setup(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """True when two measurements are comparable figure by figure (same host, CPU, mode and schema)."""
    keys = ("host", "cpu_model", "cpu_hash", "mode", "schema_version")
    return all(before.get(k) == now.get(k) for k in keys)


AUTO = "auto"
"""The one word every command's --machine takes for this host's machine file (profile, analyse, roofline, ...)."""
OLD_AUTO = "host"  # analyse/roofline/import's former word for it: still accepted, with a warning


def machine_word(machine: str | Path) -> str | None:
    """``auto`` or ``none`` when ``machine`` is one of the words (``host``, the old word for ``auto``, warns),
    else None: a file name."""
    text = str(machine)
    if text == OLD_AUTO and not Path(text).exists():
        import warnings

        warnings.warn(f"--machine {OLD_AUTO} is deprecated: use --machine {AUTO}", FutureWarning, stacklevel=3)
        return AUTO
    if text.strip().lower() == "none":
        return "none"
    return AUTO if text == AUTO else None


def machine_with_file(
    machine: dict[str, Any] | str | Path | None, *, measure: bool = False, progress: Progress | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """The one machine resolver: a machine dict, a machine JSON file, ``auto`` (this host's cached
    quick-or-better measurement if current; ``measure``: measured ``--quick`` and cached when there is none),
    ``none`` or None; and the file the figures were read from (None for a dict or no machine)."""
    if machine is None or isinstance(machine, dict):
        return machine, None
    word = machine_word(machine)
    if word == "none":
        return None, None
    if word == AUTO and measure:
        return get_machine(quick=True, progress=progress), str(cache_path())
    if word == AUTO:
        path = cache_path()
        if not path.exists():
            return None, None
        cached = load_machine(path)
        return (cached, str(path)) if cache_is_current(cached, "quick") is None else (None, None)
    return load_machine(machine), str(Path(machine).resolve())
