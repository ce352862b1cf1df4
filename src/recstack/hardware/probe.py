"""The capacity probe: a short GEMM and a copy far beyond the last-level cache, the same everywhere.

A profile runs it before and after its timed steps
(:class:`recstack.hardware.contention.ContentionWatch`); the machine file
records the same probe, by the same code, when its roofs are measured
(:func:`machine_probe`, called by :func:`recstack.hardware.machine.measure_machine`),
so that a profile can tell whether the host is slower now than when its roofs
were measured. Like is compared with like:

* **working set beyond the last-level cache**: each copy array is at least
  :data:`PROBE_LLC_FACTOR` x the LLC (read from sysfs), so source and
  destination together are 4x the LLC and no repeat reads from cache, however
  the pages happen to map (16 MiB arrays in a 32 MiB L3 read 57.8 GB/s at
  machine time and 27-34 GB/s after a model's steps);
* **the same state**: the copy runs first, so the GEMM starts from caches
  holding nothing but the copy's arrays, whatever ran before it (a model's
  steps, or the machine's other benchmarks); the GEMM then runs untimed for
  :data:`PROBE_WARM_S`, so every thread's core is busy and the thread pool
  awake, as after the machine's other benchmarks (a model of small ops leaves
  all but one core idle);
* **a statistic that does not reward one lucky repeat**: each figure is the
  median of its repeats, and each probe records its repeats' spread.

The machine file keeps :data:`MACHINE_PROBE_ROUNDS` probes per thread count
with their spread; :func:`compare_probe` takes that spread as the threshold
(see :func:`probe_margin`).
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

import numpy as np
import torch

from recstack.units import si

PROBE_VERSION = 2  # 2: copy beyond the LLC, copy first, medians (1: 16 MiB arrays, best of k)
PROBE_GEMM_N = 512
PROBE_GEMM_REPEATS = 9
PROBE_STREAM_REPEATS = 5
PROBE_WARM_S = 0.05  # untimed GEMM calls first: every thread's core busy, as at machine time
PROBE_LLC_FACTOR = 2  # each copy array >= 2x the LLC: source + destination 4x (STREAM's rule)
PROBE_MIN_STREAM_BYTES = 32 << 20
PROBE_MEMORY_FRACTION = 1 / 16  # one copy array at most this share of the host's memory (MemTotal: stable)
MACHINE_PROBE_ROUNDS = 7
SPREAD_FACTOR = 3.0  # a probe this many spreads below the machine's median is slower
MIN_MARGIN = 0.2  # ...and at least this fraction below: a few rounds can underestimate the spread


@functools.cache
def host_llc_bytes() -> int:
    """This host's last-level cache in bytes (sysfs; :data:`recstack.hardware.sysinfo.DEFAULT_LLC_BYTES`
    when the OS reports none). Read once per process."""
    from recstack.hardware import sysinfo

    return sysinfo.llc_bytes(sysinfo.cache_levels())


def _total_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def stream_array_bytes(llc: int | None = None, total_memory: int | None = None) -> int:
    """Bytes of one copy array: :data:`PROBE_LLC_FACTOR` x the LLC (at least 32 MiB), rounded up
    to a power of two; capped at :data:`PROBE_MEMORY_FRACTION` of the host's memory."""
    llc = llc if llc is not None else host_llc_bytes()
    want = max(PROBE_LLC_FACTOR * llc, PROBE_MIN_STREAM_BYTES)
    size = 1 << (int(want) - 1).bit_length()
    total = total_memory if total_memory is not None else _total_memory()
    if total:
        size = min(size, max(PROBE_MIN_STREAM_BYTES, int(total * PROBE_MEMORY_FRACTION)))
    return size


def probe_settings(llc: int | None = None) -> dict[str, Any]:
    """What a probe did; two probes compare only when these are equal."""
    llc = llc if llc is not None else host_llc_bytes()
    return {
        "version": PROBE_VERSION,
        "gemm_n": PROBE_GEMM_N,
        "gemm_repeats": PROBE_GEMM_REPEATS,
        "stream_array_bytes": stream_array_bytes(llc),
        "stream_repeats": PROBE_STREAM_REPEATS,
        "llc_bytes": llc,
        "order": "copy, then GEMM",
        "gemm_warm_s": PROBE_WARM_S,
        "statistic": "median of the repeats",
    }


def probe_capacity(threads: int | None = None, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """FLOP/s of an fp32 ``n x n`` GEMM and bytes/s of a ``copy_`` between two arrays beyond the LLC.

    The copy runs first (it leaves the caches in one state for the GEMM); each
    figure is the median of its repeats after one untimed call, and
    ``*_spread`` is ``(max - min) / median`` of those repeats.
    """
    st = settings or probe_settings()
    old = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        m = int(st["stream_array_bytes"]) // 4
        copy = _copy_times(m, int(st["stream_repeats"]))  # first: the GEMM starts from the copy's cache state
        n = int(st["gemm_n"])
        gen = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
        c = torch.empty(n, n)
        gemm = _repeats(lambda: torch.mm(a, b, out=c), int(st["gemm_repeats"]), PROBE_WARM_S)
        out: dict[str, Any] = {"threads": torch.get_num_threads(), "settings": st}
        for key, amount, times in (("gemm_flops", 2.0 * n**3, gemm), ("stream_bytes_per_s", 8.0 * m, copy)):
            rates = amount / np.asarray(times)
            med = float(np.median(rates))
            out[key] = med
            out[key.split("_")[0] + "_spread"] = float((rates.max() - rates.min()) / med)
        return out
    finally:
        torch.set_num_threads(old)


def _copy_times(m: int, repeats: int) -> list[float]:
    """Seconds of each ``copy_`` between two arrays of ``m`` floats (freed on return)."""
    src, dst = torch.ones(m), torch.empty(m)
    return _repeats(lambda: dst.copy_(src), repeats)


def _repeats(fn: Any, repeats: int, warm_s: float = 0.0) -> list[float]:
    """Seconds of each of ``repeats`` timed calls, after untimed calls for ``warm_s`` (at least one: the
    thread pool, page faults of the outputs, and cores that idled through a one-thread model clocked up)."""
    t_end = time.perf_counter() + warm_s
    fn()
    while time.perf_counter() < t_end:
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn()
        times.append(max(time.perf_counter_ns() - t0, 1) * 1e-9)
    return times


def machine_probe(threads: list[int], rounds: int = MACHINE_PROBE_ROUNDS) -> dict[str, Any]:
    """The probe as the machine file records it: ``rounds`` probes per thread count (interleaved),
    each figure summarised over the rounds with its ``spread`` (``(max - min) / median``).

    Called by :func:`recstack.hardware.machine.measure_machine`, so that a
    profile's probe compares with the host's capacity when its roofs were measured.
    """
    from recstack.hardware.bench import summarize

    settings = probe_settings()
    runs: dict[int, list[dict[str, Any]]] = {t: [] for t in threads}
    for _ in range(rounds):
        for t in threads:
            runs[t].append(probe_capacity(t, settings))
    by_threads: dict[str, Any] = {}
    for t, rs in runs.items():
        by_threads[str(t)] = {}
        for k in PROBE_KINDS:
            fig = summarize([r[k] for r in rs])
            fig["spread"] = (fig["max"] - fig["min"]) / fig["median"]
            by_threads[str(t)][k] = fig
    return {
        **settings,
        "method": "copy_ of two fp32 arrays (2 x size bytes), then fp32 torch.mm n x n (2 n^3 FLOPs); median of "
        "the repeats per probe, summarised over rounds",
        "by_threads": by_threads,
    }


PROBE_KINDS = {"gemm_flops": ("GEMM", "FLOP/s"), "stream_bytes_per_s": ("stream copy", "B/s")}


def probe_margin(ref: dict[str, Any]) -> float:
    """How far below the machine probe's median a probe must fall to count as slower: the larger of
    :data:`SPREAD_FACTOR` x the probe's own spread over its rounds and :data:`MIN_MARGIN`."""
    med = float(ref.get("median") or 0.0)
    spread = ref.get("spread")
    if spread is None and med > 0:  # files without the spread: from min and max
        spread = (float(ref.get("max", med)) - float(ref.get("min", med))) / med
    return max(SPREAD_FACTOR * float(spread or 0.0), MIN_MARGIN)


def _reference(
    settings: dict[str, Any] | None, machine_probe: dict[str, Any] | None, machine_known: bool, threads: Any
) -> tuple[dict[str, Any] | None, str | None]:
    """The machine probe's figures at ``threads`` comparable with a run's probe, or why there are none."""
    if not machine_known:
        return None, "no machine file: the capacity probe is recorded, not compared"
    if machine_probe is None:
        return None, "the machine file has no capacity probe (measured by an older recstack): not compared"
    run = settings or {}
    keys = ("version", "gemm_n", "gemm_repeats", "stream_array_bytes", "stream_repeats")
    if any(machine_probe.get(k) != run.get(k) for k in keys):
        return None, ("the machine file's probe differs from this run's (an older recstack, or another host's "
                      "caches): not compared; `recstack machine` adds a current one to this host's cache (seconds)")
    ref = (machine_probe.get("by_threads") or {}).get(str(threads))
    if ref is None:
        return None, f"the machine file has no probe at {threads} thread(s): not compared"
    return ref, None


def machine_contention_note(contention: Any, file: str | None = None) -> str | None:
    """A note naming a machine file measured under contention (None for a quiet or unchecked one)."""
    if not isinstance(contention, dict) or not contention.get("detected"):
        return None
    why = "; ".join(str(e) for e in (contention.get("evidence") or [])[:2]) or "see its contention record"
    where = f" {file}" if file else ""
    return (f"the machine file{where} was measured under contention ({why}): its roofs are probably low; "
            "`recstack machine --remeasure` on a quiet host replaces it")


def compare_probe(
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    machine_probe: dict[str, Any] | None,
    machine_known: bool,
    measured_at: str | None,
    *,
    machine_contention: dict[str, Any] | None = None,
    machine_file: str | None = None,
) -> tuple[list[str], list[str], dict[str, Any]]:
    """The probes of a run against a machine file's probe: (evidence of a slower host, notes, record).

    Evidence when both probes (before and after the timed steps) lie below the
    floor, ``median x (1 - margin)`` of the machine probe (:func:`probe_margin`:
    the probe's own spread sets the margin). Used when profiling and again when
    a saved profile is re-analysed against another machine file. A machine file
    measured under contention is named in the notes.
    """
    record: dict[str, Any] = {"before": before, "after": after, "settings": (before or {}).get("settings")}
    notes: list[str] = []
    if (named := machine_contention_note(machine_contention, machine_file)) is not None:
        notes.append(named)
        record["machine_contended"] = True
    if not before or not after:
        record["notes"] = list(notes)
        return [], notes, {"probe": record}
    evidence: list[str] = []
    threads = before.get("threads")
    ref, why = _reference(before.get("settings"), machine_probe, machine_known, threads)
    if why:
        notes.append(why)
    record["machine"] = ref
    record["floor"] = {}
    record["margin"] = {}
    for kind, (label, unit) in PROBE_KINDS.items():
        b, a = float(before[kind]), float(after[kind])
        if ref is None or kind not in ref:
            continue
        med = float(ref[kind]["median"])
        margin = probe_margin(ref[kind])
        if margin >= 1.0:  # the machine probe's rounds spread by a third or more: no floor to judge by
            notes.append(f"the machine file's {label} probe spread {margin / SPREAD_FACTOR:.0%} over its rounds "
                         "(it was measured on a busy host): not compared")
            continue
        floor = med * (1.0 - margin)
        record["floor"][kind], record["margin"][kind] = floor, margin
        if max(b, a) < floor:
            when = f" ({measured_at})" if measured_at else ""
            evidence.append(
                f"host slower than when its roofs were measured: {label} probe {si(b, unit)} before and "
                f"{si(a, unit)} after the timed steps at {threads} thread(s), against {si(med, unit)} when the "
                f"machine was measured{when} (more than {margin:.0%} below: {SPREAD_FACTOR:g}x the probe's "
                f"spread, at least {MIN_MARGIN:.0%}); roofline fractions against that machine are too low"
            )
        elif min(b, a) < floor:
            notes.append(f"{label} probe changed during the run: {si(b, unit)} before, {si(a, unit)} after "
                         f"(floor {si(floor, unit)})")
    record["evidence"], record["notes"] = list(evidence), list(notes)
    return evidence, notes, {"probe": record}
